"""Runs of service state records (raygroups' own key version 100).

Owns the run layout of `ServiceStateKey` records (FORMAT.md, "Service state
records"); `log/codec.py` registers these beside its own. Kafka's key
versions end far below 100, so a Kafka tool reading the log skips these runs
as it skips any unknown key version, and so does an older raygroups.

A run is `[100, 0, count, kinds, names, datas]`: kinds and names dictionary
encoded string columns (names always in array form: it bounds the count),
datas an array of msgpack bins. A tombstone run is `[100, nil, count, kinds,
names]`. The data is its owner's encoding; the decoder checks only that it
is bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

from coordinator.records import Record, ServiceStateKey, ServiceStateValue
from log.columns import PayloadError, array, string_column, strings

KEY_VERSION_SERVICE_STATE = 100
VALUE_VERSION_SERVICE_STATE = 0
_new = tuple.__new__


def _key_columns(run: Sequence[Record]) -> list[Any]:
    keys: list[ServiceStateKey] = [record.key for record in run]  # type: ignore[misc]
    return [strings([k.kind for k in keys]), strings([k.name for k in keys], one_index=False)]


def _encode(run: Sequence[Record]) -> list[Any]:
    datas = [record.value.data for record in run]  # type: ignore[union-attr]
    return [KEY_VERSION_SERVICE_STATE, VALUE_VERSION_SERVICE_STATE, len(run), *_key_columns(run), datas]


def _encode_tombstones(run: Sequence[Record]) -> list[Any]:
    return [KEY_VERSION_SERVICE_STATE, None, len(run), *_key_columns(run)]


def _keys(run: list[Any], count: int) -> list[ServiceStateKey]:
    kinds = string_column(run[3], count)
    names = string_column(run[4], count, one_index=False)
    keys = [ServiceStateKey(kind, name) for kind, name in zip(kinds, names)]
    if any(type(k.kind) is not str or type(k.name) is not str for k in keys):
        raise PayloadError("a service state key is not two strings")
    return keys


def _decode(run: list[Any], count: int) -> list[Record]:
    if len(run) != 6:
        raise PayloadError(f"service state run of {len(run)} fields")
    datas = array(run[5], count)
    if any(type(data) is not bytes for data in datas):
        raise PayloadError("service state data is not bytes")
    return [Record(key, ServiceStateValue(data)) for key, data in zip(_keys(run, count), datas)]


def _decode_tombstones(run: list[Any], count: int) -> list[Record]:
    if len(run) != 5:
        raise PayloadError(f"service state tombstone run of {len(run)} fields")
    return list(map(_new, repeat(Record), zip(_keys(run, count), repeat(None))))


RUN_ENCODERS: dict[tuple[type, bool], Callable[[Sequence[Record]], list[Any]]] = {
    (ServiceStateKey, False): _encode,
    (ServiceStateKey, True): _encode_tombstones,
}
RUN_DECODERS: dict[tuple[int, int | None], Callable[[list[Any], int], list[Record]]] = {
    (KEY_VERSION_SERVICE_STATE, VALUE_VERSION_SERVICE_STATE): _decode,
    (KEY_VERSION_SERVICE_STATE, None): _decode_tombstones,
}
