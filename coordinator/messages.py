"""Requests and responses of the group protocol, shaped like Kafka's.

Field names follow Kafka's JSON message schemas in snake case. Requests check
the Python types of their fields at construction and raise TypeError or
ValueError with a clear message; protocol-level problems (a bad session
timeout, an unknown member) are answered with a Kafka error code instead.

Messages are frozen dataclasses, except the per-partition items of
OffsetCommit (`OffsetCommitPartition`, `PartitionResult`): a commit carries
them by the hundred, and as NamedTuples, like the log's records, they are
built, taken apart and rebuilt by loops that run in C.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple, Union, get_args, get_origin, get_type_hints

from coordinator.errors import Errors

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
INVALID_OFFSET = -1

Checker = Callable[[object], bool]
_CHECKERS: dict[type, tuple[tuple[str, str, Checker], ...]] = {}


def _checker(hint: Any) -> Checker:
    """Compile a type hint into a fast predicate (requests are built per call)."""
    origin = get_origin(hint)
    if hint is Any:
        return lambda v: True
    if origin is Union or origin is types.UnionType:
        options = [_checker(arg) for arg in get_args(hint)]
        return lambda v: any(check(v) for check in options)
    if hint is type(None):
        return lambda v: v is None
    if origin is tuple:
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _checker(args[0])
            return lambda v: isinstance(v, tuple) and all(item(x) for x in v)
        items = [_checker(a) for a in args]
        return lambda v: isinstance(v, tuple) and len(v) == len(items) and all(c(x) for c, x in zip(items, v))
    if origin is not None:
        return lambda v: isinstance(v, origin)
    if hint is int:
        return _is_int64
    if hint is bytes:
        return lambda v: isinstance(v, (bytes, bytearray, memoryview))
    if hint is str:
        return _is_utf8_str
    return lambda v: isinstance(v, hint)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _is_int64(value: object) -> bool:
    """An int (not a bool) that fits Kafka's widest integer, int64: the log
    could not encode a larger one."""
    if type(value) is not int and (not isinstance(value, int) or isinstance(value, bool)):
        return False  # (the exact type is checked first: the usual case costs one test)
    return INT64_MIN <= value <= INT64_MAX


def _is_utf8_str(value: object) -> bool:
    """A str that UTF-8 can encode, as every string on Kafka's wire: a lone
    surrogate would be accepted here and fail later, in the log's encoder."""
    if not isinstance(value, str):
        return False
    if value.isascii():  # a flag of the string: no scan
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_types(obj: object) -> None:
    """Raise TypeError naming the first field whose value has the wrong type,
    or ValueError if a str is not valid UTF-8 or an int is beyond int64."""
    cls = type(obj)
    checkers = _CHECKERS.get(cls)
    if checkers is None:
        hints = get_type_hints(cls)
        checkers = tuple((name, str(hints[name]), _checker(hints[name])) for name in _field_names(cls))
        _CHECKERS[cls] = checkers
    for name, expected, check in checkers:
        value = getattr(obj, name)
        if not check(value):
            reason = _unencodable(value)
            if reason is not None:
                raise ValueError(f"{cls.__name__}.{name} must be {reason}, got {value!r:.80}")
            raise TypeError(
                f"{cls.__name__}.{name} must be {expected}, got {type(value).__name__}: {value!r:.80}"
            )


def _unencodable(value: object) -> str | None:
    """What a str or int (maybe nested in tuples) of the right type fails to be, if anything."""
    if isinstance(value, tuple):
        return next(filter(None, map(_unencodable, value)), None)
    if isinstance(value, str) and not _is_utf8_str(value):
        return "valid UTF-8"
    if isinstance(value, int) and not isinstance(value, bool) and not _is_int64(value):
        return "within int64"
    return None


def _field_names(cls: type) -> tuple[str, ...]:
    """The fields of a message dataclass or NamedTuple, in order."""
    names: tuple[str, ...] = getattr(cls, "_fields", None) or tuple(f.name for f in fields(cls))
    return names


class _Checked:
    __slots__ = ()

    def __post_init__(self) -> None:
        check_types(self)


