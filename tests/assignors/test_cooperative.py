"""CooperativeStickyAssignor (KIP-429): member data, withheld partitions, Kafka's own test expectations."""

from __future__ import annotations

from coordinator.assignors import CooperativeStickyAssignor, MemberSubscription
from coordinator.assignors.sticky_common import MemberData, encode_cooperative_user_data
from coordinator.topic_partition import TopicPartition as TP

from tests.assignors.sticky_helpers import fresh, owning, tps

COOP = CooperativeStickyAssignor()
GEN = 1


def own(topics: tuple[str, ...], owned: str, generation: int = GEN) -> MemberSubscription:
    return owning("cooperative-sticky", topics, tps(owned), generation)


def v1(topics: tuple[str, ...], owned: str, user_data_generation: int) -> MemberSubscription:
    """A v1 subscription: owned partitions, no generation field, generation in the user data."""
    return MemberSubscription(
        topics,
        owned_partitions=tuple(tps(owned)),
        user_data=encode_cooperative_user_data(user_data_generation),
    )


def test_protocols_and_user_data() -> None:
    assert COOP.name == "cooperative-sticky"
    assert [p.name for p in COOP.supported_protocols] == ["COOPERATIVE", "EAGER"]
    assert COOP.protocol.name == "COOPERATIVE"
    assert COOP.subscription_user_data(None, -1) == b"\xff\xff\xff\xff"
    assert COOP.subscription_user_data(tps("t-0"), 10) == b"\x00\x00\x00\x0a"


def test_member_data_sources() -> None:
    # Generation from user data when the subscription has none (encode/decode generation tests).
    assert (
        COOP.member_data(MemberSubscription(("t",), user_data=encode_cooperative_user_data(-1))).generation
        == -1
    )
    assert (
        COOP.member_data(MemberSubscription(("t",), user_data=encode_cooperative_user_data(10))).generation
        == 10
    )
    assert COOP.member_data(MemberSubscription(("t",))).generation is None
    assert COOP.member_data(MemberSubscription(("t",), user_data=b"\x01")).generation == -1
    # Inconsistent data: owned partitions from the subscription, generation from the user data.
    inconsistent = MemberSubscription(
        ("t",), owned_partitions=(TP("t", 0),), user_data=encode_cooperative_user_data(1)
    )
    assert COOP.member_data(inconsistent) == MemberData(tps("t-0"), 1)
    # A v2+ generation wins over the user data.
    newer = MemberSubscription(
        ("t",), owned_partitions=(), generation_id=2, user_data=encode_cooperative_user_data(1)
    )
    assert COOP.member_data(newer) == MemberData([], 2)


def test_partition_claimed_by_several_is_withheld() -> None:
    members = {
        "consumer1": own(("topic",), "topic-0 topic-1"),
        "consumer2": own(("topic",), "topic-0 topic-2"),
        "consumer3": own(("topic",), ""),
    }
    assert COOP.assign(members, {"topic": 3}) == {
        "consumer1": tps("topic-1"),
        "consumer2": tps("topic-2"),
        "consumer3": [],
    }
    assert COOP.assign(members, {"topic": 4}) == {
        "consumer1": tps("topic-1 topic-3"),
        "consumer2": tps("topic-2"),
        "consumer3": [],
    }


def test_old_version_subscriptions() -> None:
    members = {
        "consumer1": v1(("topic1",), "topic1-0", GEN),
        "consumer2": v1(("topic1",), "topic1-1", GEN),
        "consumer3": own(("topic1",), ""),
    }
    assert COOP.assign(members, {"topic1": 3}) == {
        "consumer1": tps("topic1-0"),
        "consumer2": tps("topic1-1"),
        "consumer3": tps("topic1-2"),
    }


def test_new_member_gets_moving_partition_in_the_second_round() -> None:
    counts = {"topic": 3}
    first = {"consumer1": own(("topic",), "topic-0 topic-1 topic-2"), "consumer2": own(("topic",), "")}
    round1 = COOP.assign(first, counts)
    assert round1 == {"consumer1": tps("topic-0 topic-1"), "consumer2": []}
    second = {m: owning("cooperative-sticky", ("topic",), round1[m], GEN + 1) for m in round1}
    assert COOP.assign(second, counts) == {"consumer1": tps("topic-0 topic-1"), "consumer2": tps("topic-2")}


def test_general_case_withholds_partitions_that_change_owner() -> None:
    # Different subscriptions: the general algorithm runs and the moving partitions are computed after it.
    counts = {"t1": 4, "t2": 2}
    members = {
        "a": own(("t1", "t2"), "t1-0 t1-1 t1-2 t1-3 t2-0 t2-1"),
        "b": own(("t1",), ""),
    }
    round1 = COOP.assign(members, counts)
    assert round1["b"] == []
    moved = set(tps("t1-0 t1-1 t1-2 t1-3 t2-0 t2-1")) - set(round1["a"])
    assert moved and all(tp.topic == "t1" for tp in moved)
    round2 = COOP.assign(
        {m: owning("cooperative-sticky", members[m].topics, round1[m], GEN + 1) for m in members}, counts
    )
    assert set(round2["b"]) == moved
    assert round2["a"] == round1["a"]


def test_fresh_group_is_the_sticky_result() -> None:
    members = {f"c{i}": fresh("t1", "t2") for i in range(3)}
    assert COOP.assign(members, {"t1": 4, "t2": 3}) == {
        "c0": tps("t1-0 t1-3 t2-2"),
        "c1": tps("t1-1 t2-0"),
        "c2": tps("t1-2 t2-1"),
    }
