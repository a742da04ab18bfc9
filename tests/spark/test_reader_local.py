"""The reader on logs written by the real log layer, driver side (no Spark).

Tombstones, compacted segments, a torn tail and a live writer: the rows
are the log's records, read without changing a byte of the directory.
The Spark reader runs the same tasks in executors (test_reader_spark).
"""

from __future__ import annotations

import os
from pathlib import Path

from coordinator.records import GroupMetadataKey, OffsetCommitKey
from log.batch import encode_batch
from log.codec import encode_payload
from log.compaction import compact
from log.config import LogConfig
from log.loader import materialize
from log.partition import PartitionLog
from log.segment import list_dir
from spark_bridge.reader import SegmentTask, partition_dirs, plan_tasks, read_log_rows, read_task_rows
from spark_bridge.rows import COLUMN_NAMES, record_to_row

from tests.spark.histories import EPOCH, FAST, HISTORY, T0, commit, group, offset_tombstone, write_history

SMALL_SEGMENTS = LogConfig(offsets_segment_bytes=400, fsync=False, offsets_delete_retention_ms=1_000)
COL = {name: i for i, name in enumerate(COLUMN_NAMES)}


def files_of(directory: str) -> dict[str, tuple[int, int, bytes]]:
    """name -> (size, mtime, bytes) of every file: to prove reading changed nothing."""
    out = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        with open(path, "rb") as file:
            out[name] = (os.path.getsize(path), os.stat(path).st_mtime_ns, file.read())
    return out


def replayed(rows: list[tuple]) -> dict[tuple, tuple]:
    """Replay rows in log order: key -> latest row, tombstones delete (the loader's rule)."""
    state: dict[tuple, tuple] = {}
    for row in sorted(rows, key=lambda r: (r[COL["partition"]], r[COL["offset"]])):
        key = (row[COL["record_type"]], row[COL["group_id"]], row[COL["topic"]], row[COL["topic_partition"]])
        if row[COL["tombstone"]]:
            state.pop(key, None)
        else:
            state[key] = row
    return state


def materialized_keys(directory: str) -> set[tuple]:
    keys = set()
    for key in materialize(directory, use_snapshot=False):
        if isinstance(key, OffsetCommitKey):
            keys.add(("offset_commit", key.group_id, key.topic, key.partition))
        elif isinstance(key, GroupMetadataKey):
            keys.add(("group_metadata", key.group_id, None, None))
    return keys


def test_rows_are_the_records_at_their_offsets_with_batch_times(tmp_path: Path) -> None:
    write_history(str(tmp_path), HISTORY)

    rows = list(read_log_rows(tmp_path))

    expected = []
    for partition in (0, 1):
        batches = [(at_ms, records) for p, at_ms, records in HISTORY if p == partition]
        flat = [(at_ms, record) for at_ms, records in batches for record in records]
        expected += [record_to_row(partition, offset, at_ms, r) for offset, (at_ms, r) in enumerate(flat)]
    assert rows == expected
    assert sum(row[COL["tombstone"]] for row in rows) == 3
    assert [p for p, _ in partition_dirs(tmp_path)] == [0, 1]


def test_tasks_are_offset_ranges_of_segments(tmp_path: Path) -> None:
    directory = str(tmp_path / "offsets-4")
    with PartitionLog.open(directory, EPOCH, SMALL_SEGMENTS) as log:
        for i in range(30):
            log.append([commit("g", "t", i % 3, i, T0 + i)], EPOCH, T0 + i)
    bases = [segment.base_offset for segment in list_dir(directory).segments]
    assert len(bases) > 3

    tasks = plan_tasks(tmp_path)

    assert tasks == [SegmentTask(directory, 4, b, s) for b, s in zip(bases, [*bases[1:], None])]
    per_task = [[row[COL["offset"]] for row in read_task_rows(task)] for task in tasks]
    assert [offset for offsets in per_task for offset in offsets] == list(range(30))


def test_compacted_segments_read_as_their_surviving_records(tmp_path: Path) -> None:
    directory = str(tmp_path / "offsets-0")
    with PartitionLog.open(directory, EPOCH, SMALL_SEGMENTS) as log:
        for i in range(40):
            log.append([commit("g", "t", i % 4, i, T0 + i)], EPOCH, T0 + i)
            if i == 20:
                log.append([offset_tombstone("g", "t", 3), group("g", 1, 2, T0)], EPOCH, T0 + i)
        log.append([offset_tombstone("g", "t", 2)], EPOCH, T0 + 100)
        log.sync()
        before = list(read_log_rows(tmp_path))
        stats = compact(log, T0 + 10_000)
    assert stats.records_out < stats.records_in

    after = list(read_log_rows(tmp_path))

    assert len(after) < len(before)
    assert set(after) <= set(before)
    offsets = [row[COL["offset"]] for row in after]
    assert offsets == sorted(offsets)
    assert replayed(after).keys() == replayed(before).keys() == materialized_keys(directory)
    assert replayed(after) == replayed(before)


def test_a_torn_tail_is_the_end_and_stays_untouched(tmp_path: Path) -> None:
    directory = str(tmp_path / "offsets-0")
    with PartitionLog.open(directory, EPOCH, FAST) as log:
        for i in range(5):
            log.append([commit("g", "t", 0, i, T0 + i), commit("g", "t", 1, i, T0 + i)], EPOCH, T0 + i)
    last = list_dir(directory).segments[-1].path
    os.truncate(last, os.path.getsize(last) - 3)
    before = files_of(directory)

    rows = list(read_log_rows(tmp_path))

    assert [row[COL["offset"]] for row in rows] == list(range(8))
    assert files_of(directory) == before


def test_a_live_log_is_read_up_to_its_last_complete_batch(tmp_path: Path) -> None:
    directory = str(tmp_path / "offsets-0")
    log = PartitionLog.open(directory, EPOCH, FAST)
    try:
        log.append([commit("g", "t", 0, 1, T0)], EPOCH, T0)
        log.sync()
        # A batch in flight: only part of it has reached the file.
        partial = encode_batch(1, 1, 0, EPOCH, T0, encode_payload([commit("g", "t", 0, 2, T0)]))
        with open(list_dir(directory).segments[-1].path, "ab") as file:
            file.write(partial[:30])

        rows = list(read_log_rows(tmp_path))
    finally:
        log.close()

    assert [(row[COL["offset"]], row[COL["committed_offset"]]) for row in rows] == [(0, 1)]


def test_an_empty_data_dir_has_no_tasks(tmp_path: Path) -> None:
    (tmp_path / "not-a-partition").mkdir()
    assert plan_tasks(tmp_path) == [] and list(read_log_rows(tmp_path)) == []
