"""The column encodings a payload's runs are built from (FORMAT.md, "Payload").

Owns the dictionary-encoded string column, the array column and the int
column that may collapse to one value, shared by every run kind of
`log/codec.py` and `log/consumer_codec.py`, and `PayloadError`, what a
malformed column raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any


class PayloadError(ValueError):
    """A payload that is not a valid record payload."""


# Kafka's record count of a batch is an int32: no run holds more.
MAX_RUN_RECORDS = 2**31 - 1


def run_count(run: list[Any]) -> int:
    """A run's record count (its third field), checked: a damaged count is a PayloadError."""
    count = run[2]
    if type(count) is not int or not 0 <= count <= MAX_RUN_RECORDS:
        raise PayloadError(f"bad record count {count!r}")
    return count


def strings(values: Sequence[Any], one_index: bool = True) -> list[Any]:
    """A dictionary-encoded string column. `one_index`: a column of one
    distinct string may be written with the single index 0 (never for a
    run's only column, whose array bounds the run's count)."""
    index = {value: i for i, value in enumerate(dict.fromkeys(values))}
    if one_index and len(index) == 1:
        # One distinct string (one topic, every metadata ""): index 0 for all.
        return [list(index), 0]
    return [list(index), list(map(index.__getitem__, values))]


def ints(values: Sequence[int]) -> Any:
    """An int column, or its one value when every entry is the same (commit
    and expiry times, leader epochs): a commit batch packs a third as much."""
    first = values[0]
    if values[-1] == first and values.count(first) == len(values):
        return first
    return values


def array(values: Any, count: int) -> list[Any]:
    """A column that is always an array: it bounds `count` by the payload's size."""
    if type(values) is not list or len(values) != count:
        raise PayloadError(f"column is not an array of {count} values")
    return values


def int_column(values: Any, count: int) -> Iterable[Any]:
    """An int column: an array, or one int standing for `count` copies."""
    if type(values) is int:
        return repeat(values, count)
    return array(values, count)


def string_column(column: Any, count: int, one_index: bool = True) -> Iterable[Any]:
    strings, ids = column
    if type(strings) is not list:
        raise PayloadError("string table is not an array")
    if one_index and type(ids) is int:
        if not 0 <= ids < len(strings):
            raise PayloadError(f"string index {ids} out of range")
        return repeat(strings[ids], count)
    ids = array(ids, count)
    if len(strings) == 1 and ids.count(0) == count:
        # One distinct value (often: every metadata is ""): no lookups.
        return repeat(strings[0], count)
    return map(strings.__getitem__, ids)
