"""ConsumerProtocol bytes: round trips, Java's version rules, kafka-python byte equivalence, bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    group_by_topic_in_order,
)
from coordinator.topic_partition import TopicPartition as TP

topics_st = st.text(alphabet="abcxyz._-0123", min_size=1, max_size=8)
partition_st = st.integers(min_value=0, max_value=(1 << 31) - 1)
tps_st = st.lists(st.builds(TP, topics_st, partition_st), max_size=8)
user_data_st = st.one_of(st.none(), st.binary(max_size=20))


@st.composite
def subscriptions(draw: st.DrawFn) -> Subscription:
    return Subscription(
        topics=tuple(sorted(set(draw(st.lists(topics_st, max_size=6))))),
        user_data=draw(user_data_st),
        owned_partitions=tuple(sorted(set(draw(tps_st)))),
        generation_id=draw(st.integers(min_value=-1, max_value=(1 << 31) - 1)),
        rack_id=draw(st.one_of(st.none(), topics_st)),
    )


def _kp_subscription(sub: Subscription, version: int) -> bytes:
    owned = [
        ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
        for t, ps in group_by_topic_in_order(sub.owned_partitions)
    ]
    kp = ConsumerProtocolSubscription(
        version=version,
        topics=list(sub.topics),
        user_data=sub.user_data,
        owned_partitions=owned,
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    result: bytes = kp.encode(version=version)
    return result


def _kp_assignment(assignment: Assignment, version: int) -> bytes:
    groups = [
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
        for t, ps in group_by_topic_in_order(assignment.partitions)
    ]
    kp = ConsumerProtocolAssignment(
        version=version, assigned_partitions=groups, user_data=assignment.user_data
    )
    result: bytes = kp.encode(version=version)
    return result


@settings(max_examples=150, deadline=None)
@given(subscriptions(), st.integers(min_value=0, max_value=3))
def test_subscription_bytes_equal_kafka_python_and_round_trip(sub: Subscription, version: int) -> None:
    data = encode_subscription(sub, version)
    assert data == _kp_subscription(sub, version)
    decoded = decode_subscription(data)
    assert decoded.topics == sub.topics
    assert decoded.user_data == sub.user_data
    assert decoded.owned_partitions == (sub.owned_partitions if version >= 1 else ())
    assert decoded.generation_id == (sub.generation_id if version >= 2 else -1)
    assert decoded.rack_id == (sub.rack_id if version >= 3 else None)
    assert encode_subscription(decoded, version) == data


@settings(max_examples=150, deadline=None)
@given(tps_st, user_data_st, st.integers(min_value=0, max_value=3))
def test_assignment_bytes_equal_kafka_python_and_round_trip(
    tps: list[TP], user_data: bytes | None, version: int
) -> None:
    assignment = Assignment(tuple(tps), user_data)
    data = encode_assignment(assignment, version)
    assert data == _kp_assignment(assignment, version)
    decoded = decode_assignment(data)
    # Grouping by topic is the one change a round trip makes, as in Java.
    assert decoded.partitions == tuple(TP(t, p) for t, ps in group_by_topic_in_order(tps) for p in ps)
    assert decoded.user_data == user_data


def test_subscription_v3_exact_bytes() -> None:
    sub = Subscription(("b", "a"), None, (TP("a", 2), TP("a", 0)), 7, "r")
    assert encode_subscription(sub).hex() == (
        "0003"  # version
        "00000002"
        "000161"
        "000162"  # topics, sorted as Java does
        "ffffffff"  # null user data
        "00000001"
        "000161"
        "00000002"
        "00000000"
        "00000002"  # owned, sorted and grouped
        "00000007"  # generation id
        "000172"  # rack id
    )


def test_encoding_sorts_like_java_and_groups_owned_partitions() -> None:
    sub = Subscription(("t2", "t1"), b"", (TP("t2", 1), TP("t1", 3), TP("t2", 0), TP("t1", 1)))
    decoded = decode_subscription(encode_subscription(sub))
    assert decoded.topics == ("t1", "t2")
    assert decoded.owned_partitions == (TP("t1", 1), TP("t1", 3), TP("t2", 0), TP("t2", 1))
    assert decoded.user_data == b""


def test_assignment_groups_by_first_appearance_keeping_order() -> None:
    a = Assignment((TP("b", 2), TP("a", 1), TP("b", 0)))
    assert decode_assignment(encode_assignment(a)).partitions == (TP("b", 2), TP("b", 0), TP("a", 1))


def test_lower_versions_drop_newer_fields() -> None:
    sub = Subscription(("t",), b"u", (TP("t", 0),), 5, "rack")
    assert decode_subscription(encode_subscription(sub, 0)) == Subscription(("t",), b"u")
    assert decode_subscription(encode_subscription(sub, 1)) == Subscription(("t",), b"u", (TP("t", 0),))
    assert decode_subscription(encode_subscription(sub, 2)) == Subscription(("t",), b"u", (TP("t", 0),), 5)


def test_newer_versions_are_read_as_v3_and_written_as_v3() -> None:
    sub = Subscription(("t",), None, (TP("t", 1),), 3, None)
    v3 = encode_subscription(sub)
    future = struct.pack(">h", 9) + v3[2:] + b"\x00\x00\x00\x2a" + b"more fields"
    assert decode_subscription(future) == sub
    assert encode_subscription(sub, 9) == v3
    a = Assignment((TP("t", 0),), b"x")
    assert decode_assignment(struct.pack(">h", 4) + encode_assignment(a)[2:] + b"\xff") == a
    assert encode_assignment(a, 7) == encode_assignment(a, 3)


def test_empty_rack_id_is_kept_on_the_wire() -> None:
    assert decode_subscription(encode_subscription(Subscription(("t",), rack_id=""))).rack_id == ""


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "version"),
        (b"\x00", "version"),
        (b"\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff", "unsupported subscription version -1"),
        (b"\x00\x00\xff\xff\xff\xff", "topics"),
        (b"\x00\x00\x7f\xff\xff\xff", "topics"),
        (b"\x00\x00\x00\x00\x00\x01\xff\xff", "non-nullable string is null"),
        (b"\x00\x00\x00\x00\x00\x01\x00\x05ab", "needs 5 bytes"),
        (b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe\xff\xff\xff\xff", "invalid UTF-8"),
        (b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xfe", "invalid bytes length -2"),
        (b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x09abc", "needs 9 bytes"),
        (b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff", "owned_partitions"),
        (b"\x00\x02\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00", "generation_id"),
        (b"\x00\x03\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff\x00", "rack_id"),
    ],
)
def test_malformed_subscription_raises_value_error(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_subscription(data)


def test_every_truncation_of_valid_bytes_raises_value_error() -> None:
    sub_bytes = encode_subscription(Subscription(("t1", "t2"), b"ud", (TP("t1", 0), TP("t2", 4)), 9, "r1"))
    asg_bytes = encode_assignment(Assignment((TP("t1", 0), TP("t2", 4)), b"ud"))
    for cut in range(len(sub_bytes)):
        with pytest.raises(ValueError):
            decode_subscription(sub_bytes[:cut])
    for cut in range(len(asg_bytes)):
        with pytest.raises(ValueError):
            decode_assignment(asg_bytes[:cut])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_value_error_only(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(data)
        except ValueError:
            pass


def test_encoding_rejects_values_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_assignment(Assignment((TP("t", 1 << 31),)))
    with pytest.raises(ValueError, match="longer than"):
        encode_subscription(Subscription(("x" * 40000,)))
    with pytest.raises(ValueError, match="unsupported subscription version"):
        encode_subscription(Subscription(("t",)), -1)
