"""Offset analytics in Spark on the same Ray cluster (RayDP), reading the offsets log.

Modules, one job each: rows (record -> row, pure; the same columns in
Arrow), reader (log directory -> DataFrame, one task per segment, its rows
as Arrow batches by `log.columnar`, handed to the JVM), replica_reader (the same DataFrame read
through the replica actors that hold the log: no shared filesystem), jobs
(analytics DataFrames), end_offsets (what lag is measured to, now or over
time), time_windows (window sizes from the data's span), spark_session
(RayDP / local Spark start and clean stop), jvm (Java 17 check, JVM
options, leftovers), report (CSV/Parquet, with report_plots' PNGs and
report_html's page), cli (`raygroups lag`, `raygroups report`).

Imports point one way: spark_bridge -> log (read side only), never actors:
the replica handles come from the caller. Ray and RayDP are imported only
when a session starts or replica_reader reads (its read tasks are Ray
tasks), so the executors' Python workers, which import
`spark_bridge.reader`, never load them. The names below load their module
on first use: `import spark_bridge.cli` (every `raygroups` command) must
not pay for importing Spark.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EndOffsetHistory": "end_offsets",
    "EndOffsets": "end_offsets",
    "end_offsets_from_commits": "end_offsets",
    "load_end_offsets": "end_offsets",
    "commit_rate": "jobs",
    "committed_offsets": "jobs",
    "consumer_lag": "jobs",
    "expired_groups": "jobs",
    "idle_groups": "jobs",
    "lag_over_time": "jobs",
    "rebalance_history": "jobs",
    "JavaVersionError": "jvm",
    "log_schema": "reader",
    "read_log_batches": "reader",
    "read_log_rows": "reader",
    "read_offsets_log": "reader",
    "rows_dataframe": "reader",
    "read_replica_rows": "replica_reader",
    "read_replicas_log": "replica_reader",
    "COLUMN_NAMES": "rows",
    "arrow_schema": "rows",
    "record_to_row": "rows",
    "BridgeSession": "spark_session",
    "active_session": "spark_session",
    "session": "spark_session",
    "stop_session": "spark_session",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'spark_bridge' has no attribute {name!r}")
    return getattr(importlib.import_module(f"spark_bridge.{module}"), name)
