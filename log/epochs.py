"""Leader epochs of a log: (epoch, start offset) pairs and their checkpoint file.

Kafka's leader-epoch-checkpoint (LeaderEpochFileCache). Every batch header
carries the epoch of the leader that appended it; an entry (E, S) says
epoch E's first offset is S. Entries are strictly increasing in both epoch
and start offset. Rules:
- Kept in `leader-epoch-checkpoint` (JSON, FORMAT.md), replaced atomically
  (`fsutil.atomic_write`) *before* the first batch of a new epoch is
  written, so every batch on disk has its epoch in the file; the file may
  hold entries past the log end (a batch that never reached the disk, a
  torn tail, a truncation cut short), and those are dropped on open.
- On open the file is authoritative below the active segment and the
  active segment's batch headers are authoritative in it: compaction may
  drop an epoch's first batches from a sealed segment, so the headers
  there can no longer tell where it started, while the active segment is
  never compacted and is where a crash leaves data the file may not know.
  A missing or unreadable file is rebuilt from every segment's headers,
  with a warning.
- Where the headers leave a gap (offsets a compaction dropped) before a
  batch of a new epoch, the epoch is taken to start at the gap's start:
  its true start lies somewhere in the gap, and an early start only makes
  a follower truncate more and fetch again, whereas a late one could let
  it keep records that diverge from its leader.
- Reads are headers only: payloads are skipped, CRCs not checked (loading
  judges the batches).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import NamedTuple

from log.batch import HEADER, HEADER_SIZE, MAGIC
from log.errors import CorruptLogError
from log.fsutil import atomic_write, read_versioned_json
from log.segment import SegmentFile

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 1
NO_EPOCH = -1

EpochEntry = tuple[int, int]


class BatchHeader(NamedTuple):
    position: int
    # Position just past the batch: where the next one starts.
    end_position: int
    base_offset: int
    next_offset: int
    leader_epoch: int


def iter_headers(path: str, buffer_size: int) -> Iterator[BatchHeader]:
    """Every batch header of a segment, in chunked reads; stops at a bad magic or a cut batch."""
    unpack = HEADER.unpack_from
    with open(path, "rb", buffering=0) as file:
        fd = file.fileno()
        end = os.fstat(fd).st_size
        position = 0
        while position + HEADER_SIZE <= end:
            chunk = os.pread(fd, min(max(buffer_size, HEADER_SIZE), end - position), position)
            index = 0
            while index + HEADER_SIZE <= len(chunk):
                magic, _, _, _, base, delta, _, epoch, _, length, _ = unpack(chunk, index)
                batch_end = position + index + HEADER_SIZE + length
                if magic != MAGIC or batch_end > end:
                    return
                yield BatchHeader(position + index, batch_end, base, base + delta + 1, epoch)
                index += HEADER_SIZE + length
            if not chunk:
                return
            position += index


def assign(entries: list[EpochEntry], epoch: int, start_offset: int) -> bool:
    """Kafka's `LeaderEpochFileCache.assign`; returns whether `entries` changed.

    The same epoch again is no change. Otherwise entries with an epoch at or
    above `epoch`, or a start at or above `start_offset`, are removed first,
    so both stay strictly increasing. A negative epoch (no leader) is ignored.
    """
    if epoch < 0:
        return False
    if entries and entries[-1][0] == epoch and entries[-1][1] <= start_offset:
        return False
    entries[:] = [(e, s) for e, s in entries if e < epoch and s < start_offset]
    entries.append((epoch, start_offset))
    return True


def assign_headers(entries: list[EpochEntry], headers: Iterable[BatchHeader], previous_end: int) -> None:
    """`assign` every batch's epoch; after a gap, a new epoch starts at the gap (see module doc)."""
    for header in headers:
        start = min(previous_end, header.base_offset)
        if not entries or entries[-1][0] != header.leader_epoch:
            assign(entries, header.leader_epoch, start)
        previous_end = header.next_offset


def rebuild(segments: list[SegmentFile], buffer_size: int) -> list[EpochEntry]:
    """Entries from every segment's batch headers."""
    entries: list[EpochEntry] = []
    if segments:
        headers = chain.from_iterable(iter_headers(s.path, buffer_size) for s in segments)
        assign_headers(entries, headers, segments[0].base_offset)
    return entries


def read_checkpoint(directory: str) -> list[EpochEntry] | None:
    """The stored entries; None if the file is missing. CorruptLogError if unreadable."""
    path = os.path.join(directory, CHECKPOINT_FILE)
    entries = read_versioned_json(
        path, CHECKPOINT_VERSION, "leader epoch checkpoint", lambda data: [_entry(p) for p in data["entries"]]
    )
    if entries is not None and not _monotonic(entries):
        raise CorruptLogError(path, 0, None, f"leader epoch entries not increasing: {entries}")
    return entries


def write_checkpoint(directory: str, entries: list[EpochEntry], fsync: bool = True) -> None:
    data = json.dumps({"version": CHECKPOINT_VERSION, "entries": [list(e) for e in entries]})
    atomic_write(os.path.join(directory, CHECKPOINT_FILE), data.encode(), fsync)


def recover_entries(
    directory: str, segments: list[SegmentFile], log_end_offset: int, buffer_size: int, fsync: bool = True
) -> list[EpochEntry]:
    """The log's entries on open, checked against its batches and rewritten if they differ."""
    try:
        stored = read_checkpoint(directory)
    except CorruptLogError as exc:
        logger.warning("%s; rebuilding it from the batch headers", exc)
        stored = None
    active = segments[-1]
    if stored is None:
        entries = rebuild(segments, buffer_size)
    else:
        entries = [(e, s) for e, s in stored if s < active.base_offset]
        assign_headers(entries, iter_headers(active.path, buffer_size), active.base_offset)
    entries = [(e, s) for e, s in entries if s < log_end_offset]
    if entries != (stored or []):
        if stored is not None:
            logger.warning(
                "%s: leader epoch checkpoint %s disagrees with the log (end %d): now %s",
                directory, stored, log_end_offset, entries,
            )
        write_checkpoint(directory, entries, fsync)
    return entries


def _entry(pair: object) -> EpochEntry:
    if not isinstance(pair, list) or len(pair) != 2 or any(type(x) is not int for x in pair):
        raise ValueError(f"entry {pair!r} is not a pair of ints")
    return pair[0], pair[1]


def _monotonic(entries: list[EpochEntry]) -> bool:
    return all(e >= 0 and s >= 0 for e, s in entries) and all(
        a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:])
    )
