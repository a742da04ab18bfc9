"""Errors of the offsets log.

Every failure the log reports is a `LogError`; callers (the partition actor)
catch that one type, fail pending work and reload. The subclasses say why:
corruption that must not be silently dropped, a stale leader, a log that
must be reopened after an I/O error, or a directory another writer holds.
"""

from __future__ import annotations


class LogError(Exception):
    """Base class of every error raised by `log/`."""


class CorruptLogError(LogError):
    """Data that cannot be trusted and cannot be dropped: loading stops here.

    Raised for a bad batch that is followed by further valid data (a torn
    tail is truncated instead), for a bad batch in a segment that is not the
    last one, for an undecodable payload and for an unreadable snapshot or
    epoch file when the caller asked for it.
    """

    def __init__(self, path: str, position: int, offset: int | None, reason: str) -> None:
        self.path = path
        self.position = position
        self.offset = offset
        self.reason = reason
        where = f"{path} at byte {position}"
        if offset is not None:
            where += f" (offset {offset})"
        super().__init__(f"corrupt offsets log: {where}: {reason}")

    def __reduce__(self) -> tuple[type[CorruptLogError], tuple[str, int, int | None, str]]:
        # Pickled whole (a read in a Ray task raises it on the driver), not by its message.
        return CorruptLogError, (self.path, self.position, self.offset, self.reason)


class UnsupportedVersionError(LogError):
    """A CRC-valid batch or record written by a newer format this code cannot read.

    Distinct from corruption: the data is fine, this reader is too old. It is
    never truncated or skipped, because skipping a newer value of a known key
    would silently let an older value win.
    """


class FencedEpochError(LogError):
    """A writer with a lower leader epoch than the directory's tried to write."""

    def __init__(self, leader_epoch: int, current_epoch: int) -> None:
        self.leader_epoch = leader_epoch
        self.current_epoch = current_epoch
        super().__init__(f"leader epoch {leader_epoch} is fenced: the log is at epoch {current_epoch}")

    def __reduce__(self) -> tuple[type[FencedEpochError], tuple[int, int]]:
        return FencedEpochError, (self.leader_epoch, self.current_epoch)


class LogFailedError(LogError):
    """A write or fsync failed; the log refuses further writes until reopened.

    After a failed fsync the page cache no longer tells what is on disk, so
    the only safe way on is to reopen (recover) and reload from the files.
    """


class LogLockedError(LogError):
    """Another open writer holds the partition directory's lock."""


def is_storage_error(exc: BaseException) -> bool:
    """Whether `exc` says the disk under a log failed (a write, fsync, open or
    rename: ENOSPC, EROFS, EIO, EDQUOT, any OSError), as opposed to a fence,
    another writer's lock or data this code must not read. The replica then
    stops trusting its log and recovers it from what was durably written."""
    if isinstance(exc, (FencedEpochError, LogLockedError, CorruptLogError, UnsupportedVersionError)):
        return False
    if isinstance(exc, (OSError, LogFailedError)):
        return True
    return isinstance(exc, LogError) and isinstance(exc.__cause__, OSError)