# ---------------------------------------------------------------- JoinGroup


@dataclass(frozen=True, slots=True)
class JoinGroupRequest(_Checked):
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    # JoinGroup v4+ (KIP-394): a new dynamic member first gets MEMBER_ID_REQUIRED.
    require_known_member_id: bool = True
    # JoinGroup v9+ (KIP-814): a static leader rejoining a Stable group may skip the assignor.
    support_skip_assignment: bool = True
    reason: str = ""


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: Errors
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


# ---------------------------------------------------------------- SyncGroup


@dataclass(frozen=True, slots=True)
class SyncGroupRequest(_Checked):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: Errors
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


# ---------------------------------------------------------------- Heartbeat


@dataclass(frozen=True, slots=True)
class HeartbeatRequest(_Checked):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: Errors


# ---------------------------------------------------------------- LeaveGroup


@dataclass(frozen=True, slots=True)
class MemberIdentity(_Checked):
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest(_Checked):
    group_id: str
    members: tuple[MemberIdentity, ...]


@dataclass(frozen=True, slots=True)
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: Errors


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: Errors
    members: tuple[MemberLeaveResult, ...] = ()


# ---------------------------------------------------------------- OffsetCommit


class _OffsetCommitPartitionFields(NamedTuple):
    topic: str
    partition: int
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetCommitPartition(_OffsetCommitPartitionFields):
    __slots__ = ()

    def __new__(
        cls, topic: str, partition: int, offset: int, metadata: str = "", leader_epoch: int = -1
    ) -> OffsetCommitPartition:
        self = tuple.__new__(cls, (topic, partition, offset, metadata, leader_epoch))
        check_types(self)
        return self


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest(_Checked):
    group_id: str
    partitions: tuple[OffsetCommitPartition, ...]
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    # OffsetCommit v2-v4 retention_time_ms; -1 lets KIP-211 retention decide.
    retention_time_ms: int = -1


class PartitionResult(NamedTuple):
    topic: str
    partition: int
    error: Errors


# Shared PartitionResults: small immutable values that recur (a consumer
# commits the same partitions again and again). Sharing them spares the
# allocations, which in a Ray driver's large heap cost mostly garbage
# collections (measured: a 100-partition commit's answer doubled them).
_SHARED_RESULTS: dict[tuple[str, int, Errors], PartitionResult] = {}
_topic_of = attrgetter("topic")
_partition_of = attrgetter("partition")
SHARED_RESULTS_MAX = 65_536


def partition_results(
    topics: Sequence[str], partitions: Sequence[int], error: Errors
) -> tuple[PartitionResult, ...]:
    """One PartitionResult per (topic, partition), all with `error`."""
    if len(topics) == 1:  # the most frequent answer, looked up without iterators (2x cheaper)
        one = _SHARED_RESULTS.get((topics[0], partitions[0], error))
        if one is not None:
            return (one,)
    found = tuple(map(_SHARED_RESULTS.get, zip(topics, partitions, repeat(error))))
    if all(found):
        return found  # type: ignore[return-value]
    if len(_SHARED_RESULTS) >= SHARED_RESULTS_MAX:
        _SHARED_RESULTS.clear()
    made = map(_new_tuple, repeat(PartitionResult), zip(topics, partitions, repeat(error)))
    return tuple(_SHARED_RESULTS.setdefault(result, result) for result in made)


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    partitions: tuple[PartitionResult, ...]

    def errors(self) -> dict[tuple[str, int], Errors]:
        return {(p.topic, p.partition): p.error for p in self.partitions}


def commit_error_response(request: OffsetCommitRequest, error: Errors) -> OffsetCommitResponse:
    """The answer to a commit that fails as a whole: `error` for every partition."""
    partitions = request.partitions
    return OffsetCommitResponse(
        partition_results(tuple(map(_topic_of, partitions)), tuple(map(_partition_of, partitions)), error)
    )


