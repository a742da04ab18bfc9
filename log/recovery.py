"""Recovery of a partition directory when a writer opens it.

Owns the decisions a crash leaves behind. Rules:
- Compaction leftovers: `.cleaned` files are incomplete and deleted (the
  segments they were built from are intact); a `.swap` file is complete and
  authoritative, so the swap is finished (segments it covers deleted, then
  it is renamed to `<base>.log`). Stale `.tmp` files are deleted.
- Only the last segment is scanned: a segment is fsynced before the writer
  rolls to the next one, so earlier segments are complete, and a bad batch
  in them is corruption that loading reports.
- A bad batch in the last segment with no valid batch after it is a torn
  tail: it is truncated, logged as a warning naming file, byte and offset,
  and the truncation is fsynced. If a valid batch follows, it is damage in
  the middle of data: `CorruptLogError`, nothing is truncated.
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

from log.errors import CorruptLogError
from log.fsutil import TMP_SUFFIX, fsync_dir, fsync_path
from log.segment import (
    ScanOutcome,
    SegmentFile,
    SwapFile,
    find_valid_batch_after,
    list_dir,
    read_segment,
    segment_file_name,
)

logger = logging.getLogger(__name__)


class RecoveredLog(NamedTuple):
    segments: list[SegmentFile]
    log_end_offset: int
    # Bytes of valid batches in the last segment: where the next append goes.
    active_size: int
    truncated_bytes: int


def recover(directory: str, buffer_size: int, fsync: bool = True) -> RecoveredLog:
    """Bring a partition directory to a consistent state and find its end."""
    changed = clean_leftovers(directory)
    segments = list_dir(directory).segments
    if not segments:
        path = os.path.join(directory, segment_file_name(0))
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        segments = [SegmentFile(0, path)]
        changed = True
    if changed and fsync:
        fsync_dir(directory)
    last = segments[-1]
    end_offset, active_size, truncated = _recover_last_segment(last, buffer_size)
    if fsync:
        # The file may hold data a crashed writer left in the page cache
        # only: make it durable before it counts as the high watermark.
        fsync_path(last.path)
    return RecoveredLog(segments, end_offset, active_size, truncated)


def clean_leftovers(directory: str) -> bool:
    """Delete incomplete compaction output and temp files, finish swaps."""
    listing = list_dir(directory)
    changed = False
    for path in listing.cleaned:
        logger.warning("deleting incomplete compaction output %s", path)
        os.unlink(path)
        changed = True
    for swap in listing.swaps:
        logger.warning("finishing interrupted compaction swap %s", swap.path)
        finish_swap(directory, swap, fsync=False)
        changed = True
    for name in os.listdir(directory):
        if name.endswith(TMP_SUFFIX):
            os.unlink(os.path.join(directory, name))
            changed = True
    return changed


def finish_swap(directory: str, swap: SwapFile, fsync: bool = True) -> str:
    """Replace the segments a committed swap covers by the swap; idempotent."""
    for segment in list_dir(directory).logs:
        if swap.base_offset <= segment.base_offset < swap.end_offset:
            os.unlink(segment.path)
    path = os.path.join(directory, segment_file_name(swap.base_offset))
    os.rename(swap.path, path)
    if fsync:
        fsync_dir(directory)
    return path


def _recover_last_segment(segment: SegmentFile, buffer_size: int) -> tuple[int, int, int]:
    outcome = ScanOutcome()
    for _ in read_segment(segment.path, 0, segment.base_offset, buffer_size, outcome):
        pass
    if outcome.reason is None:
        return outcome.next_offset, outcome.position, 0
    following = find_valid_batch_after(segment.path, outcome.position, outcome.next_offset, outcome.size)
    if following is not None:
        raise CorruptLogError(
            segment.path, outcome.position, outcome.next_offset,
            f"{outcome.reason}, and a valid batch follows at byte {following}: not a torn tail",
        )
    size = outcome.size
    logger.warning(
        "truncating torn tail of %s at byte %d (offset %d): %s; %d bytes dropped",
        segment.path, outcome.position, outcome.next_offset, outcome.reason, size - outcome.position,
    )
    os.truncate(segment.path, outcome.position)
    return outcome.next_offset, outcome.position, size - outcome.position
