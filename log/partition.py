"""PartitionLog: the writer of one offsets partition's log directory.

Owns `<data_dir>/offsets-<p>/` while open. Rules:
- One writer per directory: `open` takes an exclusive `flock` on `.lock`
  (released by the OS if the process dies) and fences by leader epoch: a
  lower epoch than the directory's is refused, a higher one is recorded.
  `sync` re-reads the epoch file, so a writer that a newer leader has
  fenced (e.g. from another host sharing the directory) stops
  acknowledging.
- `append` encodes a batch and writes it to the active segment (page cache,
  not durable) and returns its offsets at once. `sync` makes everything
  appended before it durable with one fsync and advances the high
  watermark (HWM): group commit. `sync` may run in a worker thread while
  the event loop keeps appending; a lock guards the shared state, never
  held across an fsync.
- The active segment rolls when a batch would push it past
  `offsets_segment_bytes`; the old segment is fsynced first, so every
  segment but the last is complete (recovery relies on it).
- Any write or fsync failure marks the log failed: every later call raises
  `LogFailedError` and the owner must reopen it (recovery) and reload. The
  high watermark stays where the last successful fsync left it: after a
  failed fsync the page cache may hold bytes the disk never got, so the
  owner reopens with `open(..., durable_end=log.high_watermark)`, which cuts
  whatever lies past it (PostgreSQL's "fsyncgate" lesson; Kafka takes the
  log directory offline instead).
- Reads never go past the HWM: what a reader of this log sees is durable.
- Leader epochs of the data (`epoch_entries`, see `epochs`): the checkpoint
  is rewritten before the first batch of a higher epoch is written (once
  per epoch, on the appending thread); a batch of a lower epoch than the
  log's last is refused.
- Replication (`shipping`, `truncate`): a leader ships `read_raw` bytes, a
  follower appends them unchanged with `append_raw` and cuts a diverged
  tail with `truncate_to`. The caller serializes `truncate_to` with every
  other call on this log (reads included); a leader never truncates.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

from coordinator.records import Record
from log.batch import RawBatch, encode_batch
from log.codec import encode_payload
from log.config import LogConfig
from log.epoch import EpochWatch, fence, write_leader_epoch
from log.epochs import NO_EPOCH, EpochEntry, recover_entries, write_checkpoint
from log.errors import CorruptLogError, FencedEpochError, LogError, LogFailedError, LogLockedError
from log.fsutil import fsync_dir, write_all
from log.recovery import recover
from log.scan import iter_log_batches
from log.segment import segment_file_name
from log.shipping import ReadHints, check_raw, parse_raw, read_batches
from log.truncate import execute_truncation, plan_truncation

LOCK_FILE = ".lock"
# Smallest read chunk of `read_raw`: a small fetch still reads a few batches per syscall.
_MIN_RAW_READ_BYTES = 64 * 1024
_fdatasync = getattr(os, "fdatasync", os.fsync)


class PartitionLog:
    """The open writer of one partition log; create it with `PartitionLog.open`."""

    def __init__(self, directory: str, config: LogConfig, lock_fd: int, leader_epoch: int) -> None:
        self.directory = directory
        self.config = config
        self._lock_fd = lock_fd
        self._epoch = leader_epoch
        self._state_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        # Serializes compaction and snapshot writing, and close() against them.
        self.maintenance_lock = threading.Lock()
        self._failure: LogError | None = None
        self._closed = self._closing = False
        recovered = recover(directory, config.offsets_load_buffer_size, config.fsync)
        self.truncated_bytes = recovered.truncated_bytes
        self._epochs = recover_entries(
            directory, recovered.segments, recovered.log_end_offset, config.offsets_load_buffer_size,
            config.fsync,
        )
        self._active_base = recovered.segments[-1].base_offset
        self._active_fd = os.open(recovered.segments[-1].path, os.O_WRONLY | os.O_APPEND)
        self._active_size = recovered.active_size
        self._retired_fds: list[int] = []
        self._end_offset = recovered.log_end_offset
        self._high_watermark = recovered.log_end_offset
        self._epoch_watch = EpochWatch(directory)
        self._read_hints = ReadHints()

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        leader_epoch: int,
        config: LogConfig | None = None,
        *,
        create: bool = True,
        durable_end: int | None = None,
    ) -> PartitionLog:
        """Lock, fence, recover and open a partition directory for writing.

        `create`: make the directory if it is missing; without it a missing
        directory is a `LogError` (a partition that held data must never be
        served from a new, empty one). `durable_end`: the high watermark of
        an earlier writer of this directory that failed (module rules);
        everything past it is cut before the log is used. Every failure is a
        `LogError` (an I/O error becomes one), so a caller handling LogError
        handles them all.
        """
        if leader_epoch < 0:
            raise ValueError(f"leader_epoch must be >= 0, got {leader_epoch}")
        config = config or LogConfig()
        path = str(directory)
        if not create and not os.path.isdir(path):
            raise LogError(f"{path}: the partition log directory does not exist")
        try:
            _make_dir(path, config.fsync)
            lock_fd = _lock_dir(path)
        except OSError as exc:
            raise LogError(f"{path}: cannot open the partition log: {exc}") from exc
        try:
            fence(path, leader_epoch, config.fsync)
            log = cls(path, config, lock_fd, leader_epoch)
        except OSError as exc:
            os.close(lock_fd)
            raise LogError(f"{path}: cannot open the partition log: {exc}") from exc
        except BaseException:
            os.close(lock_fd)
            raise
        if durable_end is not None and log.log_end_offset > durable_end:
            try:
                log.truncate_to(durable_end)
            except BaseException:
                log.close()
                raise
        return log

    # ------------------------------------------------------------ state

    @property
    def leader_epoch(self) -> int:
        return self._epoch

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record gets (written, maybe not durable)."""
        return self._end_offset

    @property
    def high_watermark(self) -> int:
        """Durable end: every record below it is on disk."""
        return self._high_watermark

    @property
    def active_segment_base(self) -> int:
        return self._active_base

    @property
    def failed(self) -> bool:
        return self._failure is not None

    def epoch_entries(self) -> list[EpochEntry]:
        """(epoch, start offset) of every leader epoch in the log, oldest first."""
        return list(self._epochs)

    @property
    def last_epoch(self) -> int:
        """Epoch of the log's last batch; -1 for an empty log."""
        return self._epochs[-1][0] if self._epochs else NO_EPOCH

    # ----------------------------------------------------------- writes

    def append(self, records: Sequence[Record], leader_epoch: int, timestamp_ms: int) -> tuple[int, int]:
        """Write one batch; returns (base offset, next offset). Not durable until `sync`.

        A lower `leader_epoch` than the log's is fenced; a higher one is
        recorded first (`bump_epoch`).
        """
        if leader_epoch > self._epoch:
            self.bump_epoch(leader_epoch)
        self._check_writable(leader_epoch)
        if not records:
            return self._end_offset, self._end_offset
        payload = encode_payload(records)
        count = len(records)
        with self._state_lock:
            self._check_writable(leader_epoch)
            if leader_epoch < self.last_epoch:
                raise FencedEpochError(leader_epoch, self.last_epoch)
            base = self._end_offset
            data = encode_batch(base, count, count - 1, leader_epoch, timestamp_ms, payload)
            if leader_epoch > self.last_epoch:
                self._record_epochs([*self._epochs, (leader_epoch, base)])
            try:
                self._roll_if_full(len(data))
                write_all(self._active_fd, data)
            except OSError as exc:
                raise self._fail(f"append at offset {base} failed: {exc}") from exc
            self._active_size += len(data)
            self._end_offset = base + count
        return base, base + count

    def append_raw(self, raw: bytes | RawBatch, *, allow_gap: bool = False) -> tuple[int, int]:
        """Append a leader's batches unchanged (a follower's write); (first base, next offset).

        `raw` is one `RawBatch` or bytes of whole batches (`read_raw`). They
        must start at this log's end, unless `allow_gap`: the caller fetched
        from exactly this log end and the leader's log has a compaction gap
        there. Not durable until `sync`. Not fenced by the batches' epochs
        (a follower writes older epochs' batches); the directory's fencing
        still applies to this writer.
        """
        self._check_usable()
        batches = parse_raw(raw)
        with self._state_lock:
            self._check_usable()
            entries = check_raw(batches, self._end_offset, self._epochs, allow_gap)
            if entries != self._epochs:
                self._record_epochs(entries)
            try:
                self._write_batches(batches)
            except OSError as exc:
                raise self._fail(f"replicated append at offset {self._end_offset} failed: {exc}") from exc
        return batches[0][0].base_offset, batches[-1][0].next_offset

    def _write_batches(self, batches: list[tuple[RawBatch, bytes]]) -> None:
        """One write per segment the batches go to, rolling like `append`."""
        pending: list[bytes] = []
        pending_size = 0
        for batch, data in batches:
            size = self._active_size + pending_size
            if size and size + len(data) > self.config.offsets_segment_bytes:
                write_all(self._active_fd, b"".join(pending))
                self._active_size, pending, pending_size = size, [], 0
                self._roll()
            pending.append(data)
            pending_size += len(data)
            # A roll names the next segment after the end written so far.
            self._end_offset = batch.next_offset
        write_all(self._active_fd, b"".join(pending))
        self._active_size += pending_size

    def _record_epochs(self, entries: list[EpochEntry]) -> None:
        """Persist new epoch entries before the batches that open them are written."""
        try:
            write_checkpoint(self.directory, entries, self.config.fsync)
        except OSError as exc:
            raise self._fail(f"cannot record leader epochs {entries}: {exc}") from exc
        self._epochs = entries

    def truncate_to(self, offset: int, on_step: Callable[[str], None] | None = None) -> int:
        """Remove every record at or after `offset`; returns the new log end.

        For a follower whose log diverged (see `truncate`; a leader must
        never call it). `offset` must be at most the log end and not inside
        a batch. Durable on return; the high watermark becomes the new end.
        `on_step(name)` runs before each durable step (crash tests). Any
        failure part way marks the log failed: reopen it.
        """
        with self.maintenance_lock, self._sync_lock, self._state_lock:
            self._check_usable()
            if not 0 <= offset <= self._end_offset:
                end = self._end_offset
                raise LogError(f"{self.directory}: cannot truncate to {offset}: the log ends at {end}")
            buffer_size = self.config.offsets_load_buffer_size
            try:
                plan = plan_truncation(self.directory, offset, buffer_size)
            except OSError as exc:
                raise LogError(f"{self.directory}: cannot plan truncation to {offset}: {exc}") from exc
            self._read_hints.clear()
            try:
                entries = execute_truncation(self.directory, plan, self._epochs, self.config.fsync, on_step)
                self._reopen_active(plan.keep.path, plan.keep.base_offset, plan.keep_size)
            except Exception as exc:
                raise self._fail(f"truncation to offset {offset} failed part way: {exc!r}") from exc
            self._epochs = entries
            self._end_offset = self._high_watermark = plan.new_end
            return plan.new_end

    def _reopen_active(self, path: str, base_offset: int, size: int) -> None:
        if base_offset != self._active_base:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.close(self._active_fd)
            self._active_fd = fd
        for old in self._retired_fds:
            os.close(old)
        self._retired_fds.clear()
        self._active_base, self._active_size = base_offset, size

    def sync(self) -> int:
        """Make every appended batch durable; returns the new high watermark."""
        with self._sync_lock:
            with self._state_lock:
                self._check_usable()
                target = self._end_offset
                fd = self._active_fd
                retired = list(self._retired_fds)
            try:
                if self.config.fsync and target > self._high_watermark:
                    _fdatasync(fd)
            except OSError as exc:
                raise self._fail(f"fsync failed: {exc}") from exc
            self._check_not_fenced()
            with self._state_lock:
                self._high_watermark = max(self._high_watermark, target)
                for old in retired:
                    self._retired_fds.remove(old)
                    os.close(old)
            return self._high_watermark

    def bump_epoch(self, leader_epoch: int) -> None:
        """Record a higher leader epoch for this open writer (same owner, new term)."""
        with self._state_lock:
            self._check_usable()
            if leader_epoch < self._epoch:
                raise FencedEpochError(leader_epoch, self._epoch)
            if leader_epoch > self._epoch:
                try:
                    write_leader_epoch(self.directory, leader_epoch, self.config.fsync)
                except OSError as exc:
                    raise self._fail(f"cannot record epoch {leader_epoch}: {exc}") from exc
                self._epoch = leader_epoch

    def _roll_if_full(self, batch_bytes: int) -> None:
        if self._active_size and self._active_size + batch_bytes > self.config.offsets_segment_bytes:
            self._roll()

    def _roll(self) -> None:
        if self.config.fsync:
            os.fsync(self._active_fd)
        path = os.path.join(self.directory, segment_file_name(self._end_offset))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        if self.config.fsync:
            fsync_dir(self.directory)
        # A sync running in a worker thread may still fsync the old fd:
        # it is closed by the next sync, not here.
        self._retired_fds.append(self._active_fd)
        self._active_fd, self._active_base, self._active_size = fd, self._end_offset, 0

    # ------------------------------------------------------------ reads

    def raw_batches(
        self, from_offset: int = 0, stop_offset: int | None = None
    ) -> Iterator[tuple[str, RawBatch]]:
        """(segment path, batch) of durable batches ending after `from_offset`."""
        self._check_usable()
        hwm = self._high_watermark
        stop = hwm if stop_offset is None else min(stop_offset, hwm)
        buffer_size = self.config.offsets_load_buffer_size
        # Everything below the high watermark is acknowledged: it must be there.
        return iter_log_batches(self.directory, buffer_size, from_offset, stop, durable_stop=True)

    def read_raw(self, from_offset: int, max_bytes: int) -> bytes:
        """Whole durable batches from the one holding `from_offset` (a leader's read for a follower).

        At least one batch, else at most about `max_bytes`; bytes that
        `append_raw` takes. Empty at or past the high watermark (nothing
        durable yet); `from_offset` past the log end or negative is a
        `LogError` (Kafka's OFFSET_OUT_OF_RANGE). Safe beside appends,
        syncs, rolls and compaction in other threads.
        """
        self._check_usable()
        hwm = self._high_watermark
        if not 0 <= from_offset <= self._end_offset:
            raise LogError(f"{self.directory}: offset {from_offset} is out of range [0, {self._end_offset}]")
        if from_offset >= hwm:
            return b""
        buffer_size = min(self.config.offsets_load_buffer_size, max(max_bytes, _MIN_RAW_READ_BYTES))
        return read_batches(self.directory, buffer_size, from_offset, hwm, max_bytes, self._read_hints)

    # ------------------------------------------------------- lifecycle

    @property
    def closing(self) -> bool:
        """Set once `close` began: long maintenance work stops at the next step."""
        return self._closing

    def close(self) -> None:
        """Sync (unless failed), release files and the directory lock; idempotent.

        Waits for a compaction or snapshot running in another thread: the
        directory lock must not be released while they still change files.
        The descriptors are closed under the locks that `append` and `sync`
        hold, so a write in another thread never finds its descriptor number
        freed (and maybe reused by another file) under it.
        """
        if self._closed:
            return
        self._closing = True
        try:
            if self._failure is None:
                self.sync()
        finally:
            with self.maintenance_lock, self._sync_lock, self._state_lock:
                self._close_files()

    def _close_files(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._epoch_watch.close()
        for fd in [self._active_fd, *self._retired_fds, self._lock_fd]:
            try:
                os.close(fd)
            except OSError:
                pass
        self._retired_fds.clear()

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---------------------------------------------------------- checks

    def _check_usable(self) -> None:
        if self._closed:
            raise LogError(f"{self.directory}: log is closed")
        if self._failure is not None:
            raise LogFailedError(f"{self.directory}: log failed earlier, reopen it: {self._failure}")

    def _check_writable(self, leader_epoch: int) -> None:
        self._check_usable()
        if leader_epoch < self._epoch:
            raise FencedEpochError(leader_epoch, self._epoch)

    def _check_not_fenced(self) -> None:
        try:
            current = self._epoch_watch.read()
        except (OSError, CorruptLogError) as exc:
            # Fencing must not fail open: unable to prove we still lead, stop.
            raise self._fail(f"cannot read the leader epoch: {exc}") from exc
        if current > self._epoch:
            self._failure = FencedEpochError(self._epoch, current)
            raise self._failure

    def _fail(self, reason: str) -> LogFailedError:
        error = LogFailedError(f"{self.directory}: {reason}")
        self._failure = error
        return error


def _make_dir(path: str, fsync: bool) -> None:
    missing = []
    current = Path(path)
    while not current.is_dir():
        missing.append(current)
        current = current.parent
    if not missing:
        return
    os.makedirs(path, exist_ok=True)
    if fsync:
        # Each new directory's entry lives in its parent (replica_dir nests them).
        for created in missing:
            fsync_dir(str(created.parent))


def _lock_dir(path: str) -> int:
    """The directory's writer lock (flock), which records the holder's process id: a
    writer refused names the holder (this process: a log of its own still open)."""
    fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        whose = "this process" if holder == str(os.getpid()) else "another process"
        raise LogLockedError(
            f"{path} is open for writing by another writer (process {holder}, {whose})"
        ) from exc
    pid = str(os.getpid()).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, pid, 0)
    return fd
