"""The log on a failing disk (tests/failing_disk.py, no mounts): a write,
fsync, open, rename or truncation that fails (ENOSPC, EIO, EROFS) makes the
log refuse everything until it is reopened; nothing whose fsync failed is
ever reported durable, and the reopened log recovers from what was durable
before the failure, never from the page cache (issues 21 and 24)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from log import LogConfig, LogError, LogFailedError, LogReader, PartitionLog, materialize

from tests.failing_disk import FailingDisk
from tests.log.helpers import EPOCH, NOW_MS, commit, model

SMALL = LogConfig(offsets_segment_bytes=1024)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FailingDisk]:
    yield FailingDisk(monkeypatch, tmp_path)


def batch(n: int, size: int = 3) -> list:  # type: ignore[type-arg]
    return [commit(f"g{n}", "t", i, n * 100 + i) for i in range(size)]


def reopen_after_failure(failed: PartitionLog, config: LogConfig | None = None) -> PartitionLog:
    """How the owner of a failed log gets a working one once the disk works again.

    Close it and open the directory again, cut at the durable end the failed
    log had reached (its high watermark stays at the last successful fsync).
    """
    durable_end = failed.high_watermark
    failed.close()
    return PartitionLog.open(
        failed.directory, failed.leader_epoch, config or failed.config, durable_end=durable_end
    )


def test_the_layer_fails_only_under_its_root(disk: FailingDisk, tmp_path: Path) -> None:
    import os

    outside = os.open(os.devnull, os.O_WRONLY)
    inside = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        disk.fail(errno.EIO, {"write", "fsync"}, times=2)
        os.write(outside, b"ok")
        with pytest.raises(OSError) as raised:
            os.write(inside, b"x")
        assert raised.value.errno == errno.EIO
        with pytest.raises(OSError):
            os.fsync(inside)
        assert not disk.armed and len(disk.failures) == 2
        os.write(inside, b"x")
        os.fsync(inside)
        disk.read_only()
        with pytest.raises(OSError) as raised:
            os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT, 0o644)
        assert raised.value.errno == errno.EROFS
        os.close(os.open(tmp_path / "f", os.O_RDONLY))  # reads still work
    finally:
        os.close(outside)
        os.close(inside)


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO, errno.EDQUOT])
def test_a_failed_append_fails_the_log_until_it_is_reopened(
    disk: FailingDisk, tmp_path: Path, error: int
) -> None:
    log = PartitionLog.open(tmp_path, EPOCH)
    log.append(batch(1), EPOCH, NOW_MS)
    assert log.sync() == 3
    disk.fail(error, {"write"})
    with pytest.raises(LogFailedError):
        log.append(batch(2), EPOCH, NOW_MS)
    assert log.failed and log.high_watermark == 3
    disk.heal()
    # Even with the disk working again, the failed log refuses everything.
    for call in (lambda: log.append(batch(3), EPOCH, NOW_MS), log.sync, lambda: log.read_raw(0, 1 << 16)):
        with pytest.raises(LogFailedError):
            call()
    log = reopen_after_failure(log)
    with log:
        assert log.log_end_offset == 3
        assert log.append(batch(3), EPOCH, NOW_MS) == (3, 6)
        assert log.sync() == 6
        assert materialize(log) == model(batch(1) + batch(3))


@pytest.mark.parametrize("error", [errno.EIO, errno.ENOSPC, errno.EROFS])
def test_a_failed_fsync_never_makes_its_records_durable(
    disk: FailingDisk, tmp_path: Path, error: int
) -> None:
    log = PartitionLog.open(tmp_path, EPOCH)
    log.append(batch(1), EPOCH, NOW_MS)
    log.sync()
    log.append(batch(2), EPOCH, NOW_MS)
    disk.fail(error, {"fsync"}, times=1)
    with pytest.raises(LogFailedError):
        log.sync()
    assert log.high_watermark == 3
    # A second fsync would succeed (the kernel marked the pages clean): it must not be tried.
    with pytest.raises(LogFailedError):
        log.sync()
    assert log.high_watermark == 3
    log.close()


def test_after_a_failed_fsync_the_reopened_log_holds_only_what_was_durable(
    disk: FailingDisk, tmp_path: Path
) -> None:
    """The records whose fsync failed are still in the page cache (in the file here):
    recovering from them would trust what the disk may never have got."""
    log = PartitionLog.open(tmp_path, EPOCH)
    log.append(batch(1), EPOCH, NOW_MS)
    assert log.sync() == 3
    log.append(batch(2), EPOCH, NOW_MS)
    disk.fail(errno.EIO, {"fsync"}, times=1)
    with pytest.raises(LogFailedError):
        log.sync()
    log = reopen_after_failure(log)
    with log:
        assert (log.log_end_offset, log.high_watermark) == (3, 3), "recovered the batch whose fsync failed"
        assert materialize(log) == model(batch(1))
        assert log.append(batch(3), EPOCH, NOW_MS) == (3, 6)
        log.sync()
    assert [offset for offset, _ in LogReader(str(tmp_path)).records()] == [0, 1, 2, 3, 4, 5]


def test_a_follower_whose_fsync_failed_recovers_what_was_durable_and_catches_up(
    disk: FailingDisk, tmp_path: Path
) -> None:
    """A follower's `append_raw` then a failed fsync: after the reopen it is back at its
    durable end, and appends the leader's batches from there again."""
    with PartitionLog.open(tmp_path / "leader", EPOCH) as leader:
        for n in range(1, 4):
            leader.append(batch(n), EPOCH, NOW_MS)
        leader.sync()
        raw = [leader.read_raw(offset, 1) for offset in (0, 3, 6)]
    follower = PartitionLog.open(tmp_path / "follower", EPOCH)
    follower.append_raw(raw[0])
    assert follower.sync() == 3
    follower.append_raw(raw[1])
    disk.fail(errno.EIO, {"fsync"}, times=1)
    with pytest.raises(LogFailedError):
        follower.sync()
    follower = reopen_after_failure(follower)
    with follower:
        assert follower.log_end_offset == 3, "the follower trusted a batch whose fsync failed"
        follower.append_raw(raw[1])
        follower.append_raw(raw[2])
        assert follower.sync() == 9
        assert materialize(follower) == model(batch(1) + batch(2) + batch(3))


