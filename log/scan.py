"""Reading a partition log's batches in offset order, across segments.

Shared by the writer (reads below its high watermark), the read-only
reader, the loader, compaction and snapshots. Rules:
- Start at the segment holding `from_offset` and hop batch headers to the
  first batch ending after it; never yield a batch at or past `stop_offset`.
- A bad batch in a segment that is not the last one, or below the
  writer's high watermark (acknowledged data), is `CorruptLogError`.
- A bad batch in the last segment is the end of the log when nothing valid
  follows it (a torn tail, or a live writer's batch in flight), and
  `CorruptLogError` when a valid batch follows.
- A segment that disappears while being listed or opened was replaced by a
  compaction: list again and go on from the next offset needed. After the
  last listed segment, list again: if the writer rolled meanwhile, go on.
  A compaction may have cleaned what was read against records in newer
  segments, so stopping early could show a state that never existed.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from log.batch import RawBatch
from log.errors import CorruptLogError, LogError
from log.segment import ScanOutcome, SegmentFile, find_valid_batch_after, list_dir, read_segment, seek_offset

# A reader relists when a compaction swapped files under it or the writer
# rolled; a few times per read, so this bound only stops a pathological loop.
_MAX_PASSES = 1000


@dataclass(slots=True)
class _Cursor:
    next_offset: int
    stop_offset: int | None
    # The stop offset is the writer's high watermark: all below it must exist.
    durable_stop: bool
    # Set once a batch or segment at or past the stop offset was seen.
    stopped: bool = False

    @property
    def done(self) -> bool:
        return self.stopped or (self.stop_offset is not None and self.next_offset >= self.stop_offset)


def iter_log_batches(
    directory: str,
    buffer_size: int,
    from_offset: int = 0,
    stop_offset: int | None = None,
    *,
    durable_stop: bool = False,
) -> Iterator[tuple[str, RawBatch]]:
    """Yield (segment path, batch) for every valid batch ending after `from_offset`.

    With `durable_stop`, `stop_offset` is the writer's high watermark: data
    missing or bad below it is corruption. Otherwise it is only a bound.
    """
    cursor = _Cursor(from_offset, stop_offset, durable_stop)
    for _ in range(_MAX_PASSES):
        segments = _segments(directory)
        try:
            yield from _iter_segments(segments, cursor, buffer_size)
        except FileNotFoundError:
            continue
        if cursor.done:
            return
        newest = _segments(directory)
        if segments and newest and newest[-1].base_offset > segments[-1].base_offset:
            # The listing went stale (the writer rolled): the segment read as
            # the last one may have been compacted against newer segments,
            # whose records must then be read too.
            continue
        if durable_stop:
            where = segments[-1].path if segments else directory
            size = os.path.getsize(where) if segments else 0
            reason = f"log ends below the high watermark {stop_offset}"
            raise CorruptLogError(where, size, cursor.next_offset, reason)
        return
    raise LogError(f"{directory}: segments kept changing while reading")


def _segments(directory: str) -> list[SegmentFile]:
    try:
        return list_dir(directory).segments
    except FileNotFoundError as exc:
        raise LogError(f"no partition log at {directory}") from exc


def _iter_segments(
    segments: list[SegmentFile], cursor: _Cursor, buffer_size: int
) -> Iterator[tuple[str, RawBatch]]:
    stop = cursor.stop_offset
    first = max(0, bisect_right([s.base_offset for s in segments], cursor.next_offset) - 1)
    for index in range(first, len(segments)):
        segment = segments[index]
        if stop is not None and segment.base_offset >= stop:
            cursor.stopped = True
            return
        position, expected = 0, segment.base_offset
        if cursor.next_offset > segment.base_offset:
            position, expected = seek_offset(segment.path, cursor.next_offset, expected)
        outcome = ScanOutcome()
        for batch in read_segment(segment.path, position, expected, buffer_size, outcome):
            if stop is not None and batch.base_offset >= stop:
                cursor.stopped = True
                return
            if batch.next_offset > cursor.next_offset:
                cursor.next_offset = batch.next_offset
                yield segment.path, batch
        if cursor.done:
            return
        if outcome.reason is not None:
            _judge_bad_batch(segment, outcome, index == len(segments) - 1, cursor)
            return


def _judge_bad_batch(segment: SegmentFile, outcome: ScanOutcome, is_last: bool, cursor: _Cursor) -> None:
    """Raise unless the bad batch is the (live or torn) end of the log."""
    where = (segment.path, outcome.position, outcome.next_offset)
    if not is_last:
        raise CorruptLogError(*where, f"{outcome.reason} in a segment that is not the last one")
    if cursor.durable_stop:
        raise CorruptLogError(*where, f"{outcome.reason} below the high watermark {cursor.stop_offset}")
    following = find_valid_batch_after(segment.path, outcome.position, outcome.next_offset, outcome.size)
    if following is not None:
        raise CorruptLogError(*where, f"{outcome.reason}, and a valid batch follows at byte {following}")
