"""ConsumerGroup: state, partition epochs, subscriptions, static members (Kafka's ConsumerGroupTest)."""

from __future__ import annotations

from uuid import UUID

import pytest

from coordinator.consumer import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    IllegalGroupState,
    MemberState,
    ResolvedRegularExpression,
    SubscriptionCount,
    SubscriptionType,
)
from coordinator.records import ClassicMemberMetadata, ClassicProtocol

FOO = UUID(int=1)
BAR = UUID(int=2)


def member(member_id: str, epoch: int = 10, **fields: object) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id, member_epoch=epoch, previous_member_epoch=epoch - 1, **fields)  # type: ignore[arg-type]


def test_state_follows_kafkas_rule() -> None:
    group = ConsumerGroup("g")
    assert group.state is ConsumerGroupState.EMPTY and group.is_empty()

    group.update_member(member("m1", epoch=1))
    group.set_group_epoch(1)
    assert group.state is ConsumerGroupState.ASSIGNING

    group.set_target_assignment_epoch(1)
    assert group.state is ConsumerGroupState.STABLE

    group.set_group_epoch(2)
    group.set_target_assignment_epoch(2)
    assert group.state is ConsumerGroupState.RECONCILING, "m1 is still at epoch 1"

    group.update_member(member("m1", epoch=2, state=MemberState.UNRELEASED_PARTITIONS))
    assert group.state is ConsumerGroupState.RECONCILING
    group.update_member(member("m1", epoch=2))
    assert group.state is ConsumerGroupState.STABLE

    group.remove_member("m1")
    assert group.state is ConsumerGroupState.EMPTY


def test_partition_epochs_cover_assigned_and_pending_partitions() -> None:
    group = ConsumerGroup("g")
    group.update_member(member("m1", assigned_partitions={FOO: frozenset({0, 1})},
                               partitions_pending_revocation={BAR: frozenset({0})}))

    assert [group.current_partition_epoch(FOO, p) for p in (0, 1, 2)] == [10, 10, -1]
    assert group.current_partition_epoch(BAR, 0) == 10
    assert group.current_partition_epoch(UUID(int=9), 0) == -1

    group.update_member(member("m1", epoch=11, assigned_partitions={FOO: frozenset({1})}))
    assert group.partition_epochs == {FOO: {1: 11}}

    group.remove_member("m1")
    assert group.partition_epochs == {}


def test_a_partition_owned_at_the_same_or_a_newer_epoch_cannot_be_taken() -> None:
    group = ConsumerGroup("g")
    group.update_member(member("m1", assigned_partitions={FOO: frozenset({0})}))

    with pytest.raises(IllegalGroupState, match="still owned at epoch 10"):
        group.update_member(member("m2", assigned_partitions={FOO: frozenset({0})}))
    with pytest.raises(IllegalGroupState):
        group.update_member(member("m3", epoch=9, assigned_partitions={FOO: frozenset({0})}))


def test_compacted_logs_may_hand_a_partition_to_a_newer_epoch() -> None:
    """KAFKA-19862."""
    group = ConsumerGroup("g")
    group.update_member(member("m1", epoch=5, assigned_partitions={FOO: frozenset({0})}))
    # Compaction dropped m1's release of partition 0: m2 takes it at a newer epoch.
    group.update_member(member("m2", epoch=6, assigned_partitions={FOO: frozenset({0})}))
    assert group.current_partition_epoch(FOO, 0) == 6

    # m1's own newer record no longer removes what is now m2's.
    group.update_member(member("m1", epoch=7))
    assert group.current_partition_epoch(FOO, 0) == 6


def test_subscribed_topic_names_count_names_and_resolved_regexes() -> None:
    group = ConsumerGroup("g")
    group.update_member(member("m1", subscribed_topic_names=frozenset({"foo", "bar"})))
    group.update_member(member("m2", subscribed_topic_names=frozenset({"foo"}), subscribed_topic_regex="f.*"))
    resolved = ResolvedRegularExpression(frozenset({"foo", "fizz"}), 1, 0)
    group.update_resolved_regular_expression("f.*", resolved)

    assert group.subscribed_topic_names == {
        "foo": SubscriptionCount(2, 1), "bar": SubscriptionCount(1, 0), "fizz": SubscriptionCount(0, 1),
    }
    assert group.subscribed_regular_expressions == {"f.*": 1}

    group.remove_resolved_regular_expression("f.*")
    group.remove_member("m1")
    assert group.subscribed_topic_names == {"foo": SubscriptionCount(1, 0)}


def test_computing_subscribed_topic_names_drops_a_regex_with_its_last_member() -> None:
    group = ConsumerGroup("g")
    regex_member = member("m1", subscribed_topic_regex="f.*")
    group.update_member(regex_member)
    group.update_resolved_regular_expression("f.*", ResolvedRegularExpression(frozenset({"foo"}), 1, 0))
    renamed = member("m1", subscribed_topic_names=frozenset({"bar"}))

    assert group.compute_subscribed_topic_names(regex_member, renamed) == {"bar": SubscriptionCount(1, 0)}
    assert group.compute_subscribed_topic_names(None, member("m2", subscribed_topic_regex="f.*")) == {
        "foo": SubscriptionCount(0, 1),
    }
    assert group.subscribed_topic_names == {"foo": SubscriptionCount(0, 1)}, "the group is not changed"


