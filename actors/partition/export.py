"""Reading a replica's log files through its actor: analytics without a shared filesystem.

`LogExport` is a part of `OffsetPartition` (`actors.partition.actor`), whose
`log_files` and `read_log_file` delegate here; it owns the latest listing and
reads the host's log and directory and the roles' high watermark (`RoleMarks`).
With node-local data directories (issue 13) the
segments of a partition exist only on the nodes of its replicas, so the
Spark reader asks the replica actors for them (`spark_bridge.replica_reader`).
Rules:
- Read-only and lock-free: nothing is written, renamed or locked, and the
  log's append and maintenance locks are never taken; reads run on a worker
  thread (`asyncio.to_thread`), so the event loop keeps serving requests.
- Only the committed part is exported: batches below both the locally
  durable end and the replica's high watermark (what a Kafka consumer may
  read). Sealed segments below it are listed whole; the segment holding it
  is cut at the byte where its first batch past it begins. A replica not
  serving a log (loading, deposed, a standby) exports nothing and says so.
- `read_log_file` serves only a name of the latest `log_files` listing
  (exact match, so no path and no `..` ever reaches the filesystem), within
  that file's listed size, at most `MAX_READ_BYTES` a call. A bad argument
  raises ValueError to that caller alone; the actor goes on serving.
- A backup (`actors/backup`) holds the log below its committed end under a
  token (`hold_backup`, `log.backup_hold`: hard links taken under the log's
  maintenance lock, so no compaction changes what lies below the cut), reads
  the held files with `read_held_file` and lets go with `release_backup`.
- A compaction may replace a segment between two calls (same name, fewer
  batches at the same offsets) or remove it: the reader checks CRCs and
  offset order, relists on a short read or a missing file, and resumes at
  the next offset it needs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from log.backup_hold import committed_segments, hold_dir, hold_log, release_hold

if TYPE_CHECKING:
    from actors.partition.follower import FollowerReplica
    from actors.partition.host import PartitionHost
    from actors.partition.leader import LeaderReplication

# A call's bytes travel in one Ray object: bound what one caller can ask for.
MAX_READ_BYTES = 8 * 1024 * 1024
# A compaction renaming files during a listing makes it retry; this bounds the retries.
_LISTING_ATTEMPTS = 20


class LogNotServed(RuntimeError):
    """This replica serves no log right now: ask another replica."""


class RoleMarks(Protocol):
    """Where the export finds the high watermark (`actors.partition.roles.ReplicaRoles`)."""

    leader: LeaderReplication | None
    follower: FollowerReplica | None


class LogExport:
    """One replica's log files for remote readers (module docstring)."""

    def __init__(self, host: PartitionHost, roles: RoleMarks) -> None:
        self.host = host
        self._roles = roles
        # name -> listed bytes of the latest listing; replaced whole, never changed in place.
        self._exported: Mapping[str, int] = MappingProxyType({})
        # token -> {name: held bytes} of the backups holding this log (`hold_backup`).
        self._held: Mapping[str, Mapping[str, int]] = MappingProxyType({})

    async def log_files(self) -> list[tuple[str, int]]:
        """(name, bytes) of every segment file holding committed batches, in offset order."""
        end = self._export_end()
        directory = self.host.directory()
        files = await asyncio.to_thread(committed_files, directory, end)
        self._exported = MappingProxyType(dict(files))
        return files

    async def read_log_file(self, name: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes of the listed file `name` from byte `offset` (b"" at its listed end)."""
        _check_read(name, offset, length)
        self._export_end()  # a replica that stopped serving its log serves none of its files
        if name not in self._exported:
            await self.log_files()  # the caller may hold a newer listing than the last one here
        exported = self._exported
        if name not in exported:
            raise ValueError(f"{name!r} is not a segment file of partition {self.host.partition}'s log")
        length = min(length, exported[name] - offset)
        if length <= 0:
            return b""
        path = os.path.join(self.host.directory(), name)
        return await asyncio.to_thread(_pread, path, offset, length)

    async def hold_backup(self, token: str) -> dict[str, Any]:
        """Freeze the committed log under `token` for a backup: its cut and files (`LogHold`)."""
        log = self.host.log
        self._export_end()  # refuses when this replica serves no log
        assert log is not None
        hold = await asyncio.to_thread(hold_log, log, self._export_end, token)
        self._held = MappingProxyType({**self._held, token: MappingProxyType(dict(hold.files))})
        return {**hold.to_wire(), "source": log.directory}

    async def read_held_file(self, token: str, name: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes of file `name` of the hold `token`, within its held size."""
        _check_read(name, offset, length)
        held = self._held.get(token)
        if held is None or name not in held:
            raise ValueError(
                f"{name!r} is not a file of backup hold {token!r} of partition {self.host.partition}"
            )
        length = min(length, held[name] - offset)
        if length <= 0:
            return b""
        path = os.path.join(hold_dir(self.host.directory(), token), name)
        return await asyncio.to_thread(_pread, path, offset, length)

    async def release_backup(self, token: str) -> None:
        self._held = MappingProxyType({t: files for t, files in self._held.items() if t != token})
        await asyncio.to_thread(release_hold, self.host.directory(), token)

    def _export_end(self) -> int:
        """The offset below which this replica's batches are committed and durable."""
        log, partition = self.host.log, self.host.partition
        if log is None:
            raise LogNotServed(f"partition {partition}: this replica has no open log")
        leader, follower = self._roles.leader, self._roles.follower
        if leader is not None:
            return min(log.high_watermark, int(leader.state.high_watermark))
        if follower is not None:
            return min(log.high_watermark, int(follower.high_watermark))
        raise LogNotServed(f"partition {partition}: this replica neither leads nor follows")


def committed_files(directory: str, end: int) -> list[tuple[str, int]]:
    """(name, bytes) of the segments of `directory` holding batches below offset `end`."""
    for _ in range(_LISTING_ATTEMPTS):
        try:
            return committed_segments(directory, end)
        except FileNotFoundError:
            continue  # a compaction renamed or removed a listed file: list again
    raise LogNotServed(f"{directory}: segments kept changing while listing them")


def _check_read(name: Any, offset: Any, length: Any) -> None:
    if type(name) is not str:
        raise ValueError(f"name must be a file name (str), got {type(name).__name__}")
    for what, value in (("offset", offset), ("length", length)):
        if type(value) is not int or value < 0:
            raise ValueError(f"{what} must be an int >= 0, got {value!r}")
    if length > MAX_READ_BYTES:
        raise ValueError(f"length {length} is over the {MAX_READ_BYTES} bytes one call may read")


def _pread(path: str, offset: int, length: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, length, offset)
    finally:
        os.close(fd)
