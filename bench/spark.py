"""Benchmark of reading the offsets log into Spark: `python -m bench.spark [--records N]`.

Writes a log of N records (default 1,000,000: one group-metadata record
per group, the rest offset commits) over 8 partition directories for up to
10,000 groups, then measures in the same run:
- the baseline: the log layer's own load, one process, every partition in
  turn (`log.loader.materialize`): records/s;
- the same rows built on the driver in one process (`read_log_rows`):
  the per-record Python work the executors do, without Spark;
- Spark on RayDP with 1 and with 2 executors (1 core, 1 GB each): every
  row of `read_offsets_log` through a no-op sink, best of 2, after a warm-up
  job; plus the session's start time.
Each read rate is also a ratio to the baseline. A local Ray is started for
the run (4 logical CPUs: executors hold theirs for their lifetime).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.table import Row
from bench.table import print_table as print_table_rows
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from log.config import LogConfig
from log.loader import materialize
from log.partition import PartitionLog
from spark_bridge.reader import partition_dirs, plan_tasks, read_log_rows, read_offsets_log
from spark_bridge.spark_session import session

PARTITIONS = 8
PARTITIONS_PER_GROUP = 10
TOPICS = 50
BATCH_RECORDS = 1000
EPOCH = 1
NOW_MS = 1_700_000_000_000


def group_records(groups: int) -> list[list[Record]]:
    """Per partition: the metadata record of each group routed there."""
    member = MemberRecord("m-0", None, "bench", "/10.0.0.1", 60_000, 10_000, b"sub", b"assignment")
    out: list[list[Record]] = [[] for _ in range(PARTITIONS)]
    for g in range(groups):
        value = GroupMetadataValue("consumer", 1, "range", "m-0", NOW_MS, (member,))
        out[g % PARTITIONS].append(Record(GroupMetadataKey(f"group-{g:05d}"), value))
    return out


def write_log(data_dir: str, records: int, groups: int) -> None:
    """`records` records: group metadata, then rounds of commits of every group's partitions."""
    per_partition = group_records(groups)
    commits = records - groups
    for i in range(commits):
        g = (i // PARTITIONS_PER_GROUP) % groups
        key = OffsetCommitKey(f"group-{g:05d}", f"topic-{g % TOPICS}", i % PARTITIONS_PER_GROUP)
        per_partition[g % PARTITIONS].append(Record(key, OffsetCommitValue(i, EPOCH, "", NOW_MS + i // 1000)))
    config = LogConfig(fsync=False)
    for partition, partition_records in enumerate(per_partition):
        directory = os.path.join(data_dir, f"offsets-{partition}")
        with PartitionLog.open(directory, EPOCH, config) as log:
            for start in range(0, len(partition_records), BATCH_RECORDS):
                log.append(partition_records[start : start + BATCH_RECORDS], EPOCH, NOW_MS + start)


def best_of(runs: int, fn: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def local_rows(data_dir: str, records: int) -> list[Row]:
    """The baselines, in this process."""
    directories = [directory for _, directory in partition_dirs(data_dir)]
    load_s = best_of(2, lambda: [materialize(d, use_snapshot=False) for d in directories])
    rows_s = best_of(2, lambda: sum(1 for _ in read_log_rows(data_dir)))
    return [
        Row(
            "log layer load (materialize), 1 process",
            records / load_s,
            "records/s",
            1.0,
            f"{load_s:.2f} s over {len(directories)} partitions: the baseline",
        ),
        Row(
            "rows on the driver (read_log_rows), 1 process",
            records / rows_s,
            "rows/s",
            load_s / rows_s,
            f"{rows_s:.2f} s: the executors' Python work without Spark",
        ),
    ]


def spark_rows(data_dir: str, records: int, executors: int, load_s: float) -> list[Row]:
    """Start RayDP with `executors` executors, warm up, time full reads, stop."""
    start = time.perf_counter()
    with session(num_executors=executors, app_name=f"bench-spark-{executors}") as spark:
        start_s = time.perf_counter() - start
        # The first job starts the executors' Python workers: keep that out of the figure.
        spark.sparkContext.parallelize(range(4 * executors), 2 * executors).map(lambda x: x).count()
        frame = read_offsets_log(spark, data_dir)
        read_s = best_of(2, lambda: frame.write.format("noop").mode("overwrite").save())
        counted = frame.count()
    if counted != records:
        raise AssertionError(f"Spark read {counted} rows, the log holds {records}")
    tasks = len(plan_tasks(data_dir))
    return [
        Row(
            f"Spark read, {executors} executor(s)",
            records / read_s,
            "rows/s",
            load_s / read_s,
            f"{read_s:.2f} s, {tasks} tasks, no-op sink",
        ),
        Row(f"RayDP start, {executors} executor(s)", start_s, "s", None, "init_spark until the session"),
    ]


def run(records: int, groups: int, executor_counts: list[int]) -> list[Row]:
    import ray

    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-spark-")
    try:
        write_log(data_dir, records, groups)
        rows = local_rows(data_dir, records)
        load_s = records / rows[0].value
        size = sum(os.path.getsize(s.path) for _, d in partition_dirs(data_dir) for s in _segments(d))
        rows.append(Row("log size", size / 1e6, "MB", None, f"{size / records:.1f} B/record"))
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
        try:
            for executors in executor_counts:
                rows.extend(spark_rows(data_dir, records, executors, load_s))
        finally:
            ray.shutdown()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return rows


def _segments(directory: str) -> list[Any]:
    from log.reader import LogReader

    return LogReader(directory).segments()


def print_table(rows: list[Row], records: int, groups: int) -> None:
    print_table_rows(
        f"offsets log -> Spark: {records:,} records, {groups:,} groups, {PARTITIONS} partition logs",
        rows,
        "x log load",
        3,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--executors", default="1,2", help="comma-separated executor counts")
    args = parser.parse_args()
    groups = max(1, min(args.groups, args.records // 2))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    rows = run(args.records, groups, [int(n) for n in args.executors.split(",")])
    print_table(rows, args.records, groups)


if __name__ == "__main__":
    main()
