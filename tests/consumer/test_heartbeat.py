"""ConsumerGroupHeartbeat scenarios on the Shard with a manual clock: responses and the exact records.

Mirrors the consumer-group heartbeat tests of Kafka's GroupMetadataManagerTest
(testReconciliationProcess, testLeavingMemberBumpsGroupEpoch,
testStaticMemberGetsBackAssignmentUponRejoin, testSessionTimeoutExpiration,
testRebalanceTimeoutExpiration, testSubscriptionMetadataRefreshedAfterGroupIsLoaded ...).
"""

from __future__ import annotations

from coordinator.consumer import MemberState
from coordinator.consumer import records as helpers
from coordinator.consumer.assignors.spec import TopicMetadata
from coordinator.consumer.member import ConsumerGroupMember, assignment_from_topic_partitions
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.errors import Errors

from tests.consumer.heartbeat_harness import GROUP, REBALANCE_MS, Driver, beat, join, owned, tp

FOO = topic_id_for("foo")


def member_a(epoch: int, previous: int, assigned: dict, **fields: object) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "A",
        member_epoch=epoch,
        previous_member_epoch=previous,
        rebalance_timeout_ms=REBALANCE_MS,
        subscribed_topic_names=frozenset({"foo"}),
        assigned_partitions=assigned,
        **fields,  # type: ignore[arg-type]
    )


def test_first_member_joins_and_gets_every_partition() -> None:
    driver = Driver({"foo": 3})
    response = driver.ok(join("A", "foo"))

    assert (response.member_id, response.member_epoch) == ("A", 1)
    assert response.heartbeat_interval_ms == 5_000
    assert response.assignment == (tp("foo", 0, 1, 2),)
    a = member_a(1, 0, {FOO: frozenset({0, 1, 2})})
    assert driver.last == [
        helpers.member_subscription_record(GROUP, member_a(0, -1, {})),
        helpers.subscription_metadata_record(GROUP, {"foo": TopicMetadata(FOO, "foo", 3)}),
        helpers.epoch_record(GROUP, 1),
        helpers.target_assignment_record(GROUP, "A", {FOO: frozenset({0, 1, 2})}),
        helpers.target_assignment_epoch_record(GROUP, 1),
        helpers.current_assignment_record(GROUP, a),
    ]
    # A plain heartbeat changes nothing and carries no assignment.
    again = driver.ok(beat("A", 1))
    assert (again.member_epoch, again.assignment, driver.last) == (1, None, [])
    driver.assert_replay_equals_live()


def test_second_member_gets_partitions_only_once_the_first_released_them() -> None:
    driver = Driver({"foo": 4})
    driver.ok(join("A", "foo"))
    b = driver.ok(join("B", "foo"))
    group = driver.shard.consumer_groups[GROUP]
    target_b = group.target_assignment["B"]
    assert b.member_epoch == 2 and owned(b.assignment) == {}
    assert group.members["B"].state is MemberState.UNRELEASED_PARTITIONS
    assert len(target_b[FOO]) == 2

    # A learns what to revoke and stays at epoch 1 until it does.
    a = driver.ok(beat("A", 1, (tp("foo", 0, 1, 2, 3),)))
    assert a.member_epoch == 1
    assert owned(a.assignment) == {FOO: frozenset({0, 1, 2, 3}) - target_b[FOO]}
    assert group.members["A"].state is MemberState.UNREVOKED_PARTITIONS
    # B asks again: still blocked.
    assert driver.ok(beat("B", 2, ())).assignment is None

    # A acknowledges the revocation: epoch 2, and the partitions are free.
    kept = tuple(sorted(owned(a.assignment)[FOO]))
    a2 = driver.ok(beat("A", 1, (tp("foo", *kept),)))
    assert (a2.member_epoch, a2.assignment) == (2, None)
    b2 = driver.ok(beat("B", 2, ()))
    assert b2.member_epoch == 2 and owned(b2.assignment) == target_b
    assert group.members["B"].state is MemberState.STABLE
    assert group.state.value == "Stable"
    driver.assert_replay_equals_live()


