"""StickyAssignor: Kafka's own expectations (AbstractStickyAssignorTest, Javadoc) and its user data.

The expected lists are Java's, element order included, from Kafka's
`AbstractStickyAssignorTest` (run there for the eager StickyAssignor), with the
members put into the map in the same order as the Java test does.
"""

from __future__ import annotations

import pytest
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData

from coordinator.assignors import StickyAssignor
from coordinator.assignors.base import GroupInput
from coordinator.assignors.sticky import sticky_assign
from coordinator.assignors.sticky_common import (
    MemberData,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from coordinator.consumer_protocol import KafkaWriter, write_topic_partitions
from coordinator.topic_partition import TopicPartition as TP

from tests.assignors.sticky_helpers import as_sets, fresh, owning, tps

STICKY = StickyAssignor()
GEN = 1


def own(topics: tuple[str, ...], owned: str, generation: int = GEN) -> object:
    return owning("sticky", topics, tps(owned), generation)


def transferring(members: dict, counts: dict) -> dict | None:
    return sticky_assign(GroupInput.build(members, counts), STICKY.member_data)[1]


def test_one_consumer_cases() -> None:
    assert STICKY.assign({"consumer": fresh()}, {}) == {"consumer": []}
    assert STICKY.assign({"consumer": fresh("topic")}, {"topic": 3}) == {
        "consumer": tps("topic-0 topic-1 topic-2")
    }
    owned_other = {"consumer": own(("topic",), "topic-0 topic-1 other-0 other-1")}
    assert STICKY.assign(owned_other, {"topic": 2}) == {"consumer": tps("topic-0 topic-1")}
    multi = {"consumer": fresh("topic1", "topic2")}
    assert STICKY.assign(multi, {"topic1": 1, "topic2": 2}) == {"consumer": tps("topic1-0 topic2-0 topic2-1")}


def test_two_consumers_fresh() -> None:
    members = {"consumer1": fresh("topic"), "consumer2": fresh("topic")}
    assert STICKY.assign(members, {"topic": 2}) == {"consumer1": tps("topic-0"), "consumer2": tps("topic-1")}
    six = {"consumer1": fresh("topic1", "topic2"), "consumer2": fresh("topic1", "topic2")}
    assert STICKY.assign(six, {"topic1": 3, "topic2": 3}) == {
        "consumer1": tps("topic1-0 topic1-2 topic2-1"),
        "consumer2": tps("topic1-1 topic2-0 topic2-2"),
    }


def test_multiple_consumers_mixed_topic_subscriptions() -> None:
    members = {
        "consumer1": fresh("topic1"),
        "consumer2": fresh("topic1", "topic2"),
        "consumer3": fresh("topic1"),
    }
    counts = {"topic1": 3, "topic2": 2}
    assert STICKY.assign(members, counts) == {
        "consumer1": tps("topic1-0 topic1-2"),
        "consumer2": tps("topic2-0 topic2-1"),
        "consumer3": tps("topic1-1"),
    }
    assert transferring(members, counts) is None


def test_consumer_owning_min_quota_expected_max_quota() -> None:
    topics = ("topic1", "topic2")
    members = {"consumer1": own(topics, "topic1-0 topic2-1"), "consumer2": own(topics, "topic1-1 topic2-2")}
    counts = {"topic1": 2, "topic2": 3}
    assert STICKY.assign(members, counts) == {
        "consumer1": tps("topic1-0 topic2-1 topic2-0"),
        "consumer2": tps("topic1-1 topic2-2"),
    }
    assert transferring(members, counts) == {}


def test_max_quota_consumers_more_than_expected() -> None:
    topics = ("topic1", "topic2")
    members = {
        "consumer1": own(topics, "topic1-0 topic2-0"),
        "consumer2": own(topics, "topic1-1 topic2-1"),
        "consumer3": own(topics, ""),
    }
    counts = {"topic1": 2, "topic2": 2}
    assert STICKY.assign(members, counts) == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1 topic2-1"),
        "consumer3": tps("topic2-0"),
    }
    assert transferring(members, counts) == {TP("topic2", 0): "consumer3"}


