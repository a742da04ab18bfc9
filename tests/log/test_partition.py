"""PartitionLog: appends, durability and the high watermark, rolling, fencing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from log import (
    CorruptLogError,
    FencedEpochError,
    LogConfig,
    LogError,
    LogFailedError,
    LogLockedError,
    PartitionLog,
    materialize,
    partition_dir,
    read_leader_epoch,
)
from log import partition as partition_module
from log.epoch import EPOCH_FILE, NO_EPOCH, EpochWatch, write_leader_epoch
from log.segment import list_dir

from tests.log.helpers import EPOCH, NOW_MS, commit, group, model


def test_partition_dir_is_offsets_dash_partition(tmp_path: Path) -> None:
    assert partition_dir(tmp_path, 7) == str(tmp_path / "offsets-7")


def test_a_new_log_starts_empty_at_offset_zero(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path / "p", EPOCH) as log:
        assert (log.log_end_offset, log.high_watermark) == (0, 0)
        assert materialize(log) == {}
    assert sorted(os.listdir(tmp_path / "p")) == [".lock", "00000000000000000000.log", "leader-epoch"]


def test_append_returns_offsets_and_sync_advances_the_high_watermark(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, EPOCH) as log:
        assert log.append([commit("g", "t", 0, 1), commit("g", "t", 1, 2)], EPOCH, NOW_MS) == (0, 2)
        assert log.append([group("g")], EPOCH, NOW_MS) == (2, 3)
        assert log.append([], EPOCH, NOW_MS) == (3, 3)
        assert (log.log_end_offset, log.high_watermark) == (3, 0)

        assert log.sync() == 3
        assert log.high_watermark == 3


def test_reads_of_the_writer_stop_at_the_high_watermark(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, EPOCH) as log:
        log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
        log.sync()
        log.append([commit("g", "t", 0, 2)], EPOCH, NOW_MS)

        assert materialize(log) == model([commit("g", "t", 0, 1)])
        assert [b.base_offset for _, b in log.raw_batches()] == [0]


def test_reopen_sees_everything_synced(tmp_path: Path) -> None:
    records = [commit("g", "t", p, p) for p in range(5)] + [group("g")]
    with PartitionLog.open(tmp_path, EPOCH) as log:
        for record in records:
            log.append([record], EPOCH, NOW_MS)
        log.sync()

    with PartitionLog.open(tmp_path, EPOCH) as log:
        assert log.log_end_offset == log.high_watermark == 6
        assert materialize(log) == model(records)
        assert log.append([commit("g", "t", 0, 9)], EPOCH, NOW_MS) == (6, 7)


def test_segments_roll_at_the_configured_size_and_are_named_by_base_offset(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=1000)
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        for i in range(40):
            log.append([commit("g", "t", i % 3, i), commit("g", "u", 0, i)], EPOCH, NOW_MS)
        log.sync()
        segments = list_dir(str(tmp_path)).segments
        assert log.active_segment_base == segments[-1].base_offset

    assert len(segments) > 3
    for segment in segments:
        assert os.path.basename(segment.path) == f"{segment.base_offset:020d}.log"
    assert all(os.path.getsize(s.path) <= 1000 for s in segments)
    assert segments[0].base_offset == 0 and all(s.base_offset % 2 == 0 for s in segments)


def test_a_batch_bigger_than_a_segment_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=200)
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        log.append([commit("g", "t", 0, 0)], EPOCH, NOW_MS)
        log.append([commit("g", "t", p, p) for p in range(100)], EPOCH, NOW_MS)
        log.append([commit("g", "t", 0, 5)], EPOCH, NOW_MS)
        log.sync()

    assert [s.base_offset for s in list_dir(str(tmp_path)).segments] == [0, 1, 101]
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        assert log.log_end_offset == 102


def test_opening_with_a_lower_epoch_is_fenced(tmp_path: Path) -> None:
    PartitionLog.open(tmp_path, 5).close()

    with pytest.raises(FencedEpochError) as raised:
        PartitionLog.open(tmp_path, 4)
    assert (raised.value.leader_epoch, raised.value.current_epoch) == (4, 5)
    assert read_leader_epoch(str(tmp_path)) == 5
    PartitionLog.open(tmp_path, 5).close()
    PartitionLog.open(tmp_path, 6).close()
    assert read_leader_epoch(str(tmp_path)) == 6


def test_appending_with_a_lower_epoch_is_fenced_and_a_higher_one_recorded(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 3) as log:
        with pytest.raises(FencedEpochError):
            log.append([commit("g", "t", 0, 1)], 2, NOW_MS)
        assert log.log_end_offset == 0

        log.append([commit("g", "t", 0, 1)], 4, NOW_MS)
        assert log.leader_epoch == 4 == read_leader_epoch(str(tmp_path))
        with pytest.raises(FencedEpochError):
            log.append([commit("g", "t", 0, 1)], 3, NOW_MS)


def test_the_epoch_watch_sees_every_replacement_of_the_epoch_file(tmp_path: Path) -> None:
    directory = str(tmp_path)
    watch = EpochWatch(directory)
    assert watch.read() == NO_EPOCH
    # Replaced in quick succession: a freed inode could be reused for the
    # next file, which the watch must not mistake for the one it read.
    for epoch in range(1, 40):
        write_leader_epoch(directory, epoch, fsync=False)
        assert watch.read() == epoch == watch.read()
    (tmp_path / "tmp").write_bytes(b"not json")
    os.replace(tmp_path / "tmp", tmp_path / EPOCH_FILE)
    with pytest.raises(CorruptLogError):
        watch.read()
    write_leader_epoch(directory, 40, fsync=False)
    assert watch.read() == 40
    os.remove(tmp_path / EPOCH_FILE)
    assert watch.read() == NO_EPOCH
    watch.close()


def test_a_writer_fenced_by_a_newer_leader_stops_acknowledging(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, 1)
    log.append([commit("g", "t", 0, 1)], 1, NOW_MS)
    # A newer leader on another host (no shared flock) records its epoch.
    write_leader_epoch(str(tmp_path), 2)

    with pytest.raises(FencedEpochError):
        log.sync()
    assert log.high_watermark == 0
    with pytest.raises(LogFailedError):
        log.append([commit("g", "t", 0, 2)], 1, NOW_MS)
    log.close()


def test_a_second_writer_is_locked_out_until_the_first_closes(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, 1)
    with pytest.raises(LogLockedError, match=f"process {os.getpid()}, this process"):
        PartitionLog.open(tmp_path, 2)
    assert read_leader_epoch(str(tmp_path)) == 1
    log.close()
    PartitionLog.open(tmp_path, 2).close()


def test_a_failed_fsync_fails_the_log_until_it_is_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PartitionLog.open(tmp_path, EPOCH)
    log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
    log.sync()
    log.append([commit("g", "t", 0, 2)], EPOCH, NOW_MS)

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(partition_module, "_fdatasync", broken_fsync)
    with pytest.raises(LogFailedError):
        log.sync()
    assert log.failed and log.high_watermark == 1
    with pytest.raises(LogFailedError):
        log.append([commit("g", "t", 0, 3)], EPOCH, NOW_MS)
    with pytest.raises(LogFailedError):
        log.sync()
    log.close()
    monkeypatch.undo()

    with PartitionLog.open(tmp_path, EPOCH) as reopened:
        assert reopened.log_end_offset in (1, 2)


def test_fsync_false_still_acknowledges_and_reloads(tmp_path: Path) -> None:
    config = LogConfig(fsync=False)
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
        assert log.sync() == 1
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        assert materialize(log) == model([commit("g", "t", 0, 1)])


def test_a_closed_log_refuses_use_and_close_is_idempotent(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, EPOCH)
    log.close()
    log.close()
    with pytest.raises(LogError):
        log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
    with pytest.raises(ValueError):
        PartitionLog.open(tmp_path, -1)


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        LogConfig(offsets_segment_bytes=0)
    with pytest.raises(ValueError):
        LogConfig(offsets_delete_retention_ms=-1)