def test_a_leaving_member_is_removed_and_the_group_epoch_bumped() -> None:
    driver = Driver({"foo": 2})
    driver.ok(join("A", "foo"))
    driver.ok(join("B", "bar"))
    response = driver.ok(beat("A", -1))

    assert (response.member_id, response.member_epoch) == ("A", -1)
    assert driver.last == [
        helpers.current_assignment_tombstone(GROUP, "A"),
        helpers.target_assignment_tombstone(GROUP, "A"),
        helpers.member_subscription_tombstone(GROUP, "A"),
        helpers.subscription_metadata_record(GROUP, {}),
        helpers.epoch_record(GROUP, 3),
    ]
    assert set(driver.shard.consumer_groups[GROUP].members) == {"B"}
    assert ("consumer-session", GROUP, "A") not in driver.shard.timers
    driver.refused(beat("A", 1), Errors.UNKNOWN_MEMBER_ID)
    driver.assert_replay_equals_live()


def test_static_member_leaves_temporarily_and_gets_its_assignment_back() -> None:
    driver = Driver({"foo": 2})
    driver.ok(join("A", "foo", instance_id="i-1"))
    driver.ok(join("B", "foo"))
    group = driver.shard.consumer_groups[GROUP]
    leave = driver.ok(beat("A", -2, instance_id="i-1"))
    assert leave.member_epoch == -2
    (record,) = driver.last
    assert record.value.member_epoch == -2  # type: ignore[union-attr]
    assert group.group_epoch == 2, "a temporary leave does not bump the epoch"

    # The instance comes back under a new member id and takes over A's assignment.
    back = driver.ok(join("A2", "foo", instance_id="i-1"))
    assert "A" not in group.members and group.static_members["i-1"] == "A2"
    assert owned(back.assignment) == group.target_assignment["A2"]
    assert driver.last[:3] == [
        helpers.current_assignment_tombstone(GROUP, "A"),
        helpers.target_assignment_tombstone(GROUP, "A"),
        helpers.member_subscription_tombstone(GROUP, "A"),
    ]
    driver.assert_replay_equals_live()


def test_static_instance_ids_unreleased_fenced_and_unknown() -> None:
    driver = Driver({"foo": 2})
    a = driver.ok(join("A", "foo", instance_id="i-1"))
    driver.refused(join("A2", "foo", instance_id="i-1"), Errors.UNRELEASED_INSTANCE_ID)
    driver.refused(beat("X", a.member_epoch, instance_id="i-1"), Errors.FENCED_INSTANCE_ID)
    driver.refused(beat("A", a.member_epoch, instance_id="i-9"), Errors.UNKNOWN_MEMBER_ID)
    driver.refused(beat("A", -2, instance_id="i-9"), Errors.UNKNOWN_MEMBER_ID)


