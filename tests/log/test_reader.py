"""LogReader: read-only, complete batches only, offsets for analytics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from log import CorruptLogError, LogConfig, LogError, LogReader, PartitionLog, compact, materialize
from log.batch import encode_batch
from log.codec import encode_payload
from log.segment import list_dir

from tests.log.helpers import EPOCH, NOW_MS, commit, group, model, snapshot_files


def test_reader_sees_records_with_offsets_and_batch_metadata(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 4) as log:
        log.append([commit("g", "t", 0, 1), group("g")], 4, NOW_MS)
        log.append([commit("g", "t", 0, 2)], 4, NOW_MS + 5)
        log.sync()

    reader = LogReader(tmp_path)
    assert [(b.base_offset, b.next_offset, b.leader_epoch, b.timestamp_ms) for b in reader.batches()] == [
        (0, 2, 4, NOW_MS), (2, 3, 4, NOW_MS + 5)
    ]
    assert list(reader.records(1)) == [(1, group("g")), (2, commit("g", "t", 0, 2))]
    assert list(reader.records(0, 1)) == [(0, commit("g", "t", 0, 1))]
    assert reader.end_offset() == 3 and reader.leader_epoch() == 4


def test_a_live_log_is_read_up_to_its_last_complete_batch(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, EPOCH)
    log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
    log.sync()
    # A batch in flight: only part of it has reached the file.
    partial = encode_batch(1, 1, 0, EPOCH, NOW_MS, encode_payload([commit("g", "t", 0, 2)]))
    with open(list_dir(str(tmp_path)).segments[-1].path, "ab") as file:
        file.write(partial[:30])

    reader = LogReader(tmp_path)
    assert reader.end_offset() == 1
    assert materialize(tmp_path) == model([commit("g", "t", 0, 1)])
    log.close()


def test_reading_never_modifies_a_file_even_a_torn_one(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=300)
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        for i in range(20):
            log.append([commit("g", "t", i % 3, i)], EPOCH, NOW_MS)
        log.sync()
        compact(log, NOW_MS)
    with open(list_dir(str(tmp_path)).segments[-1].path, "ab") as file:
        file.write(b"RGOL torn garbage")
    before = snapshot_files(str(tmp_path))
    mtimes = {name: os.stat(tmp_path / name).st_mtime_ns for name in before}

    reader = LogReader(tmp_path)
    list(reader.records())
    reader.end_offset()
    materialize(tmp_path)

    assert snapshot_files(str(tmp_path)) == before
    assert {name: os.stat(tmp_path / name).st_mtime_ns for name in before} == mtimes


def test_reader_reports_damage_followed_by_valid_data(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, EPOCH) as log:
        for i in range(3):
            log.append([commit("g", "t", 0, i)], EPOCH, NOW_MS)
        log.sync()
    path = list_dir(str(tmp_path)).segments[-1].path
    with open(path, "r+b") as file:
        file.seek(50)
        file.write(b"\x00")

    with pytest.raises(CorruptLogError) as raised:
        list(LogReader(tmp_path).records())
    assert raised.value.path == path and raised.value.position == 0


def test_reader_of_a_missing_directory_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(LogError):
        LogReader(tmp_path / "nope")


def test_reader_follows_a_log_that_grows_and_rolls(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=300)
    with PartitionLog.open(tmp_path / "p", EPOCH, config) as log:
        reader = LogReader(tmp_path / "p")
        seen = 0
        for i in range(30):
            log.append([commit("g", "t", i % 4, i)], EPOCH, NOW_MS)
            log.sync()
            new = list(reader.records(seen))
            assert [offset for offset, _ in new] == [seen]
            seen += 1
        assert len(reader.segments()) > 3


def test_readers_are_not_locked_out_by_the_writer(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, EPOCH) as log:
        log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
        log.sync()
        assert materialize(tmp_path) == materialize(log)


def test_a_read_bound_past_the_end_is_only_a_bound(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=300)
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        for i in range(20):
            log.append([commit("g", "t", i % 3, i)], EPOCH, NOW_MS)
        log.sync()
        compact(log, NOW_MS)

    reader = LogReader(tmp_path)
    assert [o for o, _ in reader.records(0, 1000)] == [o for o, _ in reader.records()]
    for segment, following in zip(reader.segments(), reader.segments()[1:]):
        batches = list(reader.batches(segment.base_offset, following.base_offset))
        assert all(segment.base_offset <= b.base_offset < following.base_offset for b in batches)
