"""Replaying consumer group records, record by record (Kafka's GroupMetadataManagerTest replay cases),
and the record helpers that build them (GroupCoordinatorRecordHelpersTest)."""

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
    TopicMetadata,
)
from coordinator.consumer import records as helpers
from coordinator.consumer.replay import replay
from coordinator.records import (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupRegularExpressionValue,
    OffsetCommitKey,
    Record,
    TopicMetadataRecord,
    TopicPartitions,
)

FOO = UUID(int=0xF00)
BAR = UUID(int=0xBA4)


def replayed(*records: Record) -> dict[str, ConsumerGroup]:
    groups: dict[str, ConsumerGroup] = {}
    for record in records:
        replay(groups, record)
    return groups


def test_member_metadata_creates_the_group_and_the_member() -> None:
    member = ConsumerGroupMember(
        "member", client_id="clientid", client_host="clienthost", server_assignor_name="range",
        rack_id="rackid", subscribed_topic_names=frozenset({"foo"}),
    )

    groups = replayed(helpers.member_subscription_record("foo", member))

    assert groups["foo"].members == {"member": member}
    assert groups["foo"].subscribed_topic_names == {"foo": SubscriptionCount(1, 0)}
    assert groups["foo"].server_assignors == {"range": 1}


def test_member_metadata_tombstones_of_unknown_members_or_groups_do_nothing() -> None:
    groups = replayed(
        helpers.epoch_record("foo", 10),
        helpers.member_subscription_tombstone("foo", "m1"),
        helpers.member_subscription_tombstone("bar", "m1"),
    )

    assert list(groups) == ["foo"] and groups["foo"].members == {}


def test_group_metadata_sets_the_epoch_and_its_tombstone_of_an_unknown_group_does_nothing() -> None:
    groups = replayed(helpers.epoch_record("foo", 10), helpers.epoch_tombstone("bar"))

    assert list(groups) == ["foo"] and groups["foo"].group_epoch == 10


def test_partition_metadata_and_its_tombstone() -> None:
    metadata = {"bar": TopicMetadata(BAR, "bar", 10)}

    groups = replayed(helpers.subscription_metadata_record("foo", metadata))
    assert groups["foo"].subscription_metadata == metadata

    replay(groups, helpers.subscription_metadata_tombstone("foo"))
    replay(groups, helpers.subscription_metadata_tombstone("other"))
    assert groups["foo"].subscription_metadata == {} and list(groups) == ["foo"]


def test_target_assignment_member_and_metadata() -> None:
    assignment = {FOO: frozenset({0, 1, 2})}

    groups = replayed(
        helpers.target_assignment_record("foo", "m1", assignment),
        helpers.target_assignment_epoch_record("foo", 10),
        helpers.target_assignment_tombstone("bar", "m1"),
        helpers.target_assignment_epoch_tombstone("bar"),
    )

    assert groups["foo"].target_assignment_of("m1") == assignment
    assert groups["foo"].assignment_epoch == 10
    assert groups["foo"].inverted_target_assignment == {FOO: {0: "m1", 1: "m1", 2: "m1"}}
    assert list(groups) == ["foo"]


def test_current_member_assignment_creates_the_member_and_its_tombstone_leaves_it_at_epoch_minus_1() -> None:
    member = ConsumerGroupMember(
        "member", member_epoch=10, previous_member_epoch=9, state=MemberState.UNRELEASED_PARTITIONS,
        assigned_partitions={FOO: frozenset({0, 1, 2})}, partitions_pending_revocation={BAR: frozenset({3})},
    )

    groups = replayed(helpers.current_assignment_record("bar", member))
    assert groups["bar"].members == {"member": member}
    assert groups["bar"].current_partition_epoch(BAR, 3) == 10

    replay(groups, helpers.current_assignment_tombstone("bar", "member"))
    replay(groups, helpers.current_assignment_tombstone("bar", "unknown"))
    replay(groups, helpers.current_assignment_tombstone("none", "member"))
    left = groups["bar"].members["member"]
    assert (left.member_epoch, left.previous_member_epoch) == (-1, -1)
    assert left.state is MemberState.UNRELEASED_PARTITIONS, "the state is left as it was"
    assert left.assigned_partitions == {} and left.partitions_pending_revocation == {}
    assert groups["bar"].partition_epochs == {} and list(groups) == ["bar"]