def test_all_consumers_under_min_quota() -> None:
    topics = ("topic1", "topic2")
    members = {
        "consumer1": own(topics, "topic1-0"),
        "consumer2": own(topics, "topic1-1"),
        "consumer3": own(topics, ""),
    }
    assert STICKY.assign(members, {"topic1": 2, "topic2": 3}) == {
        "consumer1": tps("topic1-0 topic2-1"),
        "consumer2": tps("topic1-1 topic2-2"),
        "consumer3": tps("topic2-0"),
    }


def test_add_remove_consumer_one_topic() -> None:
    counts = {"topic": 3}
    first = STICKY.assign({"consumer1": fresh("topic")}, counts)
    assert first == {"consumer1": tps("topic-0 topic-1 topic-2")}
    members = {"consumer1": own(("topic",), "topic-0 topic-1 topic-2"), "consumer2": own(("topic",), "")}
    second = STICKY.assign(members, counts)
    assert second == {"consumer1": tps("topic-0 topic-1"), "consumer2": tps("topic-2")}
    assert transferring(members, counts) == {TP("topic", 2): "consumer2"}
    third = STICKY.assign({"consumer2": own(("topic",), "topic-2")}, counts)
    assert set(third["consumer2"]) == set(tps("topic-0 topic-1 topic-2"))


def test_add_remove_two_consumers_two_topics() -> None:
    topics = ("topic1", "topic2")
    counts = {"topic1": 3, "topic2": 4}
    first = STICKY.assign({"consumer1": fresh(*topics), "consumer2": fresh(*topics)}, counts)
    assert first == {
        "consumer1": tps("topic1-0 topic1-2 topic2-1 topic2-3"),
        "consumer2": tps("topic1-1 topic2-0 topic2-2"),
    }
    members = {
        "consumer1": owning("sticky", topics, first["consumer1"], GEN),
        "consumer2": owning("sticky", topics, first["consumer2"], GEN),
        "consumer3": own(topics, ""),
        "consumer4": own(topics, ""),
    }
    # Owned partitions are kept in (partition, topic) order, which keeps each topic balanced.
    second = STICKY.assign(members, counts)
    assert second == {
        "consumer1": tps("topic1-0 topic2-1"),
        "consumer2": tps("topic2-0 topic1-1"),
        "consumer3": tps("topic1-2 topic2-3"),
        "consumer4": tps("topic2-2"),
    }
    assert transferring(members, counts) == {
        TP("topic1", 2): "consumer3",
        TP("topic2", 3): "consumer3",
        TP("topic2", 2): "consumer4",
    }
    third = STICKY.assign(
        {
            "consumer3": owning("sticky", topics, second["consumer3"], GEN),
            "consumer4": owning("sticky", topics, second["consumer4"], GEN),
        },
        counts,
    )
    assert third == {
        "consumer3": tps("topic1-2 topic2-3 topic1-0 topic2-1"),
        "consumer4": tps("topic2-2 topic1-1 topic2-0"),
    }


def test_topic_balance_after_reassignment() -> None:
    topics = ("topic1", "topic2")
    counts = {"topic1": 12, "topic2": 12}
    rounds = [["consumer1"], ["consumer1", "consumer2"], ["consumer1", "consumer2", "consumer3", "consumer4"]]
    rounds.append(["consumer3", "consumer4"])
    assignment: dict[str, list[TP]] = {}
    for members in rounds:
        group = {m: owning("sticky", topics, assignment.get(m, []), GEN) for m in members}
        assignment = STICKY.assign(group, counts)
        per_topic = 12 // len(members)
        for partitions in assignment.values():
            assert sorted(tp.topic for tp in partitions) == ["topic1"] * per_topic + ["topic2"] * per_topic


def test_all_consumers_reach_expected_quota() -> None:
    members = {
        "consumer1": own(("topic",), "topic-0 topic-1"),
        "consumer2": own(("topic",), "topic-2"),
        "consumer3": own(("topic",), ""),
    }
    assert STICKY.assign(members, {"topic": 4}) == {
        "consumer1": tps("topic-0 topic-1"),
        "consumer2": tps("topic-2"),
        "consumer3": tps("topic-3"),
    }


