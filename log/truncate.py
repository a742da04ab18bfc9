"""Truncating a partition log's tail: what a follower does when its log
diverged from its leader's (replication-notes.md section 5).

Owns removing every record at or after an offset. Rules:
- The offset must not fall strictly inside a batch: a follower's
  truncation offsets are batch boundaries (epoch start offsets, log ends),
  so one inside a batch is a caller's bug and refused (`LogError`); Kafka
  would silently drop the whole batch. An offset inside a compaction gap
  is allowed: the log then ends where the data below it ends.
- Steps, each made durable before the next, each removing a suffix of
  what is left:
  1. delete snapshots past the new end (a snapshot is only a cache);
  2. delete the segments after the kept one, newest first, with a
     directory fsync after each (so no later segment outlives an earlier);
  3. cut the kept segment to the end of its last batch below the offset,
     fsync it;
  4. rewrite the epoch checkpoint without entries at or past the new end.
  A crash between steps leaves a prefix of the old log no shorter than the
  truncated one, never a hole: it is as valid a replica as the old log
  (the follower truncates again once it compares epochs with its leader),
  and on open the epoch entries past its end are dropped (`epochs`).
- Only a follower truncates, and it may cut below its own durable end (a
  fsynced tail that diverged). A leader must never truncate: records
  below its high watermark may be acknowledged. That is the caller's rule.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable
from typing import NamedTuple

from log.epochs import EpochEntry, iter_headers, write_checkpoint
from log.errors import LogError
from log.fsutil import fsync_dir, fsync_path
from log.segment import SegmentFile, list_dir
from log.snapshot import list_snapshots

StepHook = Callable[[str], None]


class TruncationPlan(NamedTuple):
    offset: int
    # End of the data that remains: `offset`, or lower when `offset` lies
    # in a compaction gap (the next append still gets this offset).
    new_end: int
    keep: SegmentFile
    # Byte length the kept segment is cut to.
    keep_size: int
    # Segments deleted whole, oldest first.
    later: list[SegmentFile]


def plan_truncation(directory: str, offset: int, buffer_size: int) -> TruncationPlan:
    """Where to cut for `offset`; LogError if `offset` is inside a batch."""
    segments = list_dir(directory).segments
    index = max(0, bisect_right([s.base_offset for s in segments], offset) - 1)
    keep = segments[index]
    keep_size, new_end = 0, keep.base_offset
    for header in iter_headers(keep.path, buffer_size):
        if header.base_offset >= offset:
            break
        if header.next_offset > offset:
            raise LogError(
                f"{directory}: cannot truncate to offset {offset}: it is inside the batch "
                f"[{header.base_offset}, {header.next_offset}); truncate to a batch boundary"
            )
        keep_size, new_end = header.end_position, header.next_offset
    return TruncationPlan(offset, new_end, keep, keep_size, segments[index + 1:])


def execute_truncation(
    directory: str,
    plan: TruncationPlan,
    entries: list[EpochEntry],
    fsync: bool,
    on_step: StepHook | None = None,
) -> list[EpochEntry]:
    """Run the steps of `plan` (module doc); returns the epoch entries kept.

    `on_step(name)` runs before each step: crash tests stop there.
    """
    step = on_step or _no_step
    step("delete snapshots")
    doomed = [path for offset, path in list_snapshots(directory) if offset > plan.new_end]
    for path in doomed:
        os.unlink(path)
    if doomed and fsync:
        fsync_dir(directory)
    for segment in reversed(plan.later):
        step(f"delete segment {os.path.basename(segment.path)}")
        os.unlink(segment.path)
        if fsync:
            fsync_dir(directory)
    step(f"cut segment {os.path.basename(plan.keep.path)}")
    os.truncate(plan.keep.path, plan.keep_size)
    if fsync:
        fsync_path(plan.keep.path)
    kept = [(epoch, start) for epoch, start in entries if start < plan.new_end]
    if kept != entries:
        step("write epoch checkpoint")
        write_checkpoint(directory, kept, fsync)
    return kept


def _no_step(name: str) -> None:
    return None
