"""Building kio response entities from plain values, for any version of an API.

kio generates one class per API version; a handler fills the fields of the
newest version it knows and `build` keeps those the requested version has,
so one handler serves every version. Its rules:
- A value for a field the class lacks is dropped (that version has no such
  field); a field with no value takes its schema default, and a field with
  neither is a bug in the handler: TypeError naming it.
- Nested structs are given as mappings (or tuples of mappings) and built as
  the nested class of that version; an entity already built is kept.
- `timedelta_*` fields take int milliseconds, `error_code` fields take
  coordinator `Errors` (mapped by name, `error_code`) or kio's `ErrorCode`, and None in a
  non-nullable string or bytes field is written as empty, as Kafka writes
  an old version's null protocol name.
The plan of each class is computed once and cached. Responses that repeat
(`RepeatedResponses`: a consumer's commits and heartbeats are answered the
same way each time) are built once.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Hashable, Mapping
from datetime import timedelta
from typing import Any, NamedTuple, TypeVar, Union, get_args, get_origin

from kio.index import load_response_from_request
from kio.schema.errors import ErrorCode

from coordinator.errors import Errors

T = TypeVar("T")
_MS = timedelta(milliseconds=1)

# Every coordinator error as kio's, by name: an error missing from kio fails at import.
ERROR_CODES: dict[Errors, ErrorCode] = {e: ErrorCode[e.name.lower()] for e in Errors}


def error_code(error: Errors | ErrorCode) -> ErrorCode:
    """kio's code for a coordinator error; kio's own codes (for errors the coordinator never
    answers, such as UNKNOWN_TOPIC_ID) pass through."""
    return error if isinstance(error, ErrorCode) else ERROR_CODES[error]


def ms(duration: timedelta) -> int:
    """A kio duration field as int milliseconds (Kafka's wire value)."""
    return duration // _MS


class _FieldPlan(NamedTuple):
    name: str
    convert: Callable[[Any], Any] | None
    required: bool


_ABSENT = object()


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """An instance of kio entity `cls` from `values` (module docstring)."""
    kwargs: dict[str, Any] = {}
    for name, convert, required in _plan(cls):
        value = values.get(name, _ABSENT)
        if value is not _ABSENT:
            kwargs[name] = value if convert is None else convert(value)
        elif required:
            raise TypeError(f"{cls.__module__}.{cls.__name__}: no value for {name!r}")
    return cls(**kwargs)


_PLANS: dict[type, tuple[_FieldPlan, ...]] = {}


def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = tuple(
            _FieldPlan(
                f.name,
                _converter(f),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
    return plan


def _converter(f: dataclasses.Field[Any]) -> Callable[[Any], Any] | None:
    kafka_type = f.metadata.get("kafka_type", "")
    inner, nullable = _strip_none(f.type)
    if get_origin(inner) is tuple:
        (item,) = get_args(inner)[:1]
        return _items_of(item) if isinstance(item, type) and dataclasses.is_dataclass(item) else None
    if isinstance(inner, type) and dataclasses.is_dataclass(inner):
        return _struct_of(inner)
    if kafka_type.startswith("timedelta"):
        return _duration
    if kafka_type == "error_code":
        return error_code
    if not nullable and kafka_type in ("string", "bytes"):
        empty = "" if kafka_type == "string" else b""
        return lambda value: empty if value is None else value
    return None


def _strip_none(hint: Any) -> tuple[Any, bool]:
    if get_origin(hint) in (Union, types.UnionType):
        args = tuple(a for a in get_args(hint) if a is not type(None))
        return (args[0] if len(args) == 1 else hint), len(args) < len(get_args(hint))
    return hint, False


def _duration(value: int | timedelta) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(milliseconds=value)


def _struct_of(cls: type) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        return build(cls, value) if isinstance(value, Mapping) else value

    return convert


def _items_of(cls: type) -> Callable[[Any], Any]:
    one = _struct_of(cls)

    def convert(values: Any) -> Any:
        return None if values is None else tuple(map(one, values))

    return convert


def respond(request: Any, values: Mapping[str, Any]) -> Any:
    """The response to kio `request`, at its version, from `values` (never throttled)."""
    return build(_response_type(type(request)), {"throttle_time": 0, **values})


class RepeatedResponses:
    """`respond` for answers that repeat, keyed by what determines them (a commit's per-partition
    results, a heartbeat's error): the same kio entity each time, built once, so a
    `codec.ResponseWriter` also encodes it once. kio entities are immutable, so sharing one is
    safe. Bounded: forgets every answer when `capacity` are held."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._responses: dict[tuple[type, Hashable], Any] = {}

    def respond(self, request: Any, key: Hashable, values: Callable[[], Mapping[str, Any]]) -> Any:
        entry = (type(request), key)
        response = self._responses.get(entry)
        if response is None:
            if len(self._responses) >= self.capacity:
                self._responses.clear()
            response = self._responses[entry] = respond(request, values())
        return response


_RESPONSE_TYPES: dict[type, type] = {}


def _response_type(request_type: type) -> type:
    found = _RESPONSE_TYPES.get(request_type)
    if found is None:
        found = _RESPONSE_TYPES[request_type] = load_response_from_request(request_type)
    return found
