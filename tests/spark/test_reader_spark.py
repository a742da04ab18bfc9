"""The Spark reader: executors read the segments, one task each, into the log schema."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from log.compaction import compact
from log.config import LogConfig
from log.partition import PartitionLog
from log.segment import list_dir
from spark_bridge.reader import log_schema, plan_tasks, read_log_rows, read_offsets_log
from spark_bridge.rows import COLUMN_NAMES

from tests.spark.histories import (
    EPOCH,
    HISTORY,
    T0,
    commit,
    group,
    group_tombstone,
    offset_tombstone,
    write_history,
)

pytestmark = pytest.mark.spark
SMALL_SEGMENTS = LogConfig(offsets_segment_bytes=400, fsync=False, offsets_delete_retention_ms=0)


def write_awkward_log(data_dir: Path) -> None:
    """offsets-0/1: the job history; offsets-2: compacted segments; offsets-3: a torn tail."""
    write_history(str(data_dir), HISTORY)
    with PartitionLog.open(data_dir / "offsets-2", EPOCH, SMALL_SEGMENTS) as log:
        for i in range(30):
            log.append([commit("c", "t", i % 3, i, T0 + i)], EPOCH, T0 + i)
        deletes = [offset_tombstone("c", "t", 0), group("c", 1, 1, T0), group_tombstone("c")]
        log.append(deletes, EPOCH, T0 + 50)
        log.append([commit("c", "t", 1, 99, T0 + 60)], EPOCH, T0 + 60)
        log.sync()
        assert compact(log, T0 + 1_000).records_out > 0
    with PartitionLog.open(data_dir / "offsets-3", EPOCH, SMALL_SEGMENTS) as log:
        for i in range(6):
            log.append([commit("torn", "t", 0, i, T0 + i)], EPOCH, T0 + i)
    last = list_dir(str(data_dir / "offsets-3")).segments[-1].path
    os.truncate(last, os.path.getsize(last) - 4)


def test_spark_reads_every_segment_once_in_one_task_per_executor_core(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_awkward_log(tmp_path)
    tasks = plan_tasks(tmp_path)
    assert len({task.partition for task in tasks}) == 4 and len(tasks) > 8

    frame = read_offsets_log(spark, tmp_path)
    rows = [tuple(row) for row in frame.collect()]

    assert frame.schema == log_schema() and tuple(frame.columns) == COLUMN_NAMES
    assert frame.rdd.getNumPartitions() == min(len(tasks), spark.sparkContext.defaultParallelism)
    assert sorted(rows, key=lambda r: (r[0], r[1])) == list(read_log_rows(tmp_path))
    torn = [row for row in rows if row[COLUMN_NAMES.index("group_id")] == "torn"]
    assert len(torn) == 5
