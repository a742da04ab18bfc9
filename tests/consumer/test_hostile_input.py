"""Garbage in every field of the consumer-group requests, as a hostile process
could send them to a partition actor (built without their constructors, as
`actors/core/wire.py` rebuilds them): ConsumerGroupHeartbeat,
ConsumerGroupDescribe, and OffsetCommit/OffsetFetch v9 with member fields.

For every request the outcome is one of two: `validate_request` refuses it
with an InvalidRequestError of one line naming the field, or the Shard
answers it with a response of the request's type, never an exception. A
request answered with an error writes nothing and changes no group; one
accepted writes records the log can encode, and replaying everything written
rebuilds the live groups. Another group's member is served right after each.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import fields
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from coordinator import InvalidRequestError, validate_request
from coordinator.checks import INT64_MAX, INT64_MIN
from coordinator.consumer.validation import MAX_SUBSCRIBED_TOPIC_NAMES
from coordinator.errors import Errors
from coordinator.messages import (
    AssignmentWatchRequest,
    AssignmentWatchResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from log.codec import decode_records, encode_payload

from tests.consumer.group_history import state
from tests.consumer.heartbeat_harness import REBALANCE_MS, Driver, tp

# OTHER is never the target of a hostile request: it is the group that must go on being served.
GROUP, OTHER = "g", "bystander-group-7"
TOPICS = {"foo": 4, "bar": 2}
RESPONSE_TYPES: dict[type, type] = {
    ConsumerGroupHeartbeatRequest: ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeRequest: ConsumerGroupDescribeResponse,
    OffsetCommitRequest: OffsetCommitResponse,
    OffsetFetchRequest: OffsetFetchResponse,
    AssignmentWatchRequest: AssignmentWatchResponse,
}


class Junk:
    """Not a message, not a builtin: its code must never run inside the checks."""

    def __repr__(self) -> str:
        raise AssertionError("a check ran the sender's code")

    def __eq__(self, other: object) -> bool:
        raise AssertionError("a check ran the sender's code")

    __hash__ = None  # type: ignore[assignment]


class StrJunk(str):
    pass


class IntJunk(int):
    pass


# ---------------------------------------------------------------- strategies

junk_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 2**200, -(2**200)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(math.nan),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.uuids(),
    st.builds(Junk),
    st.builds(StrJunk, st.text(max_size=5)),
    st.builds(IntJunk, st.integers(-5, 5)),
    st.builds(bytearray, st.binary(max_size=5)),
)
junk = st.recursive(
    junk_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(tuple),
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=8,
)

odd_text = st.one_of(
    st.sampled_from(["", "g", "A", "B", "other", "foo", "bar", " ", "\x00", "é✓", "\ud800", "x" * 40_000]),
    st.text(max_size=30),
)
odd_ints = st.one_of(
    st.sampled_from([0, 1, 2, 3, -1, -2, -3, 2**31 - 1, 2**31, -(2**31), INT64_MAX, INT64_MIN, 99]),
    st.integers(INT64_MIN, INT64_MAX),
)
topic_ids = st.one_of(
    st.sampled_from([tp("foo").topic_id, tp("bar").topic_id, UUID(int=0), UUID(int=2**128 - 1)]),
    st.uuids(),
)
partition_numbers = st.lists(st.one_of(st.integers(-3, 6), odd_ints), max_size=6).map(tuple)
owned_topics = st.one_of(
    st.builds(ConsumerGroupTopicPartitions, topic_ids, partition_numbers),
    st.builds(lambda i, p: tuple.__new__(ConsumerGroupTopicPartitions, (i, p)), junk, junk),
    st.builds(lambda i, p: (i, p), topic_ids, partition_numbers),
    st.builds(lambda i: tuple.__new__(ConsumerGroupTopicPartitions, i), st.lists(junk, max_size=3)),
)
owned = st.one_of(st.none(), st.lists(owned_topics, max_size=4).map(tuple))
topic_names = st.one_of(
    st.none(),
    st.lists(st.one_of(st.sampled_from(["foo", "bar", "missing", ""]), odd_text), max_size=5).map(tuple),
)
regexes = st.one_of(
    st.none(),
    st.sampled_from(
        ["", "foo", ".*", "fo+", "ba.*", "(", "[", "\\", "(?P<x>a)", "a{1001}", "((a{100}){100}){100}"]
    ),
    st.text(max_size=20),
)


def values_for(name: str, hint_text: str, with_junk: bool) -> st.SearchStrategy[Any]:
    """Plausible and odd values for a field of that type, and junk of every type if `with_junk`."""
    special: dict[str, st.SearchStrategy[Any]] = {
        "topic_partitions": owned,
        "subscribed_topic_names": topic_names,
        "subscribed_topic_regex": regexes,
        "server_assignor": st.one_of(
            st.none(), st.sampled_from(["uniform", "range", "sticky", ""]), odd_text
        ),
        "group_ids": st.lists(odd_text, max_size=4).map(tuple),
        "partitions": st.one_of(st.none(), st.lists(st.tuples(odd_text, odd_ints), max_size=3).map(tuple)),
    }
    plausible = special.get(name)
    if plausible is None:
        if hint_text.startswith("str | None"):
            plausible = st.one_of(st.none(), odd_text)
        elif hint_text.startswith("str"):
            plausible = odd_text
        elif hint_text.startswith("int"):
            plausible = odd_ints
        elif hint_text.startswith("bool"):
            plausible = st.booleans()
        else:
            plausible = junk
    return st.one_of(plausible, plausible, junk) if with_junk else plausible


def forged(cls: type, values: dict[str, Any]) -> Any:
    """A request set field by field, without its constructor or its checks."""
    obj = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(obj, name, value)
    return obj


@st.composite
def hostile(draw: st.DrawFn, base: Any, with_junk: bool = True) -> Any:
    """`base` with some of its fields replaced by odd values, junk if `with_junk` (or left unset)."""
    values = {f.name: getattr(base, f.name) for f in fields(base)}
    names = list(values)
    most = draw(st.sampled_from([1, 2, 3, len(names)]))
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=most, unique=True))
    for name in chosen:
        hint = next(f.type for f in fields(base) if f.name == name)
        values[name] = draw(values_for(name, str(hint), with_junk))
    if with_junk and draw(st.integers(0, 30)) == 0:
        del values[draw(st.sampled_from(names))]
    return forged(type(base), values)


# ---------------------------------------------------------------- the group under attack


def driver(assignment_interval_ms: int = 0) -> tuple[Driver, int]:
    """Group GROUP with members A and B on foo and bar (A reconciled), group OTHER with member C."""
    d = Driver(TOPICS, group_consumer_assignment_interval_ms=assignment_interval_ms)
    d.ok(join(GROUP, "A", "foo", "bar"))
    d.ok(join(GROUP, "B", "foo", instance_id="i-b", subscribed_topic_regex=None))
    d.ok(ConsumerGroupHeartbeatRequest(GROUP, "A", 1, topic_partitions=()))
    c = d.ok(join(OTHER, "C", "foo"))
    return d, c.member_epoch


def join(group: str, member: str, *topics: str, **extra: Any) -> ConsumerGroupHeartbeatRequest:
    extra.setdefault("subscribed_topic_names", topics)
    return ConsumerGroupHeartbeatRequest(
        group, member, 0, rebalance_timeout_ms=REBALANCE_MS, topic_partitions=(), **extra
    )


BASES: list[Any] = [
    join(GROUP, "A", "foo"),
    join(GROUP, "N", subscribed_topic_regex="fo.*", server_assignor="range"),
    ConsumerGroupHeartbeatRequest(GROUP, "A", 2, topic_partitions=(tp("foo", 0, 1),)),
    ConsumerGroupHeartbeatRequest(GROUP, "B", 2, instance_id="i-b", topic_partitions=()),
    ConsumerGroupHeartbeatRequest(GROUP, "A", -1),
    ConsumerGroupHeartbeatRequest(GROUP, "B", -2, instance_id="i-b"),
    ConsumerGroupDescribeRequest((GROUP, OTHER)),
    OffsetCommitRequest(GROUP, (OffsetCommitPartition("foo", 0, 10),), 2, "A", version=9),
    OffsetCommitRequest(GROUP, (OffsetCommitPartition("foo", 0, 10, "m", 3),), -1, "", version=9),
    OffsetFetchRequest(GROUP, (("foo", 0),), True, "A", 2),
    OffsetFetchRequest(GROUP, None, False, None, -1),
    AssignmentWatchRequest(GROUP, "A", 1, 1_000),
    AssignmentWatchRequest(GROUP, "B", 1, 0),
]


def encodable(records: list[Any]) -> None:
    """The log can write the records and reads back the same."""
    if records:
        assert decode_records(encode_payload(records)) == records


def event(value: str) -> None:
    """Statistics for `--hypothesis-show-statistics` (what the requests met), inside a Hypothesis test."""
    with contextlib.suppress(InvalidArgument):
        hypothesis_event(value)


def check_hostile_request(d: Driver, other_epoch: int, request: Any) -> None:
    try:
        validate_request(request)
    except InvalidRequestError as refused:
        event("refused where it enters")
        message = str(refused)
        assert message and "\n" not in message and len(message) < 400, message
        return
    before_log, before = len(d.log), copy.deepcopy(state(d.shard.consumer_groups))
    token = object()
    result = d.shard.handle(request, d.now, token)  # never raises
    own = [response for answered, response in result.responses if answered is token]
    # Only a watch may park, and only parked watches may be answered with it.
    assert all(type(r) is AssignmentWatchResponse for t, r in result.responses if t is not token)
    if not own and type(request) is AssignmentWatchRequest:
        event("AssignmentWatchRequest: parked")
        own = [AssignmentWatchResponse(Errors.NONE)]
    assert len(own) == 1
    response = own[0]
    assert type(response) is RESPONSE_TYPES[type(request)]
    d.absorb_records(result.records)
    event(f"{type(request).__name__}: {getattr(response, 'error', 'answered')}")
    if type(response) is ConsumerGroupHeartbeatResponse and response.error is not Errors.NONE:
        assert len(d.log) == before_log, f"a refused heartbeat wrote {result.records}"
        assert state(d.shard.consumer_groups) == before
        assert response.error is not Errors.INVALID_REQUEST or response.error_message
    encodable(result.records)
    # The other group is served as before.
    served = d.ok(ConsumerGroupHeartbeatRequest(OTHER, "C", other_epoch, topic_partitions=None))
    assert served.member_epoch == other_epoch


@given(data=st.data())
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_garbage_is_refused_or_answered_never_raised(data: st.DataObject) -> None:
    d, other_epoch = driver()
    for _ in range(data.draw(st.integers(1, 4), label="requests")):
        base = data.draw(st.sampled_from(BASES), label="base")
        check_hostile_request(d, other_epoch, data.draw(hostile(base), label="request"))
    d.assert_replay_equals_live()


@given(data=st.data())
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_well_typed_nonsense_is_answered_never_raised(data: st.DataObject) -> None:
    """Values of the right types that make no sense (negative or duplicate partitions, unknown
    topic ids, epochs out of range, odd versions): they reach the shard, which answers; with
    assignment batching (KIP-1263) on or off, and time passing between requests."""
    d, other_epoch = driver(data.draw(st.sampled_from([0, 1_000]), label="assignment interval"))
    for _ in range(data.draw(st.integers(1, 6), label="requests")):
        d.advance(data.draw(st.sampled_from([0, 0, 400, 1_000]), label="ms"))
        base = data.draw(st.sampled_from(BASES), label="base")
        check_hostile_request(d, other_epoch, data.draw(hostile(base, with_junk=False), label="request"))
    d.assert_replay_equals_live()


@given(request=junk)
@settings(max_examples=200, deadline=None)
def test_anything_that_is_not_a_request_is_refused(request: object) -> None:
    d, other_epoch = driver()
    try:
        validate_request(request)
    except InvalidRequestError as refused:
        assert str(refused).startswith("not a group protocol request: ")
    else:
        raise AssertionError(f"accepted {type(request).__name__}")
    check_hostile_request(d, other_epoch, ConsumerGroupDescribeRequest((GROUP,)))


# ---------------------------------------------------------------- bounds a hostile member meets

# 6,400 bytes whose RE2 program is huge: 6.9 s of CPU to compile with RE2's default memory budget.
SLOW_TO_COMPILE = "[a-z0-9-]{1,200}" * 400


def test_strings_the_wire_could_not_carry_are_refused() -> None:
    d, other_epoch = driver()
    cases = {
        "SubscribedTopicRegex": {"subscribed_topic_names": None, "subscribed_topic_regex": "a" * 32_768},
        "MemberId": {"member_id": "m" * 32_768},
        "InstanceId": {"instance_id": "é" * 16_384},
        "A SubscribedTopicNames entry": {"subscribed_topic_names": ("foo", "t" * 40_000)},
        "ClientId": {"client_id": "c" * 50_000},
    }
    for name, changes in cases.items():
        request = forged(ConsumerGroupHeartbeatRequest, {**vars_of(join(GROUP, "Z", "foo")), **changes})
        validate_request(request)
        response = d.refused(request, Errors.INVALID_REQUEST)
        assert response.error_message == f"{name} is longer than 32767 bytes."
    # At the limit, accepted.
    d.ok(join(GROUP, "m" * 32_767, subscribed_topic_names=None, subscribed_topic_regex="f" * 32_767))
    check_hostile_request(d, other_epoch, ConsumerGroupDescribeRequest((GROUP,)))


def test_a_subscription_of_more_names_than_the_bound_is_refused() -> None:
    d, other_epoch = driver()
    names = tuple(f"t{i}" for i in range(MAX_SUBSCRIBED_TOPIC_NAMES + 1))
    response = d.refused(join(GROUP, "Z", *names), Errors.INVALID_REQUEST)
    bound = MAX_SUBSCRIBED_TOPIC_NAMES
    expected = f"SubscribedTopicNames has {bound + 1} topics, more than {bound}: subscribe by regex."
    assert response.error_message == expected
    d.ok(join(GROUP, "Z", *names[:-1]))  # at the bound, accepted
    check_hostile_request(d, other_epoch, ConsumerGroupDescribeRequest((GROUP,)))


def vars_of(request: Any) -> dict[str, Any]:
    return {f.name: getattr(request, f.name) for f in fields(request)}


def test_a_regex_too_costly_to_compile_is_refused_quickly() -> None:
    d, other_epoch = driver()
    reasons = {
        SLOW_TO_COMPILE: "pattern too large - compile failed.",
        "\\pL" * 10_000: "pattern too large - compile failed.",
        ".{0,30}" * 4_000: "pattern too large - compile failed.",
        "((a{100}){100}){100}": "invalid repetition size: {100}.",
    }
    for pattern, reason in reasons.items():
        response = d.refused(
            join(GROUP, "R", subscribed_topic_names=None, subscribed_topic_regex=pattern),
            Errors.INVALID_REGULAR_EXPRESSION,
        )
        assert (response.error_message or "").endswith(f"is not a valid regular expression: {reason}")
    check_hostile_request(d, other_epoch, ConsumerGroupDescribeRequest((GROUP,)))


def test_a_stored_regex_that_no_longer_compiles_matches_nothing() -> None:
    """Written before the memory budget (or by another version): a topic change must not break the shard."""
    from coordinator.consumer import records as helpers
    from coordinator.consumer.group import ResolvedRegularExpression

    d, other_epoch = driver()
    stored = helpers.regular_expression_record(
        GROUP, SLOW_TO_COMPILE, ResolvedRegularExpression(frozenset({"foo"}), 1, d.now)
    )
    d.shard.replay(stored)
    d.log.append(stored)
    d.topics({**TOPICS, "new": 1})
    assert d.shard.consumer_groups[GROUP].resolved_regular_expressions[SLOW_TO_COMPILE].topics == frozenset()
    d.assert_replay_equals_live()
    check_hostile_request(d, other_epoch, ConsumerGroupDescribeRequest((GROUP,)))