def test_regular_expression_and_its_tombstone() -> None:
    resolved = ResolvedRegularExpression(frozenset({"abc", "abcd"}), 10, 12345)

    groups = replayed(
        helpers.regular_expression_record("foo", "abc*", resolved),
        helpers.regular_expression_tombstone("bar", "abc*"),
    )
    assert groups["foo"].resolved_regular_expressions == {"abc*": resolved}
    by_regex = SubscriptionCount(0, 1)
    assert groups["foo"].subscribed_topic_names == {"abc": by_regex, "abcd": by_regex}
    assert list(groups) == ["foo"]

    replay(groups, helpers.regular_expression_tombstone("foo", "abc*"))
    assert groups["foo"].resolved_regular_expressions == {} and groups["foo"].subscribed_topic_names == {}


@pytest.mark.parametrize(
    ("tombstone", "message"),
    [
        (helpers.member_subscription_tombstone("g", "m1"), "CurrentMemberAssignmentValue tombstone"),
        (helpers.target_assignment_epoch_tombstone("g"), "the assignment still has 1 members"),
        (helpers.epoch_tombstone("g"), "the group still has 1 members"),
    ],
    ids=["member-before-current-assignment", "target-epoch-before-target-member", "group-before-members"],
)
def test_tombstones_out_of_kafkas_order_are_broken_invariants(tombstone: Record, message: str) -> None:
    member = ConsumerGroupMember("m1", member_epoch=3, subscribed_topic_names=frozenset({"foo"}))
    groups = replayed(
        helpers.member_subscription_record("g", member),
        helpers.epoch_record("g", 3),
        helpers.target_assignment_record("g", "m1", {FOO: frozenset({0})}),
        helpers.target_assignment_epoch_record("g", 3),
        helpers.current_assignment_record("g", member),
    )

    with pytest.raises(IllegalGroupState, match=message):
        replay(groups, tombstone)


def test_a_member_with_a_target_cannot_be_deleted_and_a_group_needs_its_target_epoch_deleted() -> None:
    groups = replayed(
        helpers.member_subscription_record("g", ConsumerGroupMember("m1")),
        helpers.target_assignment_record("g", "m1", {}),
        helpers.current_assignment_tombstone("g", "m1"),
    )
    with pytest.raises(IllegalGroupState, match="ConsumerGroupTargetAssignmentMetadataValue tombstone"):
        replay(groups, helpers.member_subscription_tombstone("g", "m1"))

    groups = replayed(helpers.epoch_record("g", 1), helpers.target_assignment_epoch_record("g", 1))
    with pytest.raises(IllegalGroupState, match="did not receive ConsumerGroupTargetAssignmentMetadataValue"):
        replay(groups, helpers.epoch_tombstone("g"))


