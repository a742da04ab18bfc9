"""Loading: replaying a partition log into anything with `replay_many`.

Owns the failover read path. Rules:
- Load = the newest valid snapshot (if any, and if asked) + every batch
  from its offset up to the end: the writer's high watermark, or for a
  read-only source the last complete valid batch.
- Fast path: big chunked reads, one `unpackb` per batch, offset records
  merged by key in C (last record wins) and replayed only once a group
  record or the end of the log comes, the cyclic garbage collector paused
  (see gcpause). A target sees the same state as from replaying every
  record, not every record.
- Records of unknown key versions are skipped, counted in the stats and
  logged once per load; never fatal.
- `MaterializedState` is the reference model of replay (last record per
  key wins, a tombstone deletes): tests and analytics compare against it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from coordinator.records import Record, RecordKey, RecordValue
from log.batch import HEADER_SIZE, RawBatch, header_next_offset
from log.codec import (
    LoadRun,
    OffsetKeyTuple,
    PayloadError,
    decode_load_runs,
    decode_payload,
    decode_records,
    offset_records,
    stage_offsets,
)
from log.config import LogConfig
from log.errors import CorruptLogError, LogError, UnsupportedVersionError
from log.gcpause import gc_paused
from log.partition import PartitionLog
from log.scan import iter_log_batches
from log.segment import list_dir, seek_offset
from log.shipping import parse_raw
from log.snapshot import Snapshot, load_latest_snapshot

logger = logging.getLogger(__name__)


class Replayable(Protocol):
    def replay_many(self, records: Iterable[Record]) -> None: ...


class MaterializedState:
    """Replay model: key -> latest value; a tombstone deletes the key."""

    def __init__(self) -> None:
        # Tombstones are stored as None and filtered on read: dict.update
        # then replays a whole batch in C.
        self._latest: dict[RecordKey, RecordValue] = {}

    def replay(self, record: Record) -> None:
        self._latest[record.key] = record.value

    def replay_many(self, records: Iterable[Record]) -> None:
        self._latest.update(records)

    @property
    def state(self) -> dict[RecordKey, RecordValue]:
        return {key: value for key, value in self._latest.items() if value is not None}


@dataclass(frozen=True, slots=True)
class LoadStats:
    records: int
    snapshot_records: int
    snapshot_offset: int | None
    batches: int
    bytes_read: int
    skipped_records: int
    # Offset after the last replayed batch (or the snapshot's offset).
    end_offset: int


LoadSource = PartitionLog | str | os.PathLike[str]


def load_into(
    target: Replayable, source: LoadSource, *, use_snapshot: bool = True, config: LogConfig | None = None
) -> LoadStats:
    """Replay a partition log into `target`.

    `source` is an open `PartitionLog` (reads stop at its high watermark) or
    a directory, read without writing anything (e.g. a live log of another
    process: only complete, CRC-valid batches are read). Failures are
    `LogError`s; `target` may then hold part of the log and must be dropped.
    """
    if isinstance(source, PartitionLog):
        directory, stop = source.directory, source.high_watermark
        batches_from = source.raw_batches
    else:
        directory, stop = str(source), None
        buffer_size = (config or LogConfig()).offsets_load_buffer_size
        batches_from = partial(iter_log_batches, directory, buffer_size)
    with gc_paused():
        try:
            snapshot = _usable_snapshot(directory, stop) if use_snapshot else None
            start = 0
            if snapshot is not None:
                target.replay_many(snapshot.records)
                start = snapshot.next_offset
            stats = _replay_batches(target, batches_from(start), start)
        except OSError as exc:
            raise LogError(f"{directory}: I/O error while loading: {exc}") from exc
    if stats.skipped_records:
        logger.warning("%s: skipped %d records of unknown key versions", directory, stats.skipped_records)
    snapshot_records = len(snapshot.records) if snapshot is not None else 0
    return LoadStats(
        stats.records + snapshot_records, snapshot_records, snapshot.next_offset if snapshot else None,
        stats.batches, stats.bytes_read, stats.skipped_records, stats.end_offset,
    )


def materialize(source: LoadSource, *, use_snapshot: bool = True) -> dict[RecordKey, RecordValue]:
    """The live state of a partition log: key -> latest value, no tombstones."""
    state = MaterializedState()
    load_into(state, source, use_snapshot=use_snapshot)
    return state.state


def groups_from(log: PartitionLog, from_offset: int, max_bytes: int) -> set[str] | None:
    """The groups whose records lie between `from_offset` and the durable end (with
    the rest of the batch holding `from_offset`); None if those batches take more
    than about `max_bytes` (a caller then treats every group as touched)."""
    end = log.high_watermark
    if from_offset >= end:
        return set()
    batches = parse_raw(log.read_raw(from_offset, max_bytes))
    if batches[-1][0].next_offset < end:
        return None
    return {record.key.group_id for batch, _ in batches for record in decode_records(batch.payload)}


@dataclass(slots=True)
class _Counts:
    records: int = 0
    batches: int = 0
    bytes_read: int = 0
    skipped_records: int = 0
    end_offset: int = 0


def _replay_batches(target: Replayable, batches: Iterator[tuple[str, RawBatch]], start: int) -> _Counts:
    """Replay batches from `start` on, offsets through a last-wins staging dict.

    Like Kafka's loader (the loadedOffsets map of GroupMetadataManager), the
    offset records between two group records are merged by key first and
    only the newest of each key is replayed: the same state, since a key's
    last record decides its value, at a fraction of the cost. The staging is
    flushed before every group record, because a group tombstone drops the
    offsets written before it and not those after.
    """
    counts = _Counts(end_offset=start)
    replay_many = target.replay_many
    staged: dict[OffsetKeyTuple, tuple[Any, ...] | None] = {}

    def flush() -> None:
        if staged:
            replay_many(offset_records(staged))
            staged.clear()

    for path, batch in batches:
        try:
            runs = decode_load_runs(batch.payload)
            if batch.base_offset >= start and _all_known(runs, batch.record_count):
                for run in runs:
                    if run.offset_pairs is not None:
                        stage_offsets(staged, run.offset_pairs)
                    else:
                        flush()
                        replay_many(run.records or ())
                counts.records += batch.record_count
            else:
                records = _checked_records(path, batch, start, counts)
                flush()
                replay_many(records)
                counts.records += len(records)
        except PayloadError as exc:
            raise CorruptLogError(path, batch.position, batch.base_offset, str(exc)) from exc
        except UnsupportedVersionError as exc:
            where = f"{path} at byte {batch.position} (offset {batch.base_offset})"
            raise UnsupportedVersionError(f"{where}: {exc}") from exc
        counts.batches += 1
        counts.bytes_read += batch.size_bytes
        counts.end_offset = batch.next_offset
    flush()
    return counts


def _all_known(runs: list[LoadRun], record_count: int) -> bool:
    """Whether every run is of a known kind and they hold `record_count` records."""
    return sum(run.size for run in runs) == record_count and all(
        run.offset_pairs is not None or run.records is not None for run in runs
    )


def _checked_records(path: str, batch: RawBatch, start: int, counts: _Counts) -> list[Record]:
    """Slow path: a batch with skipped runs, or one straddling `start`."""
    decoded = decode_payload(batch.payload)
    found = len(decoded.records) + decoded.skipped
    if found != batch.record_count:
        reason = f"payload holds {found} records, header says {batch.record_count}"
        raise CorruptLogError(path, batch.position, batch.base_offset, reason)
    counts.skipped_records += decoded.skipped
    if batch.base_offset >= start:
        return decoded.records
    deltas = decoded.record_deltas or range(len(decoded.records))
    return [r for r, delta in zip(decoded.records, deltas) if batch.base_offset + delta >= start]


def _usable_snapshot(directory: str, stop: int | None) -> Snapshot | None:
    snapshot = load_latest_snapshot(directory, stop)
    if snapshot is None or stop is not None or _log_reaches(directory, snapshot.next_offset):
        return snapshot
    logger.warning("ignoring snapshot %s: the log ends before its offset", snapshot.path)
    return None


def _log_reaches(directory: str, offset: int) -> bool:
    """Whether the log holds a batch ending at or after `offset` (headers only)."""
    segments = list_dir(directory).segments
    if not segments or offset == 0 or segments[-1].base_offset >= offset:
        return True
    last = segments[-1]
    position, _ = seek_offset(last.path, offset - 1, last.base_offset)
    with open(last.path, "rb") as file:
        file.seek(position)
        batch_next = header_next_offset(file.read(HEADER_SIZE))
    return batch_next is not None and batch_next >= offset
