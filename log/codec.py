"""Record codec: the records of one batch <-> one msgpack payload.

Owns the payload layout documented in FORMAT.md ("Payload"). Rules:
- Key versions are Kafka's: 0 and 1 offset commit, 2 group metadata, 3-8
  and 16 the consumer group records of KIP-848 (their runs are
  `log/consumer_codec.py`'s); 100, raygroups' own, service state
  (`log/service_codec.py`). New data is written with key version 1
  (offset commit), 2 and 3-8, 16; key version 0 decodes exactly like 1.
- Values carry their own schema version (raygroups' own numbering, starting
  at 0); a tombstone is a run whose value version is nil.
- A payload is `[offset_deltas | nil, run, run, ...]`. A run holds
  consecutive records of one key version and one value version in columns,
  so one `msgpack.unpackb` yields plain lists and records are assembled by
  `map`/`zip` loops that run in C: no per-record Python bytecode on the
  load path. The load path goes further (`decode_load_runs`): offset runs
  stay plain tuples until the loader has merged them by key. String
  columns are dictionary encoded (`[strings, indices]`): a batch names few
  groups and topics, so this shrinks the payload and the number of string
  objects the decoder must create.
- A run of an unknown key version is skipped and counted, never fatal. A
  known key with an unknown value version raises `UnsupportedVersionError`:
  skipping it would let an older value of that key win.
- Any other malformed payload raises `PayloadError`; the batch layer, which
  knows the file and position, turns it into `CorruptLogError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import groupby, repeat
from operator import is_, itemgetter
from typing import Any, NamedTuple

import msgpack

from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from log import service_codec

# PayloadError is re-exported: the batch layer and the readers catch it from here.
from log.columns import PayloadError as PayloadError
from log.columns import array, int_column, ints, run_count, string_column, strings
from log.consumer_codec import CONSUMER_GROUP_KEY_VERSIONS, RUN_DECODERS, RUN_ENCODERS
from log.errors import UnsupportedVersionError

KEY_VERSION_OFFSET_COMMIT_V0 = 0
KEY_VERSION_OFFSET_COMMIT = 1
KEY_VERSION_GROUP_METADATA = 2
VALUE_VERSION_OFFSET_COMMIT = 0
VALUE_VERSION_GROUP_METADATA = 0
KNOWN_KEY_VERSIONS = frozenset(
    {KEY_VERSION_OFFSET_COMMIT_V0, KEY_VERSION_OFFSET_COMMIT, KEY_VERSION_GROUP_METADATA}
    | CONSUMER_GROUP_KEY_VERSIONS
    | {service_codec.KEY_VERSION_SERVICE_STATE}
)

# tuple.__new__(cls, iterable) builds a NamedTuple from a ready tuple in C,
# skipping the generated Python __new__: the hot path of loading.
_new = tuple.__new__
_unpackb = msgpack.unpackb
_packb = msgpack.packb
_key_of = itemgetter(0)
_value_of = itemgetter(1)

# What a malformed (CRC-valid but undecodable, or fuzzed) payload can raise
# from msgpack or from unpacking the wrong shapes; msgpack's own errors
# derive from ValueError or msgpack.UnpackException.
_DECODE_ERRORS = (ValueError, TypeError, IndexError, KeyError, msgpack.UnpackException)


class DecodedPayload(NamedTuple):
    records: list[Record]
    # Offset delta of each entry of `records`, or None when records[i] sits
    # at delta i (a dense batch with nothing skipped).
    record_deltas: list[int] | None
    skipped: int


# ----------------------------------------------------------------- encode


def encode_payload(records: Sequence[Record], offset_deltas: Sequence[int] | None = None) -> bytes:
    """Encode records (in log order) into one payload.

    `offset_deltas` is given for compacted batches only: the offset of each
    record relative to the batch's base offset.
    """
    if offset_deltas is not None and len(offset_deltas) != len(records):
        raise ValueError("offset_deltas must have one entry per record")
    body: list[Any] = [None if offset_deltas is None else list(offset_deltas)]
    start = 0
    # Runs are found by C-level loops over (key type, is tombstone) pairs.
    kinds = zip(map(type, map(_key_of, records)), map(is_, map(_value_of, records), repeat(None)))
    for kind, same in groupby(kinds):
        count = len(list(same))
        encoder = _RUN_ENCODERS.get(kind)
        if encoder is None:
            raise TypeError(f"not a record key: {records[start].key!r}")
        body.append(encoder(records[start : start + count]))
        start += count
    payload: bytes = _packb(body)
    return payload


def _encode_offset_commits(run: Sequence[Record]) -> list[Any]:
    groups, topics, partitions = zip(*map(_key_of, run))
    offsets, epochs, metadata, commit_ms, expire_ms = zip(*map(_value_of, run))
    return [
        KEY_VERSION_OFFSET_COMMIT, VALUE_VERSION_OFFSET_COMMIT, len(run),
        strings(groups), strings(topics), partitions,
        ints(offsets), ints(epochs), strings(metadata), ints(commit_ms), ints(expire_ms),
    ]


def _encode_offset_tombstones(run: Sequence[Record]) -> list[Any]:
    groups, topics, partitions = zip(*map(_key_of, run))
    return [KEY_VERSION_OFFSET_COMMIT, None, len(run), strings(groups), strings(topics), partitions]


def _encode_groups(run: Sequence[Record]) -> list[Any]:
    # msgpack packs tuples, NamedTuples included, as arrays: a value is its row.
    rows = list(map(_value_of, run))
    groups = strings([record[0][0] for record in run], one_index=False)
    return [KEY_VERSION_GROUP_METADATA, VALUE_VERSION_GROUP_METADATA, len(run), groups, rows]


def _encode_group_tombstones(run: Sequence[Record]) -> list[Any]:
    return [KEY_VERSION_GROUP_METADATA, None, len(run), strings([r[0][0] for r in run], one_index=False)]


_RUN_ENCODERS: dict[tuple[type, bool], Callable[[Sequence[Record]], list[Any]]] = {
    (OffsetCommitKey, False): _encode_offset_commits,
    (OffsetCommitKey, True): _encode_offset_tombstones,
    (GroupMetadataKey, False): _encode_groups,
    (GroupMetadataKey, True): _encode_group_tombstones,
    **RUN_ENCODERS,
    **service_codec.RUN_ENCODERS,
}


# ----------------------------------------------------------------- decode


def decode_records(payload: bytes | memoryview) -> list[Record]:
    """The records of a payload, in order; the load path (offsets ignored)."""
    try:
        body = _unpackb(payload)
        if type(body) is not list or not body:
            raise PayloadError("payload is not a non-empty array")
        if len(body) == 2:
            records = _decode_run(body[1])
            return [] if records is None else records
        out: list[Record] = []
        for index in range(1, len(body)):
            records = _decode_run(body[index])
            if records is not None:
                out += records
        return out
    except PayloadError:
        raise
    except _DECODE_ERRORS as exc:
        raise PayloadError(f"undecodable payload: {exc!r}") from exc


def decode_payload(payload: bytes | memoryview) -> DecodedPayload:
    """Records with their offset deltas and the count of skipped records."""
    try:
        body = _unpackb(payload)
        if type(body) is not list or not body:
            raise PayloadError("payload is not a non-empty array")
        deltas = body[0]
        if deltas is not None and type(deltas) is not list:
            raise PayloadError("offset deltas are not an array")
        records: list[Record] = []
        # (first record index, count) of every run that was decoded.
        spans: list[tuple[int, int]] = []
        position = skipped = 0
        for index in range(1, len(body)):
            run = body[index]
            decoded = _decode_run(run)
            count = run[2]
            if decoded is None:
                skipped += count
            else:
                records += decoded
                spans.append((position, count))
            position += count
    except PayloadError:
        raise
    except _DECODE_ERRORS as exc:
        raise PayloadError(f"undecodable payload: {exc!r}") from exc
    if deltas is not None and len(deltas) != position:
        raise PayloadError(f"{len(deltas)} offset deltas for {position} records")
    if skipped == 0:
        return DecodedPayload(records, deltas, 0)
    positions = deltas if deltas is not None else range(position)
    kept = [delta for start, count in spans for delta in positions[start:start + count]]
    return DecodedPayload(records, kept, skipped)


# ----------------------------------------------------- bulk load (loader)

OffsetKeyTuple = tuple[str, str, int]
OffsetPairs = Iterator[tuple[OffsetKeyTuple, tuple[Any, ...] | None]]


class LoadRun(NamedTuple):
    """One run of a payload as the load path takes it (see `decode_load_runs`)."""

    size: int
    # An offset run: lazy (key, value) pairs of plain tuples, value None for
    # a tombstone; consume them with `stage_offsets`.
    offset_pairs: OffsetPairs | None
    # Any other known run: its records. Both None: an unknown key version.
    records: list[Record] | None


def decode_load_runs(payload: bytes | memoryview) -> list[LoadRun]:
    """The runs of a payload, in order, for bulk loading.

    Offset records, nearly all of a log, are not built as records here: the
    loader merges their plain-tuple pairs into a last-wins staging dict in
    one C-level `dict.update` and builds records for the survivors only
    (`offset_records`). Raises PayloadError or UnsupportedVersionError.
    """
    try:
        body = _unpackb(payload)
        if type(body) is not list or not body:
            raise PayloadError("payload is not a non-empty array")
        return [_load_run(body[index]) for index in range(1, len(body))]
    except PayloadError:
        raise
    except _DECODE_ERRORS as exc:
        raise PayloadError(f"undecodable payload: {exc!r}") from exc


def _load_run(run: list[Any]) -> LoadRun:
    count = run[2]
    pairs = _PAIR_DECODERS.get((run[0], run[1]))
    if pairs is not None and type(count) is int and count >= 0:
        return LoadRun(count, pairs(run, count), None)
    return LoadRun(count, None, _decode_run(run))


def _offset_commit_pairs(run: list[Any], count: int) -> OffsetPairs:
    return zip(_offset_key_tuples(run, count), _offset_value_tuples(run, count))


def _offset_tombstone_pairs(run: list[Any], count: int) -> OffsetPairs:
    if len(run) != 6:
        raise PayloadError(f"offset tombstone run of {len(run)} fields")
    return zip(_offset_key_tuples(run, count), repeat(None))


def stage_offsets(staged: dict[OffsetKeyTuple, tuple[Any, ...] | None], pairs: OffsetPairs) -> None:
    """Merge one offset run into `staged`: the last record of a key wins."""
    try:
        staged.update(pairs)
    except _DECODE_ERRORS as exc:
        raise PayloadError(f"undecodable offset run: {exc!r}") from exc


def offset_records(staged: Mapping[OffsetKeyTuple, tuple[Any, ...] | None]) -> Iterator[Record]:
    """The staged offsets as records (tombstones included), in staging order."""
    keys = map(_new, repeat(OffsetCommitKey), staged.keys())
    values = [None if value is None else _new(OffsetCommitValue, value) for value in staged.values()]
    return map(_new, repeat(Record), zip(keys, values))


def unpack_body(payload: bytes | memoryview) -> list[Any]:
    """A payload's msgpack body, `[offset_deltas, run, ...]`, checked to be a non-empty array.

    For readers that decode runs themselves (`log/columnar.py`). Raises PayloadError."""
    try:
        body = _unpackb(payload)
    except _DECODE_ERRORS as exc:
        raise PayloadError(f"undecodable payload: {exc!r}") from exc
    if type(body) is not list or not body:
        raise PayloadError("payload is not a non-empty array")
    return body


def decode_run(run: list[Any]) -> list[Record] | None:
    """The records of one run of a payload's body, or None for an unknown key version.

    Raises PayloadError or UnsupportedVersionError, as `decode_payload` does."""
    try:
        return _decode_run(run)
    except PayloadError:
        raise
    except _DECODE_ERRORS as exc:
        raise PayloadError(f"undecodable payload: {exc!r}") from exc


# (key version, value version) of the runs of offset commits and of their tombstones.
OFFSET_COMMIT_RUNS = frozenset({
    (KEY_VERSION_OFFSET_COMMIT_V0, VALUE_VERSION_OFFSET_COMMIT),
    (KEY_VERSION_OFFSET_COMMIT, VALUE_VERSION_OFFSET_COMMIT),
})
OFFSET_TOMBSTONE_RUNS = frozenset({(KEY_VERSION_OFFSET_COMMIT_V0, None), (KEY_VERSION_OFFSET_COMMIT, None)})


def _decode_run(run: list[Any]) -> list[Record] | None:
    """The records of one run, or None for a run of an unknown key version."""
    count = run_count(run)
    decoder = _RUN_DECODERS.get((run[0], run[1]))
    if decoder is not None:
        return decoder(run, count)
    if run[0] in KNOWN_KEY_VERSIONS:
        raise UnsupportedVersionError(f"key version {run[0]} with unknown value version {run[1]!r}")
    return None


def _offset_key_tuples(run: list[Any], count: int) -> Iterator[tuple[str, str, int]]:
    """The keys of an offset run as plain tuples, the fields of OffsetCommitKey."""
    return zip(string_column(run[3], count), string_column(run[4], count), array(run[5], count))


def _offset_value_tuples(run: list[Any], count: int) -> Iterator[tuple[Any, ...]]:
    """The values of an offset commit run as plain tuples, the fields of OffsetCommitValue."""
    if len(run) != 11:
        raise PayloadError(f"offset commit run of {len(run)} fields")
    return zip(
        int_column(run[6], count),
        int_column(run[7], count),
        string_column(run[8], count),
        int_column(run[9], count),
        int_column(run[10], count),
    )


def _offset_keys(run: list[Any], count: int) -> Iterable[OffsetCommitKey]:
    return map(_new, repeat(OffsetCommitKey), _offset_key_tuples(run, count))


def _decode_offset_commits_v0(run: list[Any], count: int) -> list[Record]:
    values = map(_new, repeat(OffsetCommitValue), _offset_value_tuples(run, count))
    return list(map(_new, repeat(Record), zip(_offset_keys(run, count), values)))


def _decode_offset_tombstones(run: list[Any], count: int) -> list[Record]:
    if len(run) != 6:
        raise PayloadError(f"offset tombstone run of {len(run)} fields")
    return list(map(_new, repeat(Record), zip(_offset_keys(run, count), repeat(None))))


def _group_keys(run: list[Any], count: int) -> Iterable[GroupMetadataKey]:
    return map(_new, repeat(GroupMetadataKey), zip(string_column(run[3], count, one_index=False)))


def _decode_groups_v0(run: list[Any], count: int) -> list[Record]:
    if len(run) != 5:
        raise PayloadError(f"group metadata run of {len(run)} fields")
    values = [_group_value_v0(row) for row in array(run[4], count)]
    return list(map(_new, repeat(Record), zip(_group_keys(run, count), values)))


def _group_value_v0(row: list[Any]) -> GroupMetadataValue:
    protocol_type, generation, protocol, leader, state_ms, members = row
    # _make checks the field count; group records are rare, safety is cheap.
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, state_ms, tuple(map(MemberRecord._make, members))
    )


def _decode_group_tombstones(run: list[Any], count: int) -> list[Record]:
    if len(run) != 4:
        raise PayloadError(f"group tombstone run of {len(run)} fields")
    return list(map(_new, repeat(Record), zip(_group_keys(run, count), repeat(None))))


_RUN_DECODERS: dict[tuple[int, int | None], Callable[[list[Any], int], list[Record]]] = {
    (KEY_VERSION_OFFSET_COMMIT_V0, VALUE_VERSION_OFFSET_COMMIT): _decode_offset_commits_v0,
    (KEY_VERSION_OFFSET_COMMIT, VALUE_VERSION_OFFSET_COMMIT): _decode_offset_commits_v0,
    (KEY_VERSION_OFFSET_COMMIT_V0, None): _decode_offset_tombstones,
    (KEY_VERSION_OFFSET_COMMIT, None): _decode_offset_tombstones,
    (KEY_VERSION_GROUP_METADATA, VALUE_VERSION_GROUP_METADATA): _decode_groups_v0,
    (KEY_VERSION_GROUP_METADATA, None): _decode_group_tombstones,
    **RUN_DECODERS,
    **service_codec.RUN_DECODERS,
}

_PAIR_DECODERS: dict[tuple[int, int | None], Callable[[list[Any], int], OffsetPairs]] = {
    (KEY_VERSION_OFFSET_COMMIT_V0, VALUE_VERSION_OFFSET_COMMIT): _offset_commit_pairs,
    (KEY_VERSION_OFFSET_COMMIT, VALUE_VERSION_OFFSET_COMMIT): _offset_commit_pairs,
    (KEY_VERSION_OFFSET_COMMIT_V0, None): _offset_tombstone_pairs,
    (KEY_VERSION_OFFSET_COMMIT, None): _offset_tombstone_pairs,
}
