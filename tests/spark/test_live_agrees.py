"""One definition of lag (coordinator/lag.py), whoever computes it: Spark's lag column is the
Python definition case by case, and the coordinator's live lag over a log and its end-offset
history is Spark's `raygroups lag` over the same log and history, row for row."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from actors.cli.live_lag import lag_rows as live_rows
from coordinator.lag import lag_messages
from coordinator.lag_query import LagRequest, rows_to_groups
from coordinator.shard import Shard
from log.loader import load_into
from spark_bridge import cli
from spark_bridge.lag_columns import lag_column

from tests.spark.histories import HISTORY, T0, write_history
from tests.spark.test_cli_spark import parse
from tests.spark.test_jobs import MOVING_ENDS

pytestmark = pytest.mark.spark
CASES = [(100, 40), (40, 40), (30, 40), (None, 40), (0, 0)]  # (end, committed)
KEYS = ("group_id", "topic", "topic_partition", "current_offset", "log_end_offset", "lag")


def test_the_spark_column_is_the_python_definition(spark: SparkSession) -> None:
    frame = spark.createDataFrame(CASES, "end long, committed long")
    lagged = frame.select(lag_column(F.col("end"), F.col("committed")).alias("lag"))
    got = [row.lag for row in lagged.collect()]
    assert got == [lag_messages(committed, end) for end, committed in CASES] == [60, 0, 0, None, 0]


def test_live_lag_and_sparks_lag_agree_row_for_row(spark: SparkSession, tmp_path: Path) -> None:
    write_history(str(tmp_path), HISTORY)
    sparks = cli.lag_rows(spark, parse(["lag", "--data-dir", str(tmp_path)]), MOVING_ENDS)

    live = []
    for partition in (0, 1):
        shard = Shard(partition=partition)
        load_into(shard, tmp_path / f"offsets-{partition}")
        shard.update_end_offsets(list(MOVING_ENDS.rows), whole=True)  # as the registry pushes them
        [(_, answer)] = shard.handle(LagRequest(None), T0 + 200_000).responses
        live += live_rows(rows_to_groups(answer.groups, answer.partitions))
    live.sort(key=lambda row: (row["group_id"], row["topic"], row["topic_partition"]))

    assert [tuple(r[k] for k in KEYS) for r in live] == [tuple(r[k] for k in KEYS) for r in sparks]
    assert [r["lag"] for r in live] == [42, None, 35, 0], "a commit past the end: 0, never negative"
    assert [r["ahead"] for r in live] == [False, False, False, True]