@pytest.mark.parametrize("stale_generation", [9, -1], ids=["stale", "none"])
def test_owned_partitions_invalidated_for_stale_or_no_generation(stale_generation: int) -> None:
    topics = ("topic", "topic2")
    claim = "topic-0 topic-2 topic2-1"
    members = {"consumer1": own(topics, claim, 10), "consumer2": own(topics, claim, stale_generation)}
    assert as_sets(STICKY.assign(members, {"topic": 3, "topic2": 3})) == {
        "consumer1": set(tps(claim)),
        "consumer2": set(tps("topic-1 topic2-0 topic2-2")),
    }


def test_partition_claimed_by_several_in_same_generation_moves() -> None:
    members = {
        "consumer1": own(("topic",), "topic-0 topic-1"),
        "consumer2": own(("topic",), "topic-0 topic-2"),
        "consumer3": own(("topic",), ""),
    }
    assert STICKY.assign(members, {"topic": 3}) == {
        "consumer1": tps("topic-1"),
        "consumer2": tps("topic-2"),
        "consumer3": tps("topic-0"),
    }
    assert transferring(members, {"topic": 3}) == {TP("topic", 0): "consumer3"}


def test_partitions_go_to_the_highest_generation() -> None:
    topics = ("topic", "topic2", "topic3")
    members = {
        "consumer1": own(topics, "topic-0 topic2-0 topic3-0", 10),
        "consumer2": own(topics, "topic-1 topic2-1 topic3-1", 9),
        "consumer3": own(topics, "topic2-1 topic3-0 topic3-2", 8),
    }
    assert as_sets(STICKY.assign(members, {t: 3 for t in topics})) == {
        "consumer1": set(tps("topic-0 topic2-0 topic3-0")),
        "consumer2": set(tps("topic-1 topic2-1 topic3-1")),
        "consumer3": set(tps("topic-2 topic2-2 topic3-2")),
    }


def test_no_reassignment_on_current_members() -> None:
    topics = ("topic", "topic2", "topic3", "topic1")
    members = {
        "consumer1": own(topics, "", -1),
        "consumer2": own(topics, "topic-0 topic2-0 topic1-0", 9),
        "consumer3": own(topics, "topic3-2 topic2-2 topic1-1", 8),
        "consumer4": own(topics, "topic3-1 topic-1 topic-2", 7),
    }
    result = STICKY.assign(members, {t: 3 for t in topics})
    assert set(result["consumer1"]) == set(tps("topic1-2 topic2-1 topic3-0"))


def test_owned_partitions_invalidated_for_multiple_generations() -> None:
    topics = ("topic", "topic2")
    members = {
        "consumer1": own(topics, "topic-0 topic2-1 topic-1", 10),
        "consumer2": own(topics, "topic-0 topic2-1 topic2-2", 8),
    }
    assert as_sets(STICKY.assign(members, {"topic": 3, "topic2": 3})) == {
        "consumer1": set(tps("topic-0 topic2-1 topic-1")),
        "consumer2": set(tps("topic-2 topic2-2 topic2-0")),
    }


def _sorted_strings(assignment: dict[str, list[TP]]) -> list[str]:
    return [", ".join(sorted(str(tp) for tp in tps_)) for tps_ in assignment.values()]


def test_non_rack_aware_results_of_javas_rack_tests() -> None:
    counts = {"t1": 6, "t2": 7, "t3": 2}
    uniform = {f"consumer{i}": fresh("t1", "t2", "t3") for i in range(3)}
    assert _sorted_strings(STICKY.assign(uniform, counts)) == [
        "t1-0, t1-3, t2-0, t2-3, t2-6",
        "t1-1, t1-4, t2-1, t2-4, t3-0",
        "t1-2, t1-5, t2-2, t2-5, t3-1",
    ]
    mixed = {
        "consumer0": fresh("t1", "t2", "t3"),
        "consumer1": fresh("t1", "t2", "t3"),
        "consumer2": fresh("t1", "t3"),
    }
    expected = [
        "t1-5, t2-0, t2-2, t2-4, t2-6",
        "t1-3, t2-1, t2-3, t2-5, t3-0",
        "t1-0, t1-1, t1-2, t1-4, t3-1",
    ]
    first = STICKY.assign(mixed, counts)
    assert _sorted_strings(first) == expected
    # Owning the expected assignment already changes nothing (Java's second verification).
    again = {m: owning("sticky", mixed[m].topics, first[m], -1) for m in mixed}
    assert _sorted_strings(STICKY.assign(again, counts)) == expected


