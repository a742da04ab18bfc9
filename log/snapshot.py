"""Snapshots: the live state of a partition as of an offset, so loading is
"snapshot + tail" and costs the size of the state, not of the history.

Owns `<offset, 20 digits>.snapshot` files (layout in FORMAT.md). Rules:
- A snapshot at offset N holds the latest record of every key among the
  records below N, minus keys whose latest record is a tombstone, in the
  order of their latest offsets: exactly what a fully compacted log would
  replay. Loading it, then the log from N, equals loading the whole log.
- It is built from the previous snapshot plus the log up to the high
  watermark (durable data only), written to `.tmp`, fsynced, renamed,
  and then every other snapshot is deleted.
- A snapshot is used only if every byte checks out (header CRC, every batch
  CRC, counts, decodable): it is decoded in full before anything is
  replayed, so a bad one is ignored (warning) and loading falls back to an
  older snapshot or the whole log, never to half a snapshot.
- A snapshot is not written when the range it covers holds records of key
  versions this code does not know: it would silently drop them.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from coordinator.records import Record, RecordKey, RecordValue
from log.batch import encode_batch, scan_buffer
from log.codec import PayloadError, decode_payload, decode_records, encode_payload
from log.errors import CorruptLogError, LogError
from log.fsutil import atomic_write, fsync_dir
from log.gcpause import gc_paused
from log.segment import OFFSET_DIGITS

if TYPE_CHECKING:
    from log.partition import PartitionLog

logger = logging.getLogger(__name__)

SNAPSHOT_MAGIC = b"RGSN"
SNAPSHOT_VERSION = 1
_HEADER_PREFIX = struct.Struct(">4sBBHqqi")
_HEADER = struct.Struct(">4sBBHqqiI")
SNAPSHOT_HEADER_SIZE = _HEADER.size
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
NO_LEADER_EPOCH = -1


class Snapshot(NamedTuple):
    next_offset: int
    records: list[Record]
    path: str


def snapshot_file_name(next_offset: int) -> str:
    return f"{next_offset:0{OFFSET_DIGITS}d}.snapshot"


def list_snapshots(directory: str) -> list[tuple[int, str]]:
    """(offset, path) of every snapshot file, oldest first."""
    found = []
    for name in os.listdir(directory):
        if match := _SNAPSHOT_NAME.match(name):
            found.append((int(match[1]), os.path.join(directory, name)))
    return sorted(found)


def encode_snapshot(next_offset: int, records: list[Record], timestamp_ms: int, batch_records: int) -> bytes:
    batches = []
    for start in range(0, len(records), batch_records):
        chunk = records[start:start + batch_records]
        payload = encode_payload(chunk)
        count = len(chunk)
        batches.append(encode_batch(start, count, count - 1, NO_LEADER_EPOCH, timestamp_ms, payload))
    prefix = _HEADER_PREFIX.pack(
        SNAPSHOT_MAGIC, SNAPSHOT_VERSION, 0, 0, next_offset, len(records), len(batches)
    )
    header = prefix + struct.pack(">I", zlib.crc32(prefix))
    return b"".join([header, *batches])


def read_snapshot(path: str) -> Snapshot:
    """Read and fully verify one snapshot file; CorruptLogError if anything is off."""
    with open(path, "rb") as file:
        data = file.read()
    if len(data) < SNAPSHOT_HEADER_SIZE:
        raise CorruptLogError(path, 0, None, "snapshot shorter than its header")
    magic, version, _, _, next_offset, record_count, batch_count, crc = _HEADER.unpack_from(data)
    if magic != SNAPSHOT_MAGIC or zlib.crc32(data[: _HEADER_PREFIX.size]) != crc:
        raise CorruptLogError(path, 0, None, "bad snapshot header")
    if version != SNAPSHOT_VERSION:
        raise CorruptLogError(path, 0, None, f"unknown snapshot version {version}")
    named = _SNAPSHOT_NAME.match(os.path.basename(path))
    if named is not None and int(named[1]) != next_offset:
        raise CorruptLogError(path, 0, None, f"snapshot of offset {next_offset} named {named[1]}")
    result = scan_buffer(data, SNAPSHOT_HEADER_SIZE, 0, 0, path)
    complete = result.position == len(data) and len(result.batches) == batch_count
    if result.invalid_reason is not None or not complete:
        reason = result.invalid_reason or "incomplete or extra batches"
        raise CorruptLogError(path, result.position, None, f"bad snapshot batch: {reason}")
    records: list[Record] = []
    try:
        for batch in result.batches:
            records += decode_records(batch.payload)
    except PayloadError as exc:
        raise CorruptLogError(path, 0, None, str(exc)) from exc
    if len(records) != record_count:
        raise CorruptLogError(path, 0, None, f"{len(records)} records, header says {record_count}")
    return Snapshot(next_offset, records, path)


def load_latest_snapshot(directory: str, max_offset: int | None) -> Snapshot | None:
    """The newest valid snapshot at or below `max_offset`; bad ones are logged and skipped."""
    for offset, path in reversed(list_snapshots(directory)):
        if max_offset is not None and offset > max_offset:
            logger.warning("ignoring snapshot %s: it is ahead of the log end %d", path, max_offset)
            continue
        try:
            return read_snapshot(path)
        except (CorruptLogError, OSError) as exc:
            logger.warning("ignoring unusable snapshot %s: %s", path, exc)
    return None


def apply_ordered(state: dict[RecordKey, RecordValue], records: Iterable[Record]) -> None:
    """Replay keeping keys in the order of their latest record (compacted order)."""
    pop = state.pop
    for key, value in records:
        pop(key, None)
        if value is not None:
            state[key] = value


def write_snapshot(log: PartitionLog, timestamp_ms: int) -> Snapshot | None:
    """Snapshot the log's durable state; None if there is nothing new or it is unsafe."""
    with log.maintenance_lock, gc_paused():
        hwm = log.high_watermark
        previous = load_latest_snapshot(log.directory, hwm)
        start = previous.next_offset if previous is not None else 0
        if previous is not None and start == hwm:
            return previous
        state: dict[RecordKey, RecordValue] = {}
        if previous is not None:
            apply_ordered(state, previous.records)
        for path, batch in log.raw_batches(start, hwm):
            try:
                decoded = decode_payload(batch.payload)
            except PayloadError as exc:
                raise CorruptLogError(path, batch.position, batch.base_offset, str(exc)) from exc
            if decoded.skipped:
                logger.warning("not writing a snapshot: %s holds records of unknown key versions", path)
                return None
            if batch.base_offset < start:
                where = f"{path}: batch at offset {batch.base_offset}"
                raise LogError(f"{where} straddles snapshot offset {start}")
            apply_ordered(state, decoded.records)
        records = [Record(key, value) for key, value in state.items()]
        data = encode_snapshot(hwm, records, timestamp_ms, log.config.snapshot_batch_records)
        path = os.path.join(log.directory, snapshot_file_name(hwm))
        atomic_write(path, data, log.config.fsync)
        _delete_other_snapshots(log.directory, hwm, log.config.fsync)
        return Snapshot(hwm, records, path)


def _delete_other_snapshots(directory: str, keep_offset: int, fsync: bool) -> None:
    # Older ones are superseded; one ahead of the log (possible only with
    # fsync=False and a machine crash) describes records that are gone.
    deleted = False
    for offset, path in list_snapshots(directory):
        if offset != keep_offset:
            os.unlink(path)
            deleted = True
    if deleted and fsync:
        fsync_dir(directory)


def tombstone_floor(directory: str) -> int | None:
    """Lowest snapshot offset: compaction must keep tombstones at or above it.

    A snapshot at N plus the log from N is only right if every tombstone
    from N on is still in the log to delete what the snapshot holds.
    """
    snapshots = list_snapshots(directory)
    return snapshots[0][0] if snapshots else None