# ---------------------------------------------------------------- OffsetFetch


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest(_Checked):
    group_id: str
    # None asks for every committed offset of the group.
    partitions: tuple[tuple[str, int], ...] | None = None
    require_stable: bool = True


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: Errors
    partitions: tuple[FetchedOffset, ...] = ()

    def offsets(self) -> dict[tuple[str, int], int]:
        return {(p.topic, p.partition): p.offset for p in self.partitions}


# ---------------------------------------------------------------- admin


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest(_Checked):
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    error: Errors
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


@dataclass(frozen=True, slots=True)
class ListGroupsRequest(_Checked):
    # Case-insensitive state names (KIP-518); empty means every state.
    states_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    error: Errors
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest(_Checked):
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    results: tuple[tuple[str, Errors], ...]

    def errors(self) -> dict[str, Errors]:
        return dict(self.results)


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest(_Checked):
    group_id: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error: Errors
    partitions: tuple[PartitionResult, ...] = ()


Request = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | DescribeGroupsRequest
    | ListGroupsRequest
    | DeleteGroupsRequest
    | OffsetDeleteRequest
)


# ------------------------------------------------------------ wire form
#
# Requests and responses cross process boundaries as pickles. A message
# with a partition per item would otherwise pickle each item as an object
# (about 7 us each way); these travel as one column per item field and are
# rebuilt without re-running the type checks they passed when first built.
# An error column whose items all carry the same error (the usual case)
# travels as that one code.

_BUILDERS: dict[type, Callable[..., Any]] = {}
_ERRORS_BY_CODE = {int(e): e for e in Errors}
# tuple.__new__(cls, values) builds a NamedTuple in C, skipping its __new__.
_new_tuple = tuple.__new__


def _builder(cls: type) -> Callable[..., Any]:
    """A function (field values...) -> dataclass instance that skips __init__
    and its checks; generated like dataclasses' own __init__."""
    builder = _BUILDERS.get(cls)
    if builder is None:
        names = [f.name for f in fields(cls)]
        env: dict[str, Any] = {"new": object.__new__, "cls": cls}
        env.update({f"set_{n}": cls.__dict__[n].__set__ for n in names})
        body = "".join(f"    set_{n}(o, {n})\n" for n in names)
        exec(f"def build({', '.join(names)}):\n    o = new(cls)\n{body}    return o\n", env)
        built: Callable[..., Any] = env["build"]
        builder = _BUILDERS[cls] = built
    return builder


def _build(cls: type, values: tuple[object, ...] | list[object]) -> Any:
    return _builder(cls)(*values)


def _rebuild_columns(
    cls: type, field_values: tuple[Any, ...], index: int, item_cls: type, error_at: int
) -> Any:
    values = list(field_values)
    columns = values[index]
    if item_cls is PartitionResult and type(columns[error_at]) is int:
        values[index] = partition_results(columns[0], columns[1], _ERRORS_BY_CODE[columns[error_at]])
        return _build(cls, values)
    columns = list(columns)
    if error_at >= 0:
        codes = columns[error_at]
        if type(codes) is int:
            columns[error_at] = repeat(_ERRORS_BY_CODE[codes], len(columns[0]))
        else:
            columns[error_at] = map(_ERRORS_BY_CODE.__getitem__, codes)
    if issubclass(item_cls, tuple):
        values[index] = tuple(map(_new_tuple, repeat(item_cls), zip(*columns)))
    else:
        values[index] = tuple(map(_builder(item_cls), *columns))
    return _build(cls, values)


def _columns_reducer(cls: type, field_name: str, item_cls: type) -> Callable[[Any], tuple[Any, ...]]:
    names = _field_names(cls)
    index = names.index(field_name)
    item_names = _field_names(item_cls)
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


for _cls, _field, _item in (
    (OffsetCommitRequest, "partitions", OffsetCommitPartition),
    (OffsetCommitResponse, "partitions", PartitionResult),
    (OffsetFetchResponse, "partitions", FetchedOffset),
    (OffsetDeleteResponse, "partitions", PartitionResult),
):
    _cls.__reduce__ = _columns_reducer(_cls, _field, _item)  # type: ignore[method-assign, assignment]
