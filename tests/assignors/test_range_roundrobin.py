"""RangeAssignor and RoundRobinAssignor: Java's documented examples, member ordering, kafka-python parity."""

from __future__ import annotations

import random

import pytest

from coordinator.assignors import ASSIGNORS, MemberSubscription, RangeAssignor, RoundRobinAssignor
from coordinator.topic_partition import TopicPartition as TP

from tests.assignors.reference import kafka_python_assign


def tps(spec: str) -> list[TP]:
    """'t0-0 t1-2' -> [TP('t0', 0), TP('t1', 2)]"""
    out = []
    for item in spec.split():
        topic, partition = item.rsplit("-", 1)
        out.append(TP(topic, int(partition)))
    return out


def sub(*topics: str, instance: str | None = None) -> MemberSubscription:
    return MemberSubscription(tuple(topics), group_instance_id=instance)


def test_range_javadoc_example() -> None:
    members = {"C0": sub("t0", "t1"), "C1": sub("t0", "t1")}
    result = RangeAssignor().assign(members, {"t0": 3, "t1": 3})
    assert result == {"C0": tps("t0-0 t0-1 t1-0 t1-1"), "C1": tps("t0-2 t1-2")}


def test_range_javadoc_static_membership_example() -> None:
    # After a rolling bounce C0 -> C3 and C1 -> C2; instance ids I0/I1 keep the assignment.
    members = {"C3": sub("t0", "t1", instance="I0"), "C2": sub("t0", "t1", instance="I1")}
    result = RangeAssignor().assign(members, {"t0": 3, "t1": 3})
    assert result == {"C3": tps("t0-0 t0-1 t1-0 t1-1"), "C2": tps("t0-2 t1-2")}
    dynamic = {"C3": sub("t0", "t1"), "C2": sub("t0", "t1")}
    assert RangeAssignor().assign(dynamic, {"t0": 3, "t1": 3})["C2"] == tps("t0-0 t0-1 t1-0 t1-1")


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor()], ids=lambda a: a.name)
def test_static_members_order_first_by_instance_id(assignor: RangeAssignor | RoundRobinAssignor) -> None:
    # stack-notes: a(dynamic), b(static), c(dynamic), one topic of 6 partitions.
    members = {"a": sub("t"), "b": sub("t", instance="b-instance"), "c": sub("t")}
    result = assignor.assign(members, {"t": 6})
    if assignor.name == "range":
        assert result == {"a": tps("t-2 t-3"), "b": tps("t-0 t-1"), "c": tps("t-4 t-5")}
    else:
        assert result == {"a": tps("t-1 t-4"), "b": tps("t-0 t-3"), "c": tps("t-2 t-5")}


def test_roundrobin_javadoc_examples() -> None:
    same = {"C0": sub("t0", "t1"), "C1": sub("t0", "t1")}
    assert RoundRobinAssignor().assign(same, {"t0": 3, "t1": 3}) == {
        "C0": tps("t0-0 t0-2 t1-1"),
        "C1": tps("t0-1 t1-0 t1-2"),
    }
    mixed = {"C0": sub("t0"), "C1": sub("t0", "t1"), "C2": sub("t0", "t1", "t2")}
    assert RoundRobinAssignor().assign(mixed, {"t0": 1, "t1": 2, "t2": 3}) == {
        "C0": tps("t0-0"),
        "C1": tps("t1-0"),
        "C2": tps("t1-1 t2-0 t2-1 t2-2"),
    }


def test_topics_without_partitions_or_subscribers_are_skipped() -> None:
    members = {"m1": sub("known", "unknown"), "m2": sub("known")}
    counts = {"known": 2, "unknown": 0, "nobody": 5}
    for name in ("range", "roundrobin"):
        result = ASSIGNORS[name].assign(members, counts)
        assert sorted(p for ps in result.values() for p in ps) == tps("known-0 known-1")


def test_member_lists_follow_javas_topic_order() -> None:
    # Java walks its partitionsPerTopic HashMap: "c" (hash 99, bucket 3) before "ba" (hash 3135, bucket 15).
    result = RangeAssignor().assign({"m": sub("ba", "c")}, {"ba": 1, "c": 1})
    assert result["m"] == tps("c-0 ba-0")


def test_empty_group_gets_nothing() -> None:
    assert RangeAssignor().assign({}, {"t": 3}) == {}


def _random_group(rng: random.Random, same_subscriptions: bool) -> tuple[dict[str, MemberSubscription], dict]:
    topics = [f"topic{i}" for i in range(rng.randrange(1, 6))]
    counts = {t: rng.randrange(0, 9) for t in topics}
    member_ids = rng.sample([f"member-{i:02d}" for i in range(40)], rng.randrange(1, 9))
    static = rng.sample(member_ids, rng.randrange(0, len(member_ids) + 1))
    shared = rng.sample(topics, rng.randrange(1, len(topics) + 1))
    members: dict[str, MemberSubscription] = {}
    # kafka-python needs static members presented first (stack-notes), Java does not care.
    for member_id in sorted(member_ids, key=lambda m: m not in static):
        chosen = shared if same_subscriptions else rng.sample(topics, rng.randrange(1, len(topics) + 1))
        instance = f"instance-{rng.randrange(1000):03d}-{member_id}" if member_id in static else None
        members[member_id] = MemberSubscription(tuple(chosen), group_instance_id=instance)
    return members, counts


@pytest.mark.parametrize("name, same_subscriptions", [("range", False), ("roundrobin", True)])
def test_matches_kafka_python_where_it_follows_java(name: str, same_subscriptions: bool) -> None:
    rng = random.Random(f"{name}-differential")
    for case in range(300):
        members, counts = _random_group(rng, same_subscriptions)
        ours = {m: set(ps) for m, ps in ASSIGNORS[name].assign(members, counts).items()}
        theirs = kafka_python_assign(name, members, counts)
        assert ours == {m: theirs.get(m, set()) for m in members}, f"case {case}: {members} {counts}"


def test_kafka_python_range_drops_interleaved_members_where_java_does_not() -> None:
    # The stack-notes defect, pinned so a kafka-python upgrade that fixes it is noticed.
    members = {"a": sub("t"), "b": sub("t", instance="b-instance"), "c": sub("t")}
    assert kafka_python_assign("range", members, {"t": 6})["a"] == set()
    assert RangeAssignor().assign(members, {"t": 6})["a"] == tps("t-2 t-3")
