"""A summarized read's rows (spark_bridge/summary.py), driver side (no Spark): a
hand-made partition whose window rows, live changes and kept records are known.
The tables from them are checked against every record through Spark in
test_summary.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from log.partition import PartitionLog
from spark_bridge.reader import SegmentTask, log_extent, summarized_task_batches
from spark_bridge.summary import LIVE_ROW, WINDOW_ROW

from tests.spark.histories import EPOCH, FAST, T0, commit, group, offset_tombstone

WINDOW_MS = 10_000


def summarized(tmp_path: Path, batches: list[tuple[int, list]]) -> list[dict]:  # type: ignore[type-arg]
    directory = tmp_path / "offsets-0"
    log = PartitionLog.open(str(directory), EPOCH, FAST)
    for at_ms, records in batches:
        log.append(records, EPOCH, at_ms)
    log.close()
    task = SegmentTask(str(directory), 0, 0, None)
    return [row for batch in summarized_task_batches(task, WINDOW_MS) for row in batch.to_pylist()]


def test_a_partitions_commits_become_rows_per_group_and_window(tmp_path: Path) -> None:
    rows = summarized(tmp_path, [
        (T0, [group("g", 1, 1, T0), commit("g", "t", 0, 5, T0), commit("g", "t", 0, 7, T0)]),
        (T0 + 1_000, [commit("g", "t", 1, 3, T0), commit("h", "t", 0, 9, T0)]),
        (T0 + WINDOW_MS, [commit("g", "t", 0, 8, T0), offset_tombstone("g", "t", 1)]),
    ])
    windows = [(r["group_id"], r["window_start_ms"], r["commits"], r["partitions"], r["committed_change"])
               for r in rows if r["record_type"] == WINDOW_ROW]
    first = T0 - T0 % WINDOW_MS
    # g: 7 + 3 live after the first window; then 8 on partition 0, partition 1 deleted.
    assert sorted(windows) == [
        ("g", first, 3, 2, 10), ("g", first + WINDOW_MS, 1, 1, 8 - 7 - 3), ("h", first, 1, 1, 9),
    ]
    lives = [(r["group_id"], r["topic_partition"], r["window_start_ms"], r["live_change"])
             for r in rows if r["record_type"] == LIVE_ROW]
    assert sorted(lives) == [
        ("g", 0, first, 1), ("g", 1, first, 1), ("g", 1, first + WINDOW_MS, -1), ("h", 0, first, 1),
    ]
    records = sorted((r["offset"], r["record_type"], r["group_id"], r["topic_partition"]) for r in rows
                      if r["record_type"] not in (WINDOW_ROW, LIVE_ROW))
    # The group record; each key's newest (t-0 at 8, t-1's tombstone, h); the oldest record
    # (offset 1); each topic partition's highest live commit (t-0: h's 9; t-1: g's 3).
    assert records == [
        (0, "group_metadata", "g", None), (1, "offset_commit", "g", 0), (3, "offset_commit", "g", 1),
        (4, "offset_commit", "h", 0), (5, "offset_commit", "g", 0), (6, "offset_commit", "g", 1),
    ]
    assert all(r["window_start_ms"] is None for r in rows if r["record_type"] == "offset_commit")
    assert all(r["batch_timestamp"] is None for r in rows if r["record_type"] in (WINDOW_ROW, LIVE_ROW))


def test_a_partition_without_commits_is_its_records(tmp_path: Path) -> None:
    rows = summarized(tmp_path, [(T0, [group("g", 1, 1, T0)]), (T0 + 5, [group("g", 2, 1, T0)])])
    assert [(r["record_type"], r["generation"], r["commits"]) for r in rows] == [
        ("group_metadata", 1, None), ("group_metadata", 2, None),
    ]


def test_the_extent_comes_from_the_batch_headers(tmp_path: Path) -> None:
    summarized(tmp_path, [(T0 + 7, [commit("g", "t", 0, 1, T0)] * 3), (T0 - 2, [commit("g", "t", 0, 2, T0)])])
    assert log_extent(tmp_path) == (4, (T0 - 2, T0 + 7))
    assert log_extent(tmp_path / "offsets-0") == (0, None)  # not a data directory: no partitions


def test_a_window_below_one_ms_is_refused(tmp_path: Path) -> None:
    from spark_bridge.rows import arrow_schema
    from spark_bridge.summary import summarize

    with pytest.raises(ValueError, match="window_ms must be >= 1"):
        summarize(arrow_schema().empty_table(), 0)
