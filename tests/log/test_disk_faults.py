"""A disk that fails under a PartitionLog, beside tests/log/test_disk_failures.py: a new
epoch that cannot be recorded fails the log, storage errors are told from the
others, and `check_disk` needs a write and an fsync that work."""

from __future__ import annotations

import errno
import os
import pickle
from pathlib import Path

import pytest

from log import LogError, LogFailedError, PartitionLog
from log.errors import CorruptLogError, FencedEpochError, LogLockedError, is_storage_error
from log.fsutil import check_disk

from tests.failing_disk import FailingDisk
from tests.log.helpers import EPOCH, NOW_MS, commit


def test_a_new_epoch_that_cannot_be_recorded_fails_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FailingDisk(monkeypatch, str(tmp_path))
    log = PartitionLog.open(tmp_path / "p", EPOCH)
    disk.read_only()
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


@pytest.mark.parametrize("error", [CorruptLogError("p", 7, 3, "bad crc"), FencedEpochError(1, 2)])
def test_errors_with_fields_pickle_whole(error: LogError) -> None:
    """A read in a Ray task raises its error on the driver: pickled, then read back."""
    again = pickle.loads(pickle.dumps(error))

    assert type(again) is type(error) and str(again) == str(error) and vars(again) == vars(error)


def test_check_disk_needs_a_write_and_an_fsync_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FailingDisk(monkeypatch, str(tmp_path))
    check_disk(str(tmp_path / "missing" / "deeper"))  # checks the nearest existing parent
    assert os.listdir(tmp_path) == []
    disk.full()
    with pytest.raises(OSError):
        check_disk(str(tmp_path))
    disk.fail(errno.EIO, {"fsync"})
    with pytest.raises(OSError):
        check_disk(str(tmp_path))
    disk.heal()
    check_disk(str(tmp_path))
    assert os.listdir(tmp_path) == []
