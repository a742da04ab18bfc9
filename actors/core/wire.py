"""How messages cross Ray process boundaries: pickles, in a compact form.

Responses travel as bytes. Ray serializes a returned Python object through
cloudpickle, whose per-call set-up and hooks cost about 100 us on the actor
and 70 us on the caller more than returning `bytes` (measured with an echo
actor on this machine). So `handle_wire` and `handle_batch` return responses
pickled with the standard pickler (`dumps_response`), and the client
unpickles them (`loads_response`). Requests go as Ray arguments, through
cloudpickle, which honours the same reducers.

The compact form: a message with an item per partition would otherwise
pickle each item as an object (about 7 us each way); these travel as one
column per item field and are rebuilt without re-running the checks they
passed when first built. An error column whose items all carry the same
error (the usual case) travels as that one code. The rebuilt request is
therefore unchecked: the partition actor validates every request it
receives (coordinator.checks.validate_request).

Rules:
- The reducers are registered in `copyreg.dispatch_table` when this module
  is imported. `actors/__init__.py` imports it, so every process that uses
  any part of the Ray layer (client, partition actor, controller, CLI) pickles
  the compact form, and tests/conftest.py imports it for the tests; a
  process that only unpickles imports it through the pickle's own
  reference to `_rebuild_columns`.
- Rebuilding sets the slots of a new object directly: no `__init__`, no
  checks, and no code generated at run time.
"""

from __future__ import annotations

import copyreg
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

from coordinator.checks import field_names
from coordinator.errors import Errors
from coordinator.messages import (
    FetchedOffset,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionResult,
    partition_results,
)

PROTOCOL = pickle.HIGHEST_PROTOCOL

# message class, its field of items, the items' class
COLUMN_MESSAGES: tuple[tuple[type, str, type], ...] = (
    (OffsetCommitRequest, "partitions", OffsetCommitPartition),
    (OffsetCommitResponse, "partitions", PartitionResult),
    (OffsetFetchResponse, "partitions", FetchedOffset),
    (OffsetDeleteResponse, "partitions", PartitionResult),
)

_ERRORS_BY_CODE = {int(e): e for e in Errors}
# tuple.__new__(cls, values) builds a NamedTuple in C, skipping its __new__.
_new_tuple = tuple.__new__
_new_object = object.__new__
# Runs an iterator to its end in C, keeping nothing.
_consume: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend
# The slot setters of each rebuilt dataclass, in field order (frozen
# dataclasses refuse setattr; the slot descriptors' __set__ does not check).
_SETTERS: dict[type, tuple[Callable[[Any, Any], None], ...]] = {}


def dumps_response(response: Any) -> bytes:
    return pickle.dumps(response, PROTOCOL)


def loads_response(data: bytes) -> Any:
    return pickle.loads(data)


def _build(cls: type, values: Iterable[object]) -> Any:
    """An instance of dataclass `cls` with `values` as its fields, unchecked."""
    obj: Any = _new_object(cls)
    for set_field, value in zip(_SETTERS[cls], values):
        set_field(obj, value)
    return obj


def _build_items(cls: type, columns: Sequence[Iterable[object]], count: int) -> tuple[Any, ...]:
    """`count` instances of dataclass `cls` from one column per field: one C
    loop per field (faster than one Python call per item)."""
    items: tuple[Any, ...] = tuple(map(_new_object, repeat(cls, count)))
    for set_field, column in zip(_SETTERS[cls], columns):
        _consume(map(set_field, items, column))
    return items


def _rebuild_columns(
    cls: type, field_values: tuple[Any, ...], index: int, item_cls: type, error_at: int
) -> Any:
    values = list(field_values)
    columns = values[index]
    if item_cls is PartitionResult and type(columns[error_at]) is int:
        values[index] = partition_results(columns[0], columns[1], _ERRORS_BY_CODE[columns[error_at]])
        return _build(cls, values)
    columns = list(columns)
    count = len(columns[0])
    if error_at >= 0:
        codes = columns[error_at]
        if type(codes) is int:
            columns[error_at] = repeat(_ERRORS_BY_CODE[codes], count)
        else:
            columns[error_at] = map(_ERRORS_BY_CODE.__getitem__, codes)
    if issubclass(item_cls, tuple):
        values[index] = tuple(map(_new_tuple, repeat(item_cls), zip(*columns)))
    else:
        values[index] = _build_items(item_cls, columns, count)
    return _build(cls, values)


def _columns_reducer(cls: type, field_name: str, item_cls: type) -> Callable[[Any], tuple[Any, ...]]:
    names = field_names(cls)
    index = names.index(field_name)
    item_names = field_names(item_cls)
    error_at = item_names.index("error") if "error" in item_names else -1
    row_of = None if issubclass(item_cls, tuple) else attrgetter(*item_names)
    values_of = attrgetter(*names)
    one_field = len(names) == 1

    def reduce(self: Any) -> tuple[Any, ...]:
        # Tuples and attrgetter rather than lists and a comprehension: a
        # 1-partition answer pickles in about half the time (measured).
        values = [values_of(self)] if one_field else list(values_of(self))
        items = values[index]
        if items is None:
            return (_build, (cls, tuple(values)))
        rows = items if row_of is None else map(row_of, items)
        columns: list[Any] = list(zip(*rows)) or [() for _ in item_names]
        if error_at >= 0:
            errors = columns[error_at]
            if errors and errors.count(errors[0]) == len(errors):
                columns[error_at] = int(errors[0])
            else:
                columns[error_at] = list(map(int, errors))
        values[index] = tuple(columns)
        return (_rebuild_columns, (cls, tuple(values), index, item_cls, error_at))

    return reduce


def _register() -> None:
    for cls, field_name, item_cls in COLUMN_MESSAGES:
        for built in (cls, item_cls):
            if not issubclass(built, tuple):
                _SETTERS[built] = tuple(built.__dict__[name].__set__ for name in field_names(built))
        copyreg.pickle(cls, _columns_reducer(cls, field_name, item_cls))


_register()
