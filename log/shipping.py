"""Whole batches as bytes, for replication: what a leader ships and a follower appends.

Owns the leader's read of raw batches and the check of what a follower is
given. Rules:
- Shipped bytes are whole batches exactly as the leader's log holds them
  (same base offset, epoch, timestamp, payload and CRC), concatenated: the
  FORMAT.md batch layout, so they need no other framing.
- A follower accepts bytes only if they parse completely into CRC-valid
  batches, start at its log end (a compaction gap before or between them
  only when the caller allows it) and never lower the leader epoch.
- A read starts from the batch holding the offset asked for (Kafka's rule)
  and stops at the stop offset (the leader's durable end); it returns at
  least one batch and otherwise stays within `max_bytes`.
- A follower fetches from where its last fetch ended, so each read leaves
  a hint (segment path and byte position of the offset it ended at); the
  next read from that offset starts there instead of hopping every header
  of the segment. A hint is used only if the batch found there starts
  exactly at that offset (base offsets are unique, so it is that batch,
  even if a compaction rewrote the file); else the read falls back to the
  full scan, which survives compaction and segment rolls.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from log.batch import RawBatch, encode_batch, scan_buffer
from log.epochs import BatchHeader, EpochEntry, assign_headers
from log.errors import LogError
from log.scan import iter_log_batches
from log.segment import ScanOutcome, read_segment

_SOURCE = "<replicated batches>"
_HINTS_KEPT = 8


class ReadHint(NamedTuple):
    path: str
    position: int


class ReadHints:
    """Next offset -> where it is, for the last few reads (one per follower)."""

    def __init__(self) -> None:
        self._hints: dict[int, ReadHint] = {}

    def get(self, offset: int) -> ReadHint | None:
        return self._hints.get(offset)

    def put(self, offset: int, hint: ReadHint) -> None:
        self._hints.pop(offset, None)
        self._hints[offset] = hint
        while len(self._hints) > _HINTS_KEPT:
            del self._hints[next(iter(self._hints))]

    def clear(self) -> None:
        self._hints.clear()


def batch_bytes(batch: RawBatch) -> bytes:
    # Re-encoding the same fields and payload reproduces the original bytes.
    return encode_batch(
        batch.base_offset, batch.record_count, batch.last_offset_delta, batch.leader_epoch,
        batch.timestamp_ms, bytes(batch.payload),
    )


def read_batches(
    directory: str, buffer_size: int, from_offset: int, stop_offset: int, max_bytes: int, hints: ReadHints
) -> bytes:
    """Whole durable batches from the one holding `from_offset`, about `max_bytes`."""
    out: list[bytes] = []
    size = 0
    last: tuple[str, RawBatch] | None = None
    hint = hints.get(from_offset)
    for path, batch in _batches_from(directory, buffer_size, from_offset, stop_offset, hint):
        data = batch_bytes(batch)
        if out and size + len(data) > max_bytes:
            break
        out.append(data)
        size += len(data)
        last = path, batch
    if last is not None:
        path, batch = last
        hints.put(batch.next_offset, ReadHint(path, batch.position + batch.size_bytes))
    return b"".join(out)


def _batches_from(
    directory: str, buffer_size: int, from_offset: int, stop_offset: int, hint: ReadHint | None
) -> Iterator[tuple[str, RawBatch]]:
    next_offset = from_offset
    if hint is not None:
        try:
            for batch in read_segment(hint.path, hint.position, from_offset, buffer_size, ScanOutcome()):
                if batch.base_offset >= stop_offset:
                    return
                if next_offset == from_offset and batch.base_offset != from_offset:
                    break
                yield hint.path, batch
                next_offset = batch.next_offset
        except FileNotFoundError:
            pass
        if next_offset >= stop_offset:
            return
    yield from iter_log_batches(directory, buffer_size, next_offset, stop_offset, durable_stop=True)


def parse_raw(data: bytes | RawBatch) -> list[tuple[RawBatch, bytes]]:
    """(batch, its bytes) of every batch in `data`; LogError unless all parse and check out."""
    if isinstance(data, RawBatch):
        data = batch_bytes(data)
    result = scan_buffer(bytes(data), 0, 0, 0, _SOURCE)
    if result.invalid_reason is not None:
        raise LogError(f"replicated batch at byte {result.position} is invalid: {result.invalid_reason}")
    if result.position != len(data) or not result.batches:
        raise LogError(f"replicated data holds no whole batches after byte {result.position}")
    return [(b, data[b.position:b.position + b.size_bytes]) for b in result.batches]


def check_raw(
    batches: list[tuple[RawBatch, bytes]], log_end: int, entries: list[EpochEntry], allow_gap: bool
) -> list[EpochEntry]:
    """Check the batches continue the log; returns the epoch entries after them."""
    planned = list(entries)
    previous_end = log_end
    for batch, _ in batches:
        if batch.base_offset < previous_end or (batch.base_offset > previous_end and not allow_gap):
            kind = "an overlap" if batch.base_offset < previous_end else "a gap"
            raise LogError(
                f"replicated batch at offset {batch.base_offset} does not start at the log end "
                f"{previous_end}: {kind}"
            )
        last_epoch = planned[-1][0] if planned else 0
        if batch.leader_epoch < last_epoch:
            raise LogError(
                f"replicated batch at offset {batch.base_offset} has leader epoch {batch.leader_epoch}, "
                f"below {last_epoch} (the log's last epoch, or the lowest valid epoch)"
            )
        header = BatchHeader(0, 0, batch.base_offset, batch.next_offset, batch.leader_epoch)
        assign_headers(planned, (header,), previous_end)
        previous_end = batch.next_offset
    return planned
