"""Columnar decoding for analytics: the log's batches -> Arrow record batches, no object per row.

Owns turning the raw batches of one partition log (as `scan`, `reader` or a
replica read yields them) into `pyarrow.RecordBatch`es holding exactly the
rows the row path (`spark_bridge.rows.record_to_row` over `reader`'s
records) gives. The schema, the row function and the offset commits'
`record_type` come from the caller (`RowModel`): the row model is
spark_bridge's, this module only knows the names of the offset commit
columns it fills. Rules:
- Offset runs (key versions 0 and 1, commits and tombstones: nearly every
  record) are never turned into records: their columns are appended as they
  come out of msgpack (string columns as indices into a per-chunk string
  table, constant columns once per run) and converted to Arrow once per
  chunk of about `rows_per_batch` rows: dictionary columns by `take`, -1
  epochs and expiry times made null by mask, offsets from the batch's base.
- Every other known run (group metadata, KIP-848's consumer group records:
  about 1% of a log) goes through `codec.decode_run` and the caller's row
  function, so its rows are the row path's by construction; unknown key
  versions are skipped, as the row path skips them.
- A batch only partly inside `[start, stop)` is decoded by the row path.
- Errors are the row path's: a payload that does not decode is
  `CorruptLogError` at its batch's file, position and base offset, raised
  after every row of the batches before it was yielded; a known key with an
  unknown value version is `UnsupportedVersionError`; the scan's own
  errors (bad CRC mid-log, a damaged non-last segment) pass through. A
  column whose values are not what FORMAT.md says (a float offset, a
  string index out of its table) is an error here, never a converted value.
- Decoding runs with the garbage collector paused (`gcpause`), one chunk at
  a time: never across a `yield`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from operator import add
from typing import Any

import numpy as np
import pyarrow as pa

from coordinator.records import Record
from log.batch import RawBatch
from log.codec import OFFSET_COMMIT_RUNS, OFFSET_TOMBSTONE_RUNS, PayloadError, decode_run, unpack_body
from log.column_runs import IntArray, IntRuns, StringRuns, as_int32
from log.columns import run_count
from log.errors import CorruptLogError
from log.gcpause import gc_paused
from log.reader import decode_batch

DEFAULT_ROWS_PER_BATCH = 65_536
# Kafka's "none" for a leader epoch and an expiry time: null in a row.
_NONE = -1
_DECODE_ERRORS = (ValueError, TypeError, IndexError, KeyError)

RowOf = Callable[[int, int, int, Record], tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class RowModel:
    """What rows look like: the caller's schema, row function and offset commits' record type."""

    schema: pa.Schema
    # record_to_row(partition, offset, batch_timestamp_ms, record): the reference for every row.
    row_of: RowOf
    offset_commit_type: str


class _Chunk:
    """The columns of the offset records of consecutive batches, plus the rows of the others."""

    def __init__(self) -> None:
        self.strings: list[Any] = [None]
        self.offsets = IntRuns()
        self.timestamps = IntRuns()
        self.groups = StringRuns(self.strings)
        self.topics = StringRuns(self.strings)
        self.partitions = IntRuns()
        self.committed = IntRuns()
        self.epochs = IntRuns()
        self.metadata = StringRuns(self.strings)
        self.commit_ms = IntRuns()
        self.expire_ms = IntRuns()
        self.tombstones = IntRuns()
        self.rows: list[tuple[Any, ...]] = []
        self.size = 0
        # The batches appended, to decode them one by one again if the chunk does not convert.
        self.batches: list[tuple[str, RawBatch]] = []

    def _builders(self) -> tuple[IntRuns | StringRuns, ...]:
        return (
            self.offsets, self.timestamps, self.groups, self.topics, self.partitions, self.committed,
            self.epochs, self.metadata, self.commit_ms, self.expire_ms, self.tombstones,
        )

    def mark(self) -> tuple[Any, ...]:
        builders = tuple(builder.mark() for builder in self._builders())
        return builders, len(self.strings), len(self.rows), self.size

    def cut(self, mark: tuple[Any, ...]) -> None:
        """Forget everything appended since `mark`."""
        builders, strings, rows, self.size = mark
        for builder, at in zip(self._builders(), builders):
            builder.cut(at)
        del self.strings[strings:]
        del self.rows[rows:]


def arrow_batches(
    partition: int,
    raw_batches: Iterable[tuple[str, RawBatch]],
    model: RowModel,
    start: int = 0,
    stop: int | None = None,
    rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
) -> Iterator[pa.RecordBatch]:
    """The rows of the records with offsets in `[start, stop)` of `raw_batches` (one partition's,
    in offset order, each with its file's path), as record batches of `model.schema`."""
    raw = iter(raw_batches)
    exhausted = False
    while not exhausted:
        chunk = _Chunk()
        failure: BaseException | None = None
        exhausted = True
        with gc_paused():
            try:
                for path, batch in raw:
                    _add_batch(chunk, partition, path, batch, model, start, stop)
                    if chunk.size >= rows_per_batch:
                        exhausted = False
                        break
            except Exception as exc:  # yield what came before, then raise, as the row path does
                failure = exc
            converted, bad_batch = _convert(chunk, partition, model, start, stop)
        yield from converted
        if bad_batch is not None:
            raise bad_batch
        if failure is not None:
            raise failure


def _add_batch(
    chunk: _Chunk, partition: int, path: str, batch: RawBatch, model: RowModel, start: int, stop: int | None
) -> None:
    """Append one batch's records to `chunk`; on a decoding error the chunk is left as it was."""
    if batch.base_offset < start or (stop is not None and batch.next_offset > stop):
        _add_rows_of_part(chunk, partition, path, batch, model, start, stop)
    else:
        mark = chunk.mark()
        try:
            _add_runs(chunk, partition, batch, model)
        except BaseException as exc:
            chunk.cut(mark)
            if isinstance(exc, _DECODE_ERRORS):
                reason = str(exc) if isinstance(exc, PayloadError) else f"undecodable payload: {exc!r}"
                raise CorruptLogError(path, batch.position, batch.base_offset, reason) from exc
            raise
    chunk.batches.append((path, batch))


def _add_rows_of_part(
    chunk: _Chunk, partition: int, path: str, batch: RawBatch, model: RowModel, start: int, stop: int | None
) -> None:
    """The records of a batch that `[start, stop)` cuts, by the row path."""
    decoded = decode_batch(path, batch)
    for offset, record in zip(decoded.offsets, decoded.records):
        if offset >= start and (stop is None or offset < stop):
            chunk.rows.append(model.row_of(partition, offset, batch.timestamp_ms, record))
            chunk.size += 1


def _add_runs(chunk: _Chunk, partition: int, batch: RawBatch, model: RowModel) -> None:
    body = unpack_body(batch.payload)
    deltas = body[0]
    if deltas is not None and type(deltas) is not list:
        raise PayloadError("offset deltas are not an array")
    base, position = batch.base_offset, 0
    for index in range(1, len(body)):
        run = body[index]
        count = run_count(run)
        kind = (run[0], run[1])
        if kind in OFFSET_COMMIT_RUNS or kind in OFFSET_TOMBSTONE_RUNS:
            _add_offset_run(chunk, run, count, kind in OFFSET_TOMBSTONE_RUNS)
            if deltas is None:
                chunk.offsets.add_constant(base + position, count)
            else:
                chunk.offsets.add_array(map(add, _delta_slice(deltas, position, count), repeat(base)))
            chunk.timestamps.add_constant(batch.timestamp_ms, count)
            chunk.size += count
        else:
            records = decode_run(run)
            if records is not None:
                offsets = _offsets(base, deltas, position, count)
                timestamp_ms = batch.timestamp_ms
                chunk.rows.extend(
                    model.row_of(partition, offset, timestamp_ms, record)
                    for offset, record in zip(offsets, records)
                )
                chunk.size += len(records)
        position += count
    if deltas is not None and len(deltas) != position:
        raise PayloadError(f"{len(deltas)} offset deltas for {position} records")


def _delta_slice(deltas: list[Any], position: int, count: int) -> list[Any]:
    """The offset deltas of the `count` records from record `position` of the batch."""
    part = deltas[position : position + count]
    if len(part) != count:
        raise PayloadError(f"{len(deltas)} offset deltas for more records")
    return part


def _offsets(base: int, deltas: list[Any] | None, position: int, count: int) -> Iterable[int]:
    if deltas is None:
        return range(base + position, base + position + count)
    return map(add, _delta_slice(deltas, position, count), repeat(base))


def _add_offset_run(chunk: _Chunk, run: list[Any], count: int, tombstones: bool) -> None:
    if len(run) != (6 if tombstones else 11):
        kind = "tombstone" if tombstones else "commit"
        raise PayloadError(f"offset {kind} run of {len(run)} fields")
    chunk.groups.add_column(run[3], count)
    chunk.topics.add_column(run[4], count)
    chunk.partitions.add_column(_array_column(run[5]), count)
    chunk.tombstones.add_constant(int(tombstones), count)
    if tombstones:
        for column in (chunk.committed, chunk.epochs, chunk.commit_ms, chunk.expire_ms):
            column.add_constant(0, count)
        chunk.metadata.add_null(count)
        return
    chunk.committed.add_column(run[6], count)
    chunk.epochs.add_column(run[7], count)
    chunk.metadata.add_column(run[8], count)
    chunk.commit_ms.add_column(run[9], count)
    chunk.expire_ms.add_column(run[10], count)


def _array_column(values: Any) -> Any:
    """The partition column is always an array (it bounds the run's count)."""
    if type(values) is not list:
        raise PayloadError("the partition column is not an array")
    return values


# ------------------------------------------------------------- to Arrow


def _convert(
    chunk: _Chunk, partition: int, model: RowModel, start: int, stop: int | None
) -> tuple[list[pa.RecordBatch], Exception | None]:
    """The chunk as record batches. If a column does not convert, the batches are decoded
    again one by one: the rows of those before the bad one, and its error."""
    try:
        return _record_batches(chunk, partition, model), None
    except _DECODE_ERRORS:
        pass
    out: list[pa.RecordBatch] = []
    for path, batch in chunk.batches:
        one = _Chunk()
        try:
            _add_batch(one, partition, path, batch, model, start, stop)
            out.extend(_record_batches(one, partition, model))
        except _DECODE_ERRORS as exc:
            reason = str(exc) if isinstance(exc, PayloadError) else f"undecodable payload: {exc!r}"
            return out, CorruptLogError(path, batch.position, batch.base_offset, reason)
    return out, None


def _record_batches(chunk: _Chunk, partition: int, model: RowModel) -> list[pa.RecordBatch]:
    out = []
    if chunk.tombstones.values:  # one value per offset run at least: the chunk has offset rows
        out.append(_offset_batch(chunk, partition, model))
    if chunk.rows:
        out.append(rows_batch(chunk.rows, model.schema))
    return out


def _ints(values: IntArray, kind: pa.DataType, nulls: np.ndarray | None = None) -> pa.Array:
    if kind == pa.int32():
        return pa.array(as_int32(values), mask=nulls)
    return pa.array(values, type=kind, mask=nulls)


def _offset_batch(chunk: _Chunk, partition: int, model: RowModel) -> pa.RecordBatch:
    kinds = {field.name: field.type for field in model.schema}
    tombstones = chunk.tombstones.array().astype(bool)
    count = len(tombstones)
    table = pa.array(chunk.strings)
    if not (pa.types.is_string(table.type) or pa.types.is_null(table.type)):
        raise PayloadError(f"a string column holds {table.type} values")
    table = table.cast(kinds["group_id"])
    epochs, expire_ms = chunk.epochs.array(), chunk.expire_ms.array()
    columns = {
        "partition": pa.array(np.full(count, partition, dtype=np.int32)),
        "offset": _ints(chunk.offsets.ramp(), kinds["offset"]),
        "batch_timestamp": _ints(chunk.timestamps.array(), kinds["batch_timestamp"]),
        "record_type": pa.repeat(pa.scalar(model.offset_commit_type, kinds["record_type"]), count),
        "group_id": table.take(chunk.groups.positions()),
        "topic": table.take(chunk.topics.positions()),
        "topic_partition": _ints(chunk.partitions.array(), kinds["topic_partition"]),
        "committed_offset": _ints(chunk.committed.array(), kinds["committed_offset"], tombstones),
        "leader_epoch": _ints(epochs, kinds["leader_epoch"], tombstones | (epochs == _NONE)),
        "metadata": table.take(chunk.metadata.positions()),
        "commit_timestamp": _ints(chunk.commit_ms.array(), kinds["commit_timestamp"], tombstones),
        "expire_timestamp": _ints(expire_ms, kinds["expire_timestamp"], tombstones | (expire_ms == _NONE)),
        "tombstone": pa.array(tombstones, kinds["tombstone"]),
    }
    schema = model.schema
    arrays = [columns.get(field.name, pa.nulls(count, field.type)) for field in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_batch(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Row tuples (in `schema`'s column order) as one record batch."""
    columns = list(zip(*rows)) if rows else [()] * len(schema)
    arrays = [pa.array(column, type=field.type) for column, field in zip(columns, schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