def test_javadoc_example_1() -> None:
    topics = ("t0", "t1", "t2", "t3")
    counts = {t: 2 for t in topics}
    first = STICKY.assign({c: fresh(*topics) for c in ("C0", "C1", "C2")}, counts)
    assert first == {"C0": tps("t0-0 t1-1 t3-0"), "C1": tps("t0-1 t2-0 t3-1"), "C2": tps("t1-0 t2-1")}
    # C1 leaves. The Javadoc shows C0 [t0p0 t1p1 t3p0 t2p0], C2 [t1p0 t2p1 t0p1 t3p1], the result of the
    # pre-2.8 algorithm; the constrained algorithm (KAFKA-9987) deals the three free partitions round
    # robin instead. Both keep all five owned partitions, which is the point of the example.
    second = STICKY.assign({c: owning("sticky", topics, first[c], GEN) for c in ("C0", "C2")}, counts)
    assert second == {"C0": tps("t0-0 t3-0 t1-1 t0-1"), "C2": tps("t1-0 t2-1 t2-0 t3-1")}


def test_javadoc_example_2() -> None:
    counts = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": ("t0",), "C1": ("t0", "t1"), "C2": ("t0", "t1", "t2")}
    first = STICKY.assign({c: fresh(*t) for c, t in subs.items()}, counts)
    assert first == {"C0": tps("t0-0"), "C1": tps("t1-0 t1-1"), "C2": tps("t2-0 t2-1 t2-2")}
    second = STICKY.assign({c: owning("sticky", subs[c], first[c], GEN) for c in ("C1", "C2")}, counts)
    assert second == {"C1": tps("t1-0 t1-1 t0-0"), "C2": tps("t2-0 t2-1 t2-2")}


def test_user_data_layout_matches_kafka_python_v1() -> None:
    data = encode_sticky_user_data(tps("t-0 t-1"), 5)
    assert data == StickyAssignorUserData([("t", [0, 1])], 5).encode(version=1, header=False)
    assert decode_sticky_user_data(data) == MemberData(tps("t-0 t-1"), 5)


def test_user_data_groups_topics_in_java_hashmap_order() -> None:
    # "c" (bucket 3) before "ba" (bucket 15), whatever the list order.
    data = encode_sticky_user_data(tps("ba-1 c-0 ba-0"), 2)
    assert decode_sticky_user_data(data) == MemberData(tps("c-0 ba-1 ba-0"), 2)


def test_user_data_v0_and_garbage() -> None:
    writer = KafkaWriter()
    write_topic_partitions(writer, [("t", [3])])
    assert decode_sticky_user_data(writer.getvalue()) == MemberData(tps("t-3"), None)
    assert decode_sticky_user_data(b"\x01\x02\x03") == MemberData([], -1)
    assert decode_sticky_user_data(b"") == MemberData([], None)
    assert decode_sticky_user_data(None) == MemberData([], None)
    assert STICKY.subscription_user_data(None, 3) is None


def test_java_quirk_leading_empty_subscription_counts_as_equal() -> None:
    # Java's allSubscriptionsEqual takes its reference set from the first member in HashMap order
    # that has topics, so an empty subscription iterated first ("a" sits in bucket 1, "b" in 2)
    # leaves the group "equal" and the constrained algorithm gives that member partitions of a
    # topic it never subscribed to. Kept, since results must be Java's.
    assert STICKY.assign({"b": fresh("t"), "a": fresh()}, {"t": 2}) == {"b": tps("t-1"), "a": tps("t-0")}
    # Iterated after a member with topics ("c" is in bucket 3), it makes the group unequal: nothing.
    assert STICKY.assign({"b": fresh("t"), "c": fresh()}, {"t": 2}) == {"b": tps("t-0 t-1"), "c": []}