def test_session_expiry_fences_the_member() -> None:
    driver = Driver({"foo": 2})
    driver.ok(join("A", "foo"))
    driver.ok(join("B", "foo"))
    driver.advance(30_000)
    driver.ok(beat("B", 2, ()))
    assert driver.advance(14_999) == []
    written = driver.advance(1)
    assert written == [
        helpers.current_assignment_tombstone(GROUP, "A"),
        helpers.target_assignment_tombstone(GROUP, "A"),
        helpers.member_subscription_tombstone(GROUP, "A"),
        helpers.epoch_record(GROUP, 3),
    ]
    driver.refused(beat("A", 1), Errors.UNKNOWN_MEMBER_ID)
    driver.assert_replay_equals_live()


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    driver = Driver({"foo": 2})
    driver.ok(join("A", "foo"))
    driver.ok(join("B", "foo"))
    a = driver.ok(beat("A", 1, (tp("foo", 0, 1),)))
    assert driver.shard.consumer_groups[GROUP].members["A"].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(REBALANCE_MS // 10_000 - 1):  # heartbeats keep the session, not the revocation
        driver.advance(10_000)
        driver.ok(beat("A", a.member_epoch, (tp("foo", 0, 1),)))
        driver.ok(beat("B", 2, ()))
    written = driver.advance(10_000)
    assert written[:3] == [
        helpers.current_assignment_tombstone(GROUP, "A"),
        helpers.target_assignment_tombstone(GROUP, "A"),
        helpers.member_subscription_tombstone(GROUP, "A"),
    ]
    driver.refused(beat("A", 1), Errors.UNKNOWN_MEMBER_ID)
    b = driver.ok(beat("B", 2, ()))
    assert b.member_epoch == 3 and owned(b.assignment) == {FOO: frozenset({0, 1})}


def test_rebalance_timer_is_cancelled_once_the_member_revokes() -> None:
    driver = Driver({"foo": 2})
    driver.ok(join("A", "foo"))
    driver.ok(join("B", "foo"))
    a = driver.ok(beat("A", 1, (tp("foo", 0, 1),)))
    driver.ok(beat("A", 1, (tp("foo", *owned(a.assignment)[FOO]),)))
    assert ("consumer-rebalance", GROUP, "A") not in driver.shard.timers


def test_a_growing_topic_bumps_the_epoch_and_reaches_the_members() -> None:
    driver = Driver({"foo": 2})
    driver.ok(join("A", "foo"))
    written = driver.topics({"foo": 4, "other": 1})
    assert written == [
        helpers.subscription_metadata_record(GROUP, {"foo": TopicMetadata(FOO, "foo", 4)}),
        helpers.epoch_record(GROUP, 2),
    ]
    assert driver.topics({"foo": 4, "other": 7}) == [], "a topic nobody subscribes to changes nothing"
    a = driver.ok(beat("A", 1, (tp("foo", 0, 1),)))
    assert a.member_epoch == 2 and a.assignment == (tp("foo", 0, 1, 2, 3),)
    driver.assert_replay_equals_live()


def test_a_topic_created_after_the_subscription_is_assigned() -> None:
    driver = Driver({})
    assert driver.ok(join("A", "foo")).assignment == ()
    driver.topics({"foo": 1})
    assert driver.ok(beat("A", 1, ())).assignment == (tp("foo", 0),)


def test_the_last_member_leaving_brings_the_target_epoch_along() -> None:
    driver = Driver({"foo": 1})
    driver.ok(join("A", "foo"))
    driver.ok(beat("A", -1))
    assert driver.last[-2:] == [
        helpers.epoch_record(GROUP, 2),
        helpers.target_assignment_epoch_record(GROUP, 2),
    ]
    group = driver.shard.consumer_groups[GROUP]
    assert (group.group_epoch, group.assignment_epoch, group.state.value) == (2, 2, "Empty")
    driver.assert_replay_equals_live()


def test_a_known_member_rejoining_with_epoch_zero_is_not_fenced() -> None:
    driver = Driver({"foo": 2})
    driver.ok(join("A", "foo"))
    driver.ok(join("B", "foo"))
    driver.ok(beat("A", 1, (tp("foo", 0, 1),)))  # A now owes a revocation
    again = driver.ok(join("A", "foo"))  # KAFKA-19233: A lost its state and rejoins
    assert again.member_epoch == 2 and len(owned(again.assignment)[FOO]) == 1
    driver.assert_replay_equals_live()


def test_updating_the_subscription_triggers_a_new_target_assignment() -> None:
    """Kafka's testUpdatingSubscriptionTriggersNewTargetAssignment."""
    driver = Driver({"foo": 2, "bar": 1})
    driver.ok(join("A", "foo"))
    response = driver.ok(beat("A", 1, subscribed_topic_names=("foo", "bar")))
    bar = topic_id_for("bar")
    full = {FOO: frozenset({0, 1}), bar: frozenset({0})}
    a = ConsumerGroupMember(
        "A",
        member_epoch=2,
        previous_member_epoch=1,
        rebalance_timeout_ms=REBALANCE_MS,
        subscribed_topic_names=frozenset({"foo", "bar"}),
        assigned_partitions=full,
    )
    metadata = {"bar": TopicMetadata(bar, "bar", 1), "foo": TopicMetadata(FOO, "foo", 2)}
    assert driver.last[0] == helpers.member_subscription_record(
        GROUP,
        ConsumerGroupMember(
            "A", rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=frozenset({"foo", "bar"})
        ),
    )
    assert driver.last[1:3] == [
        helpers.subscription_metadata_record(GROUP, metadata),
        helpers.epoch_record(GROUP, 2),
    ]
    target_key, target_value = driver.last[3]
    assert target_key == helpers.target_assignment_record(GROUP, "A", full).key
    assert assignment_from_topic_partitions(target_value.topic_partitions) == full  # type: ignore[union-attr]
    assert driver.last[4:] == [
        helpers.target_assignment_epoch_record(GROUP, 2),
        helpers.current_assignment_record(GROUP, a),
    ]
    assert response.member_epoch == 2 and owned(response.assignment) == full
