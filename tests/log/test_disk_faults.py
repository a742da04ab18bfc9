"""A disk that fails under a PartitionLog: the log stops trusting itself at once,
and a reopen recovers from what was durably written, never from the page cache."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from log import LogError, LogFailedError, PartitionLog, materialize
from log.errors import CorruptLogError, FencedEpochError, LogLockedError, is_storage_error
from log.fsutil import check_disk

from tests.faulty_disk import FaultyDisk
from tests.log.helpers import EPOCH, NOW_MS, commit, model


def test_an_fsync_that_fails_once_leaves_only_the_durable_records_after_a_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FaultyDisk(monkeypatch, str(tmp_path))
    durable = [commit("g", "t", 0, 1), commit("g", "t", 1, 1)]
    lost = [commit("g", "t", 0, 2)]
    log = PartitionLog.open(tmp_path / "p", EPOCH)
    log.append(durable, EPOCH, NOW_MS)
    assert log.sync() == 2
    log.append(lost, EPOCH, NOW_MS)  # in the page cache only: its fsync fails
    disk.break_(errno.EIO, fsync_only=True)
    with pytest.raises(LogFailedError):
        log.sync()
    disk.heal()  # a later fsync may well succeed: the log must not trust it
    assert log.failed and log.high_watermark == 2
    with pytest.raises(LogFailedError):
        log.append(lost, EPOCH, NOW_MS)
    with pytest.raises(LogFailedError):
        log.sync()
    durable_end = log.high_watermark
    log.close()
    # The file still holds the batch (the page cache kept it): a plain reopen would serve it.
    with PartitionLog.open(tmp_path / "p", EPOCH) as plain:
        assert plain.log_end_offset == 3
    with PartitionLog.open(tmp_path / "p", EPOCH, durable_end=durable_end) as reopened:
        assert (reopened.log_end_offset, reopened.high_watermark) == (2, 2)
        assert materialize(reopened) == model(durable)


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO])
def test_a_failed_write_fails_the_log_and_a_reopen_after_the_heal_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int
) -> None:
    disk = FaultyDisk(monkeypatch, str(tmp_path))
    log = PartitionLog.open(tmp_path / "p", EPOCH)
    log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
    log.sync()
    disk.break_(error)
    with pytest.raises(LogFailedError) as failed:
        log.append([commit("g", "t", 0, 2)], EPOCH, NOW_MS)
    assert is_storage_error(failed.value) and log.failed
    with pytest.raises(LogError) as refused:
        PartitionLog.open(tmp_path / "q", EPOCH)  # a broken disk cannot take a new log either
    assert is_storage_error(refused.value)
    disk.heal()
    durable_end = log.high_watermark
    log.close()
    with PartitionLog.open(tmp_path / "p", EPOCH, durable_end=durable_end) as reopened:
        reopened.append([commit("g", "t", 0, 3)], EPOCH, NOW_MS)
        assert reopened.sync() == 2
        assert materialize(reopened) == model([commit("g", "t", 0, 3)])


def test_a_new_epoch_that_cannot_be_recorded_fails_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FaultyDisk(monkeypatch, str(tmp_path))
    log = PartitionLog.open(tmp_path / "p", EPOCH)
    disk.break_(errno.EROFS)
    with pytest.raises(LogFailedError) as failed:
        log.bump_epoch(EPOCH + 1)
    assert is_storage_error(failed.value)
    with pytest.raises(LogFailedError):
        log.append([commit("g", "t", 0, 1)], EPOCH + 1, NOW_MS)
    disk.heal()
    log.close()


def test_storage_errors_are_told_from_fences_locks_and_corruption(tmp_path: Path) -> None:
    assert is_storage_error(OSError(errno.ENOSPC, "full"))
    assert is_storage_error(LogFailedError("fsync failed"))
    wrapped = LogError("cannot open")
    wrapped.__cause__ = OSError(errno.EROFS, "read-only")
    assert is_storage_error(wrapped)
    assert not is_storage_error(LogError("the partition log directory does not exist"))
    assert not is_storage_error(FencedEpochError(1, 2))
    assert not is_storage_error(LogLockedError("another writer"))
    assert not is_storage_error(CorruptLogError("p", 0, None, "bad crc"))
    assert not is_storage_error(ValueError("a bug"))


def test_check_disk_needs_a_write_and_an_fsync_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FaultyDisk(monkeypatch, str(tmp_path))
    check_disk(str(tmp_path / "missing" / "deeper"))  # checks the nearest existing parent
    assert os.listdir(tmp_path) == []
    disk.break_(errno.ENOSPC)
    with pytest.raises(OSError):
        check_disk(str(tmp_path))
    disk.break_(errno.EIO, fsync_only=True)
    with pytest.raises(OSError):
        check_disk(str(tmp_path))
    disk.heal()
    check_disk(str(tmp_path))
    assert os.listdir(tmp_path) == []
