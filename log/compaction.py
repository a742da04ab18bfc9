"""Compaction: keep the newest record per key, drop old tombstones.

Owns rewriting non-active segments. Rules:
- Only segments below the active (last) segment and wholly below the
  committed end are compacted: records not yet acknowledged must not
  supersede acknowledged ones, since a replica may still truncate them
  (Kafka's cleaner stops at the high watermark likewise). The committed end
  is the caller's `committed_end`, the partition's high watermark, on a
  replicated log (a leader's durable records may not be on its ISR yet),
  and the log's durable end on a log with one copy. The active segment is
  never touched.
- A record survives if it is the newest record of its key among the
  compacted segments. A key is its record type and its fields: keys of
  different types never match, even with equal fields (a classic group's
  and a consumer group's metadata are both keyed by the group id; see
  `coordinator.records`). A surviving tombstone is dropped once its batch's
  timestamp is `offsets_delete_retention_ms` old, unless it sits at or
  above the lowest snapshot offset (see `snapshot.tombstone_floor`).
  Deviation from Kafka, which counts retention from when the segment was
  first cleaned: the batch's append time is a fixed, injected reference.
- Offsets never change: a batch keeps its base offset, its offset span and
  so its next offset; surviving records keep their offsets through the
  payload's offset deltas; a batch left empty is dropped (a gap).
- A batch holding records of an unknown key version is copied unchanged
  (its keys cannot be compared), and tombstones of keys it holds are kept
  so an old value in it cannot come back.
- Segments are cleaned in groups whose input fits in one segment, each
  group into one file with the first segment's name. Crash safety:
  1. write `<base>.log.cleaned`, fsync            (crash: recovery deletes it)
  2. rename to `<base>.<end>.swap`, fsync dir     (commit point)
  3. delete the group's `.log` files, rename the swap to `<base>.log`,
     fsync dir                                    (crash: recovery redoes 3)
  At every point the directory loads to the same state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import eq, itemgetter

from coordinator.records import Record, RecordKey
from log.batch import RawBatch, encode_batch
from log.codec import PayloadError, decode_payload, encode_payload
from log.errors import CorruptLogError
from log.fsutil import fsync_dir, write_all
from log.gcpause import gc_paused
from log.partition import PartitionLog
from log.recovery import finish_swap
from log.segment import SegmentFile, SwapFile, cleaned_file_name, list_dir, swap_file_name
from log.snapshot import tombstone_floor

logger = logging.getLogger(__name__)
_key_of = itemgetter(0)
_WRITE_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SegmentGroup:
    segments: list[SegmentFile]
    # Base offset of the segment after the group: the swap covers [base, end).
    end_offset: int

    @property
    def base_offset(self) -> int:
        return self.segments[0].base_offset


@dataclass(slots=True)
class CompactionPlan:
    log: PartitionLog
    directory: str
    groups: list[SegmentGroup]
    # Offset of the newest record of every key in the compacted range.
    latest: dict[RecordKey, int]
    # Keys held by batches copied unchanged: their tombstones must stay.
    pinned: set[RecordKey]
    drop_tombstones_before_ms: int
    tombstone_floor: int | None
    fsync: bool


@dataclass(slots=True)
class CompactionStats:
    segments_in: int = 0
    segments_out: int = 0
    records_in: int = 0
    records_out: int = 0
    tombstones_dropped: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


def compact(log: PartitionLog, now_ms: int, committed_end: int | None = None) -> CompactionStats:
    """Compact the non-active segments of an open log wholly below `committed_end`
    (None: the log's durable end); safe beside appends."""
    with log.maintenance_lock, gc_paused():
        plan = plan_compaction(log, now_ms, committed_end)
        stats = CompactionStats()
        if plan is None:
            return stats
        for group in plan.groups:
            if log.closing:
                break
            dropped_before = stats.records_in - stats.records_out
            cleaned = clean_group(plan, group, stats)
            if len(group.segments) == 1 and stats.records_in - stats.records_out == dropped_before:
                # Nothing to drop and nothing to merge: the file would not change.
                os.unlink(cleaned)
            else:
                finish_swap(plan.directory, commit_swap(plan, group, cleaned), plan.fsync)
            stats.segments_out += 1
        logger.info("compacted %s: %s", plan.directory, stats)
        return stats


def plan_compaction(
    log: PartitionLog, now_ms: int, committed_end: int | None = None
) -> CompactionPlan | None:
    """Group the compactable segments and index the newest record per key."""
    segments, end = _compactable(log, committed_end)
    if not segments:
        return None
    config = log.config
    plan = CompactionPlan(
        log, log.directory, _group_by_size(segments, end, config.offsets_segment_bytes),
        {}, set(), now_ms - config.offsets_delete_retention_ms, tombstone_floor(log.directory), config.fsync,
    )
    for path, batch in _batches(plan, segments[0].base_offset, end):
        records, offsets, skipped = _decode(path, batch)
        plan.latest.update(zip(map(_key_of, records), offsets))
        if skipped:
            plan.pinned.update(map(_key_of, records))
    return plan


def clean_group(plan: CompactionPlan, group: SegmentGroup, stats: CompactionStats | None = None) -> str:
    """Step 1: write the group's surviving records to `<base>.log.cleaned`, fsynced."""
    stats = stats if stats is not None else CompactionStats()
    path = os.path.join(plan.directory, cleaned_file_name(group.base_offset))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pending: list[bytes] = []
        pending_bytes = 0
        for segment_path, batch in _batches(plan, group.base_offset, group.end_offset):
            data = _clean_batch(plan, segment_path, batch, stats)
            stats.bytes_in += batch.size_bytes
            if data:
                pending.append(data)
                pending_bytes += len(data)
                stats.bytes_out += len(data)
            if pending_bytes >= _WRITE_CHUNK_BYTES:
                write_all(fd, b"".join(pending))
                pending, pending_bytes = [], 0
        write_all(fd, b"".join(pending))
        if plan.fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    stats.segments_in += len(group.segments)
    return path


def commit_swap(plan: CompactionPlan, group: SegmentGroup, cleaned_path: str) -> SwapFile:
    """Step 2: publish the cleaned file as a swap; from here on it is authoritative."""
    path = os.path.join(plan.directory, swap_file_name(group.base_offset, group.end_offset))
    os.rename(cleaned_path, path)
    if plan.fsync:
        fsync_dir(plan.directory)
    return SwapFile(group.base_offset, group.end_offset, path)


def _compactable(log: PartitionLog, committed_end: int | None) -> tuple[list[SegmentFile], int]:
    """Segments wholly below the committed end, and where they end.

    A rolled segment may still hold batches above it (not acknowledged, so
    not visible to reads): they must not supersede anything.
    """
    limit = log.high_watermark if committed_end is None else min(committed_end, log.high_watermark)
    segments = list_dir(log.directory).segments
    bases = [s.base_offset for s in segments if s.base_offset < log.active_segment_base]
    bases.append(log.active_segment_base)
    end = max((b for b in bases if b <= limit), default=0)
    return [s for s in segments if s.base_offset < end], end


def _group_by_size(segments: list[SegmentFile], end_offset: int, max_bytes: int) -> list[SegmentGroup]:
    groups: list[list[SegmentFile]] = []
    size = 0
    for segment in segments:
        segment_size = os.path.getsize(segment.path)
        if not groups or size + segment_size > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(segment)
        size += segment_size
    ends = [g[0].base_offset for g in groups[1:]] + [end_offset]
    return [SegmentGroup(g, end) for g, end in zip(groups, ends)]


def _batches(plan: CompactionPlan, start: int, stop: int) -> Iterator[tuple[str, RawBatch]]:
    return plan.log.raw_batches(start, stop)


def _decode(path: str, batch: RawBatch) -> tuple[list[Record], list[int] | range, int]:
    try:
        decoded = decode_payload(batch.payload)
    except PayloadError as exc:
        raise CorruptLogError(path, batch.position, batch.base_offset, str(exc)) from exc
    if decoded.record_deltas is None:
        offsets: list[int] | range = range(batch.base_offset, batch.base_offset + len(decoded.records))
    else:
        offsets = list(map(int.__add__, repeat(batch.base_offset), decoded.record_deltas))
    return decoded.records, offsets, decoded.skipped


def _clean_batch(plan: CompactionPlan, path: str, batch: RawBatch, stats: CompactionStats) -> bytes:
    """The batch rewritten with its surviving records; b"" if none survive."""
    records, offsets, skipped = _decode(path, batch)
    stats.records_in += len(records) + skipped
    if skipped:
        stats.records_out += len(records) + skipped
        return _unchanged(batch)
    # Newest of its key: compared in C, the common case keeps no Python loop.
    keep = list(map(eq, map(plan.latest.__getitem__, map(_key_of, records)), offsets))
    if batch.timestamp_ms <= plan.drop_tombstones_before_ms:
        stats.tombstones_dropped += _drop_tombstones(plan, records, offsets, keep)
    kept = list(compress(records, keep))
    stats.records_out += len(kept)
    if len(kept) == len(records):
        return _unchanged(batch)
    if not kept:
        return b""
    deltas = [offset - batch.base_offset for offset in compress(offsets, keep)]
    payload = encode_payload(kept, deltas)
    return encode_batch(
        batch.base_offset, len(kept), batch.last_offset_delta, batch.leader_epoch, batch.timestamp_ms, payload
    )


def _drop_tombstones(
    plan: CompactionPlan, records: list[Record], offsets: Sequence[int], keep: list[bool]
) -> int:
    """Unmark surviving tombstones that may go; returns how many."""
    dropped = 0
    floor = plan.tombstone_floor
    for index, (record, offset) in enumerate(zip(records, offsets)):
        if keep[index] and record.value is None and record.key not in plan.pinned:
            if floor is None or offset < floor:
                keep[index] = False
                dropped += 1
    return dropped


def _unchanged(batch: RawBatch) -> bytes:
    # Re-encoding the same fields and payload reproduces the original bytes.
    return encode_batch(
        batch.base_offset, batch.record_count, batch.last_offset_delta, batch.leader_epoch,
        batch.timestamp_ms, bytes(batch.payload),
    )
