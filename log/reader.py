"""LogReader: a read-only view of a partition log, for analytics and tools.

Owns reading a directory another process may be writing. Rules:
- Never writes, truncates, renames, deletes or locks anything: safe on a
  live log, and on a log whose writer crashed.
- Sees only complete, CRC-valid batches: its end is the last valid batch
  of the last segment. A bad batch there that nothing valid follows is the
  end (a writer's batch in flight, or a torn tail its writer will
  truncate); damage followed by valid data raises `CorruptLogError`.
- Survives a concurrent compaction (see `scan`): records keep their
  offsets, only superseded ones disappear.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from coordinator.records import Record
from log.batch import RawBatch
from log.codec import PayloadError, decode_payload
from log.config import LogConfig
from log.epoch import read_leader_epoch
from log.epochs import NO_EPOCH
from log.errors import CorruptLogError, LogError
from log.scan import iter_log_batches
from log.segment import SegmentFile, list_dir


@dataclass(frozen=True, slots=True)
class LogBatch:
    """A decoded batch: its records and the offset of each."""

    base_offset: int
    next_offset: int
    leader_epoch: int
    timestamp_ms: int
    records: list[Record]
    offsets: list[int]
    # Records of unknown key versions left out of `records`.
    skipped: int
    segment_path: str
    position: int


def decode_batch(path: str, batch: RawBatch) -> LogBatch:
    try:
        decoded = decode_payload(batch.payload)
    except PayloadError as exc:
        raise CorruptLogError(path, batch.position, batch.base_offset, str(exc)) from exc
    base = batch.base_offset
    if decoded.record_deltas is None:
        offsets = list(range(base, base + len(decoded.records)))
    else:
        offsets = [base + delta for delta in decoded.record_deltas]
    return LogBatch(
        base, batch.next_offset, batch.leader_epoch, batch.timestamp_ms, decoded.records, offsets,
        decoded.skipped, path, batch.position,
    )


class LogReader:
    """Read-only access to `<data_dir>/offsets-<p>/`."""

    def __init__(self, directory: str | os.PathLike[str], config: LogConfig | None = None) -> None:
        self.directory = str(directory)
        self.config = config or LogConfig()
        if not os.path.isdir(self.directory):
            raise LogError(f"no partition log at {self.directory}")

    def segments(self) -> list[SegmentFile]:
        return list_dir(self.directory).segments

    def leader_epoch(self) -> int:
        """Highest leader epoch that wrote to the log (-1: none yet)."""
        return read_leader_epoch(self.directory)

    def raw_batches(
        self, from_offset: int = 0, stop_offset: int | None = None
    ) -> Iterator[tuple[str, RawBatch]]:
        buffer_size = self.config.offsets_load_buffer_size
        return iter_log_batches(self.directory, buffer_size, from_offset, stop_offset)

    def batches(self, from_offset: int = 0, stop_offset: int | None = None) -> Iterator[LogBatch]:
        """Decoded batches ending after `from_offset`, in offset order."""
        for path, batch in self.raw_batches(from_offset, stop_offset):
            yield decode_batch(path, batch)

    def records(self, from_offset: int = 0, stop_offset: int | None = None) -> Iterator[tuple[int, Record]]:
        """(offset, record) for every record at or after `from_offset`."""
        for batch in self.batches(from_offset, stop_offset):
            for offset, record in zip(batch.offsets, batch.records):
                if offset >= from_offset and (stop_offset is None or offset < stop_offset):
                    yield offset, record

    def end_offset(self) -> int:
        """Offset after the last complete valid batch (reads the last segment)."""
        segments = self.segments()
        if not segments:
            return 0
        end = segments[-1].base_offset
        for _, batch in self.raw_batches(end):
            end = batch.next_offset
        return end

    def last_epoch(self) -> int:
        """Leader epoch of the last complete valid batch (NO_EPOCH for an empty log): with
        `end_offset`, what an election compares. Reads from the last segment holding a batch."""
        for segment in reversed(self.segments()):
            last = NO_EPOCH
            for _, batch in self.raw_batches(segment.base_offset):
                last = batch.leader_epoch
            if last != NO_EPOCH:
                return last
        return NO_EPOCH