def test_group_tombstone_records_delete_the_group_in_kafkas_order() -> None:
    members = [
        ConsumerGroupMember("m1", member_epoch=4, subscribed_topic_names=frozenset({"foo"})),
        ConsumerGroupMember("m2", member_epoch=4, subscribed_topic_regex="b.*", instance_id="i2"),
    ]
    resolved = ResolvedRegularExpression(frozenset({"bar"}), 1, 0)
    groups = replayed(
        *[helpers.member_subscription_record("g", m) for m in members],
        helpers.regular_expression_record("g", "b.*", resolved),
        helpers.subscription_metadata_record("g", {"foo": TopicMetadata(FOO, "foo", 3)}),
        helpers.epoch_record("g", 4),
        helpers.target_assignment_record("g", "m1", {FOO: frozenset({0, 1, 2})}),
        helpers.target_assignment_record("g", "m2", {}),
        helpers.target_assignment_epoch_record("g", 4),
        *[helpers.current_assignment_record("g", m) for m in members],
    )
    tombstones = helpers.group_tombstone_records(groups["g"])

    assert tombstones == [
        helpers.current_assignment_tombstone("g", "m1"), helpers.current_assignment_tombstone("g", "m2"),
        helpers.target_assignment_tombstone("g", "m1"), helpers.target_assignment_tombstone("g", "m2"),
        helpers.target_assignment_epoch_tombstone("g"),
        helpers.member_subscription_tombstone("g", "m1"), helpers.member_subscription_tombstone("g", "m2"),
        helpers.regular_expression_tombstone("g", "b.*"),
        helpers.subscription_metadata_tombstone("g"),
        helpers.epoch_tombstone("g"),
    ]
    for tombstone in tombstones:
        replay(groups, tombstone)
    assert groups == {}


def test_replaced_member_tombstones_name_the_joining_member() -> None:
    groups = replayed(helpers.member_subscription_record("g", ConsumerGroupMember("old")))

    tombstones = helpers.group_tombstone_records(groups["g"], replaced=("old", "new"))

    assert [r.key[1] for r in tombstones if len(r.key) == 2] == ["new", "new", "new"]


def test_member_metadata_record_is_kafkas() -> None:
    member = ConsumerGroupMember(
        "m", instance_id="i", rack_id="r", client_id="c", client_host="h",
        subscribed_topic_names=frozenset({"zeta", "alpha"}), subscribed_topic_regex="",
        server_assignor_name="range", rebalance_timeout_ms=5000,
    )

    assert helpers.member_subscription_record("g", member) == Record(
        ConsumerGroupMemberMetadataKey("g", "m"),
        ConsumerGroupMemberMetadataValue("i", "r", "c", "h", ("alpha", "zeta"), "", 5000, "range", None),
    )


def test_assignments_and_regex_topics_are_written_sorted() -> None:
    target = helpers.target_assignment_record("g", "m", {FOO: frozenset({5, 1, 3}), BAR: frozenset()})
    resolved = ResolvedRegularExpression(frozenset({"b", "a"}), 1, 2)
    regex = helpers.regular_expression_record("g", "x", resolved)
    metadata = helpers.subscription_metadata_record("g", {"foo": TopicMetadata(FOO, "foo", 6)})

    assert target.value == (((FOO, (1, 3, 5)), (BAR, ())),)
    assert target.value.topic_partitions[0] == TopicPartitions(FOO, (1, 3, 5))  # type: ignore[union-attr]
    assert regex.value == ConsumerGroupRegularExpressionValue(("a", "b"), 1, 2)
    assert metadata.value == ((TopicMetadataRecord(FOO, "foo", 6),),)


def test_consumer_group_records_recreate_the_group() -> None:
    member = ConsumerGroupMember(
        "m1", member_epoch=7, previous_member_epoch=7, subscribed_topic_names=frozenset({"foo"}),
        assigned_partitions={FOO: frozenset({0, 1})},
    )
    original = replayed(
        helpers.member_subscription_record("g", member), helpers.epoch_record("g", 7),
        helpers.target_assignment_record("g", "m1", {FOO: frozenset({0, 1})}),
        helpers.target_assignment_epoch_record("g", 7), helpers.current_assignment_record("g", member),
    )

    records = helpers.consumer_group_records(original["g"])

    assert [type(r.key).__name__ for r in records] == [
        "ConsumerGroupMemberMetadataKey", "ConsumerGroupMetadataKey",
        "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMetadataKey",
        "ConsumerGroupCurrentMemberAssignmentKey",
    ]
    assert vars(replayed(*records)["g"]) == vars(original["g"])
    assert original["g"].state is ConsumerGroupState.STABLE


def test_replay_refuses_what_is_not_a_consumer_group_record() -> None:
    with pytest.raises(TypeError):
        replay({}, Record(OffsetCommitKey("g", "t", 0), None))