@pytest.mark.parametrize(
    ("members", "regexes", "expected"),
    [
        ([{"foo"}, {"foo"}], {}, SubscriptionType.HOMOGENEOUS),
        ([{"foo"}, {"foo", "bar"}], {}, SubscriptionType.HETEROGENEOUS),
        ([set(), set()], {"m0": "f.*", "m1": "f.*"}, SubscriptionType.HOMOGENEOUS),
        ([set(), set()], {"m0": "f.*", "m1": "b.*"}, SubscriptionType.HETEROGENEOUS),
        ([{"foo"}, set()], {"m0": "f.*", "m1": "f.*"}, SubscriptionType.HETEROGENEOUS),
    ],
)
def test_subscription_type_is_kafka_4_0s(
    members: list[set[str]], regexes: dict[str, str], expected: SubscriptionType
) -> None:
    group = ConsumerGroup("g")
    for index, names in enumerate(members):
        member_id = f"m{index}"
        group.update_member(member(member_id, subscribed_topic_names=frozenset(names),
                                   subscribed_topic_regex=regexes.get(member_id, "")))
    for regex in set(regexes.values()):
        group.update_resolved_regular_expression(regex, ResolvedRegularExpression(frozenset({"foo"}), 1, 0))

    assert group.subscription_type() is expected


def test_static_members_are_found_by_instance_id() -> None:
    group = ConsumerGroup("g")
    group.update_member(member("m1", instance_id="i1"))
    group.update_target_assignment("m1", {FOO: frozenset({0})})

    assert group.static_member("i1") == group.members["m1"]
    assert group.static_member("i2") is None and group.static_member(None) is None
    assert group.target_assignment_for("new-id", "i1") == {FOO: frozenset({0})}
    assert group.target_assignment_for("m1", None) == {FOO: frozenset({0})}
    assert group.target_assignment_for("m9", "i9") == {}

    group.remove_member("m1")
    assert group.static_members == {}


def test_preferred_server_assignor_is_the_one_most_members_name() -> None:
    group = ConsumerGroup("g")
    assert group.preferred_server_assignor() is None
    group.update_member(member("m1", server_assignor_name="range"))
    group.update_member(member("m2", server_assignor_name="uniform"))
    group.update_member(member("m3", server_assignor_name="range"))

    assert group.preferred_server_assignor() == "range"
    two_uniform = member("m3", server_assignor_name="uniform")
    assert group.compute_preferred_server_assignor(group.members["m3"], two_uniform) == "uniform"
    assert group.server_assignors == {"range": 2, "uniform": 1}, "computing changes nothing"


def test_inverted_target_keeps_a_partition_already_handed_on() -> None:
    group = ConsumerGroup("g")
    group.update_target_assignment("a", {FOO: frozenset({0, 1})})
    # Partition 0 moves from a to b, b's record first.
    group.update_target_assignment("b", {FOO: frozenset({0})})
    group.update_target_assignment("a", {FOO: frozenset({1})})

    assert group.inverted_target_assignment == {FOO: {0: "b", 1: "a"}}
    group.remove_target_assignment("a")
    group.remove_target_assignment("b")
    assert group.inverted_target_assignment == {} and group.target_assignment == {}


def test_waiting_on_unreleased_partition() -> None:
    group = ConsumerGroup("g")
    group.update_member(member("owner", assigned_partitions={FOO: frozenset({0})}))
    waiting = member("waiting", epoch=11, state=MemberState.UNRELEASED_PARTITIONS,
                     assigned_partitions={FOO: frozenset({1})})
    group.update_member(waiting)
    group.update_target_assignment("waiting", {FOO: frozenset({0, 1})})

    assert group.waiting_on_unreleased_partition(waiting)
    group.update_member(member("owner", epoch=11))
    assert not group.waiting_on_unreleased_partition(waiting)
    assert not group.waiting_on_unreleased_partition(group.members["owner"])


def test_classic_protocol_members_are_counted() -> None:
    group = ConsumerGroup("g")
    protocols = (ClassicProtocol("range", b""), ClassicProtocol("roundrobin", b""))
    classic = ClassicMemberMetadata(45_000, protocols)
    group.update_member(member("c", classic_member_metadata=classic))
    group.update_member(member("k"))

    assert group.num_classic_protocol_members == 1
    assert group.classic_protocol_members_supported_protocols == {"range": 1, "roundrobin": 1}
    assert group.all_members_use_classic_protocol_except("k")
    assert not group.all_members_use_classic_protocol_except("c")
    group.remove_member("c")
    assert (group.num_classic_protocol_members, group.classic_protocol_members_supported_protocols) == (0, {})