def test_a_full_disk_while_rolling_a_segment_fails_the_log(disk: FailingDisk, tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, EPOCH, SMALL)
    n = 0
    while log.active_segment_base == 0:
        n += 1
        log.append(batch(n), EPOCH, NOW_MS)
        log.sync()
    end = log.high_watermark
    disk.fail(errno.ENOSPC, {"open", "write", "mkdir"})
    with pytest.raises(LogFailedError):
        for m in range(n + 1, n + 100):
            log.append(batch(m), EPOCH, NOW_MS)
            log.sync()
    assert log.failed and log.high_watermark >= end
    durable = log.high_watermark
    disk.heal()
    with reopen_after_failure(log) as reopened:
        assert reopened.log_end_offset == durable
        reopened.append(batch(999), EPOCH, NOW_MS)
        reopened.sync()


def test_a_truncation_on_a_read_only_disk_fails_the_log_and_works_after_the_reopen(
    disk: FailingDisk, tmp_path: Path
) -> None:
    log = PartitionLog.open(tmp_path, EPOCH, SMALL)
    for n in range(1, 40):
        log.append(batch(n), EPOCH, NOW_MS)
    log.sync()
    disk.read_only()
    with pytest.raises(LogError):
        log.truncate_to(30)
    assert log.failed
    disk.heal()
    with reopen_after_failure(log) as reopened:
        assert reopened.truncate_to(30) == 30
        assert materialize(reopened) == model([r for n in range(1, 11) for r in batch(n)])


@pytest.mark.parametrize("error", [errno.EROFS, errno.ENOSPC, errno.EIO])
def test_opening_on_a_broken_disk_is_a_log_error(disk: FailingDisk, tmp_path: Path, error: int) -> None:
    with PartitionLog.open(tmp_path, EPOCH) as log:
        log.append(batch(1), EPOCH, NOW_MS)
    disk.fail(error)
    with pytest.raises(LogError):
        PartitionLog.open(tmp_path, EPOCH + 1)
    disk.heal()
    with PartitionLog.open(tmp_path, EPOCH + 1) as log:
        assert log.log_end_offset == 3
