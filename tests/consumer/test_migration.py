"""Both protocols in one group: online upgrade, classic members inside a consumer group, downgrade.

Ported from Kafka's GroupMetadataManagerTest (apache/kafka 1eb7644349cb):
testConsumerGroupHeartbeatWithStableClassicGroup,
testConsumerGroupHeartbeatWithPreparingRebalanceClassicGroup,
testJoiningConsumerGroupWithNewDynamicMember,
testReconciliationInJoiningConsumerGroupWithCooperativeProtocol,
testClassicGroupSyncToConsumerGroup*, testClassicGroupHeartbeatToConsumerGroup*,
testConsumerGroupMemberUsingClassicProtocolFencedWhen{Session,Join}Timeout,
testConsumerGroupMemberUsingClassicProtocolBatchLeaveGroup,
testLastConsumerProtocolMemberLeavingConsumerGroup,
testLastConsumerProtocolMemberSessionTimeoutInConsumerGroup,
testLastStaticConsumerProtocolMemberReplacedByClassicProtocolMember and
testNoConversionWhenSizeExceedsClassicMaxGroupSize, on the Shard with a
manual clock: responses, the exact records, and replay equal to live.
"""

from __future__ import annotations

import dataclasses

import pytest

from coordinator.classic.state import GroupState
from coordinator.consumer import ConsumerGroupMember
from coordinator.consumer import records as helpers
from coordinator.consumer.reconciliation import MemberState
from coordinator.errors import Errors
from coordinator.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from coordinator.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataKey,
    Record,
)

from tests.consumer.heartbeat_harness import GROUP, beat, join, tp
from tests.consumer.mixed_harness import (
    CLASSIC_REBALANCE_MS,
    SESSION_MS,
    MixedDriver,
    assignment,
    classic_join,
    decoded,
    owners,
    subscription,
    tid,
)


def assert_no_double_owner(driver: MixedDriver) -> None:
    assert all(len(members) == 1 for members in owners(driver).values()), owners(driver)


def classic_metadata(*topics: str, owned: tuple[tuple[str, int], ...] = ()) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(SESSION_MS, (ClassicProtocol("range", subscription(*topics, owned=owned)),))


# ------------------------------------------------------------------- upgrade


def test_first_consumer_member_upgrades_a_stable_classic_group() -> None:
    driver = MixedDriver({"foo": 2, "bar": 1})
    generation = driver.classic_group(("m1", ("foo", "bar"), (("foo", 0), ("foo", 1), ("bar", 0))))
    m1 = driver.ids["m1"]
    commit = OffsetCommitRequest(
        GROUP, (OffsetCommitPartition("foo", 0, 42),), generation_id=generation, member_id=m1
    )
    assert driver.call(commit).errors() == {("foo", 0): Errors.NONE}
    before = len(driver.log)

    response = driver.ok(join("m2", "foo", "bar", server_assignor="range"))

    records = driver.log[before:]
    expected_m1 = ConsumerGroupMember(
        m1,
        member_epoch=generation,
        previous_member_epoch=generation,
        rebalance_timeout_ms=CLASSIC_REBALANCE_MS,
        client_id="m1",
        client_host="client-host",
        subscribed_topic_names=frozenset({"foo", "bar"}),
        assigned_partitions={tid("foo"): frozenset({0, 1}), tid("bar"): frozenset({0})},
        classic_member_metadata=classic_metadata("foo", "bar"),
    )
    assert records[:6] == [
        # The classic group's tombstone, then the consumer group Kafka's createConsumerGroupRecords writes.
        Record(GroupMetadataKey(GROUP), None),
        helpers.member_subscription_record(GROUP, expected_m1),
        helpers.epoch_record(GROUP, generation),
        helpers.target_assignment_record(GROUP, m1, expected_m1.assigned_partitions),
        helpers.target_assignment_epoch_record(GROUP, generation),
        helpers.current_assignment_record(GROUP, expected_m1),
    ]
    # Then member 2 joins: its metadata, the subscription metadata (not written by the
    # conversion), the bumped epoch, the new target, and member 2's assignment.
    kinds = [type(record.key) for record in records[6:]]
    assert kinds[:3] == [
        ConsumerGroupMemberMetadataKey, ConsumerGroupPartitionMetadataKey, ConsumerGroupMetadataKey
    ]
    assert records[8] == helpers.epoch_record(GROUP, generation + 1)
    assert kinds[-2:] == [ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupCurrentMemberAssignmentKey]
    assert response.member_epoch == generation + 1

    # The classic group is gone, its offsets stay; each member's session timer is its own.
    assert GROUP in driver.shard.consumer_groups
    classic = driver.shard.groups[GROUP]
    assert not classic.members and classic.generation_id == 0 and len(classic.offsets) == 1
    timers = driver.shard.timers
    assert timers.get(("consumer-session", GROUP, m1)).deadline_ms == driver.now + SESSION_MS
    assert timers.get(("consumer-session", GROUP, "m2")).deadline_ms == driver.now + 45_000
    assert timers.get(("heartbeat", GROUP, m1)) is None
    assert_no_double_owner(driver)
    driver.assert_replay_equals_live()


def test_classic_member_revokes_through_rejoins_after_the_upgrade() -> None:
    """A mixed group rebalances: the classic member revokes by rejoining, then the consumer one gets them."""
    driver = MixedDriver({"foo": 4})
    generation = driver.classic_group(("m1", ("foo",), (("foo", 0), ("foo", 1), ("foo", 2), ("foo", 3))))
    m1 = driver.ids["m1"]
    b = driver.ok(join("B", "foo"))
    group_epoch = generation + 1
    assert b.member_epoch == group_epoch and b.assignment == ()
    # m1 must rejoin: its epoch is behind the group's.
    assert driver.heartbeat_classic(m1, generation) is Errors.REBALANCE_IN_PROGRESS
    assert driver.shard.timers.get(("consumer-join", GROUP, m1)) is not None
    owned_all = tuple(("foo", p) for p in range(4))
    rejoin = driver.call(classic_join(m1, "foo", owned=owned_all))
    assert isinstance(rejoin, JoinGroupResponse) and rejoin.error is Errors.NONE
    # Partitions to revoke: it stays at its epoch, in UNREVOKED_PARTITIONS, with the kept ones.
    assert rejoin.generation_id == generation and rejoin.protocol_name == "range" and rejoin.leader == ""
    member = driver.shard.consumer_groups[GROUP].members[m1]
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    assert driver.shard.timers.get(("consumer-join", GROUP, m1)) is None
    assert driver.shard.timers.get(("consumer-sync", GROUP, m1)) is not None
    kept = driver.sync(m1, generation, protocol_type="consumer", protocol_name="range")
    assert kept.error is Errors.NONE and kept.protocol_name == "range"
    kept_partitions = decoded(kept.assignment)
    assert len(kept_partitions) == 2
    assert driver.shard.timers.get(("consumer-sync", GROUP, m1)) is None
    assert driver.heartbeat_classic(m1, generation) is Errors.REBALANCE_IN_PROGRESS
    # B may not take partitions m1 still owns.
    assert_no_double_owner(driver)
    rejoin = driver.call(classic_join(m1, "foo", owned=tuple(sorted(kept_partitions))))
    assert rejoin.generation_id == group_epoch
    assert driver.shard.consumer_groups[GROUP].members[m1].state is MemberState.STABLE
    assert decoded(driver.sync(m1, group_epoch).assignment) == kept_partitions
    assert driver.heartbeat_classic(m1, group_epoch) is Errors.NONE
    b = driver.ok(beat("B", group_epoch, ()))
    assert {p for entry in b.assignment for p in entry.partitions} == {p for _, p in owned_all} - {
        p for _, p in kept_partitions
    }
    assert_no_double_owner(driver)
    driver.assert_replay_equals_live()


def test_upgrade_answers_the_classic_groups_parked_requests() -> None:
    driver = MixedDriver({"foo": 2})
    generation = driver.classic_group(
        ("m1", ("foo",), (("foo", 0),)), ("m2", ("foo",), (("foo", 1),))
    )
    m1 = driver.ids["m1"]
    parked = driver.submit(classic_join(m1, "foo", protocols=("range", "roundrobin")))
    assert parked not in driver.released
    assert driver.shard.groups[GROUP].is_(GroupState.PREPARING_REBALANCE)
    driver.ok(join("C", "foo"))
    assert driver.take(parked).error is Errors.REBALANCE_IN_PROGRESS
    group = driver.shard.consumer_groups[GROUP]
    assert group.group_epoch == generation + 1 and len(group.members) == 3
    driver.assert_replay_equals_live()


@pytest.mark.parametrize(
    "config",
    [
        {"group_consumer_migration_policy": "disabled"},
        {"group_consumer_migration_policy": "DOWNGRADE"},
        {"group_consumer_max_size": 1},
    ],
)
def test_upgrade_refused_by_policy_or_size(config: dict) -> None:
    driver = MixedDriver({"foo": 2}, **config)
    driver.classic_group(("m1", ("foo",), (("foo", 0),)), ("m2", ("foo",), (("foo", 1),)))
    response = driver.refused(join("C", "foo"), Errors.GROUP_ID_NOT_FOUND)
    assert response.error_message == f"Group {GROUP} is not a consumer group"
    assert driver.shard.groups[GROUP].is_(GroupState.STABLE) and GROUP not in driver.shard.consumer_groups


def test_upgrade_refused_for_another_protocol_type_or_malformed_bytes() -> None:
    driver = MixedDriver({"foo": 2})
    token = driver.submit(classic_join("", "foo", protocol_type="connect"))
    driver.advance(3_000)
    assert driver.take(token).error is Errors.NONE
    driver.refused(join("C", "foo"), Errors.GROUP_ID_NOT_FOUND)

    malformed = MixedDriver({"foo": 2})
    generation = malformed.classic_group(("m1", ("foo",), (("foo", 0),)))
    # The leader's next assignment is not ConsumerProtocol bytes.
    m1 = malformed.ids["m1"]
    generation = malformed.call(classic_join(m1, "foo")).generation_id
    malformed.call(
        SyncGroupRequest(
            GROUP, generation, m1, assignments=((m1, b"\x00"),)
        )
    )
    response = malformed.refused(join("C", "foo"), Errors.GROUP_ID_NOT_FOUND)
    assert "malformed" in (response.error_message or "")


def test_empty_stored_classic_group_is_tombstoned_and_replaced() -> None:
    driver = MixedDriver({"foo": 1})
    driver.classic_group(("m1", ("foo",), (("foo", 0),)))
    driver.leave_classic(MemberIdentity(driver.ids["m1"]))
    assert driver.shard.groups[GROUP].is_(GroupState.EMPTY)
    before = len(driver.log)
    driver.ok(join("A", "foo"))
    assert driver.log[before] == Record(GroupMetadataKey(GROUP), None)
    assert GROUP not in driver.shard.groups
    driver.assert_replay_equals_live()


# ------------------------------------------------- classic members inside


def consumer_group_with(driver: MixedDriver, *member_ids: str) -> None:
    for member_id in member_ids:
        driver.ok(join(member_id, "foo"))


def test_classic_member_joins_syncs_and_heartbeats_in_a_consumer_group() -> None:
    driver = MixedDriver({"foo": 4})
    a = driver.ok(join("A", "foo"))
    driver.ok(beat("A", a.member_epoch, ()))
    # KIP-394: a dynamic classic member first gets an id.
    required = driver.call(classic_join("", "foo", require_known_member_id=True))
    assert required.error is Errors.MEMBER_ID_REQUIRED and required.member_id
    member_id = required.member_id
    assert member_id not in driver.shard.consumer_groups[GROUP].members
    before = len(driver.log)
    joined = driver.call(classic_join(member_id, "foo"))
    assert joined.error is Errors.NONE and joined.member_id == member_id
    assert joined.protocol_type == "consumer" and joined.protocol_name == "range"
    assert joined.leader == "" and joined.members == () and joined.generation_id == 2
    member = driver.shard.consumer_groups[GROUP].members[member_id]
    assert member.classic_member_metadata == classic_metadata("foo")
    assert member.state is MemberState.UNRELEASED_PARTITIONS and member.assigned_partitions == {}
    written = driver.log[before:]
    assert written[0] == helpers.member_subscription_record(GROUP, member)
    assert written[1] == helpers.epoch_record(GROUP, 2)
    assert written[-1] == helpers.current_assignment_record(GROUP, member)
    timers = driver.shard.timers
    assert timers.get(("consumer-session", GROUP, member_id)).deadline_ms == driver.now + SESSION_MS
    assert timers.get(("consumer-sync", GROUP, member_id)).deadline_ms == driver.now + CLASSIC_REBALANCE_MS
    assert timers.get(("consumer-rebalance", GROUP, member_id)) is None

    synced = driver.sync(member_id, 2)
    assert synced.error is Errors.NONE and decoded(synced.assignment) == set()
    # Waiting on partitions A still owns: no need to rejoin yet.
    assert driver.heartbeat_classic(member_id, 2) is Errors.NONE
    a = driver.ok(beat("A", 1, (tp("foo", 0, 1, 2, 3),)))
    a = driver.ok(beat("A", a.member_epoch, tuple(a.assignment)))
    # A released them: the classic member rejoins to get them.
    assert driver.heartbeat_classic(member_id, 2) is Errors.REBALANCE_IN_PROGRESS
    rejoined = driver.call(classic_join(member_id, "foo"))
    assert rejoined.generation_id == 2
    assert len(decoded(driver.sync(member_id, 2).assignment)) == 2
    assert driver.heartbeat_classic(member_id, 2) is Errors.NONE
    assert_no_double_owner(driver)
    driver.assert_replay_equals_live()


def test_classic_requests_errors_inside_a_consumer_group() -> None:
    driver = MixedDriver({"foo": 2})
    consumer_group_with(driver, "A")
    refused = driver.call(classic_join("", "foo", protocol_type="connect"))
    assert refused.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    m = driver.call(classic_join("", "foo")).member_id
    # Another classic member must support a protocol every classic member supports.
    refused = driver.call(classic_join("", "foo", protocols=("roundrobin",)))
    assert refused.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert driver.call(classic_join("", "foo", session_timeout_ms=1)).error is Errors.INVALID_SESSION_TIMEOUT
    epoch = driver.shard.consumer_groups[GROUP].members[m].member_epoch
    assert driver.sync("unknown", epoch).error is Errors.UNKNOWN_MEMBER_ID
    assert driver.sync("A", 1).error is Errors.UNKNOWN_MEMBER_ID  # uses the consumer protocol
    assert driver.sync(m, epoch + 7).error is Errors.ILLEGAL_GENERATION
    assert driver.sync(m, epoch, protocol_type="connect").error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert driver.sync(m, epoch, protocol_name="roundrobin").error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert driver.heartbeat_classic("A", 1) is Errors.UNKNOWN_MEMBER_ID
    assert driver.heartbeat_classic(m, epoch + 1) is Errors.ILLEGAL_GENERATION
    assert driver.heartbeat_classic(m, epoch, group_instance_id="nobody") is Errors.UNKNOWN_MEMBER_ID
    # A consumer member joins: the classic member must rejoin; its SyncGroup says so too.
    driver.ok(join("B", "foo"))
    assert driver.sync(m, epoch).error is Errors.REBALANCE_IN_PROGRESS


def test_classic_member_fenced_by_its_session_join_and_sync_timeouts() -> None:
    driver = MixedDriver({"foo": 2}, group_consumer_session_timeout_ms=10**9)
    consumer_group_with(driver, "A")
    session = driver.call(classic_join("", "foo")).member_id
    epoch = driver.shard.consumer_groups[GROUP].members[session].member_epoch
    assert driver.sync(session, epoch).error is Errors.NONE
    driver.advance(SESSION_MS - 1)
    driver.ok(beat("A", driver.shard.consumer_groups[GROUP].members["A"].member_epoch))
    assert session in driver.shard.consumer_groups[GROUP].members
    written = driver.advance(1)
    assert written[:3] == [
        helpers.current_assignment_tombstone(GROUP, session),
        helpers.target_assignment_tombstone(GROUP, session),
        helpers.member_subscription_tombstone(GROUP, session),
    ]
    assert session not in driver.shard.consumer_groups[GROUP].members

    # No SyncGroup within the rebalance timeout: fenced.
    unsynced = driver.call(classic_join("", "foo", session_timeout_ms=60_000)).member_id
    driver.advance(CLASSIC_REBALANCE_MS)
    assert unsynced not in driver.shard.consumer_groups[GROUP].members

    # Told to rejoin and never does: fenced after its rebalance timeout (its heartbeats go on).
    late = driver.call(classic_join("", "foo", session_timeout_ms=60_000)).member_id
    epoch = driver.shard.consumer_groups[GROUP].members[late].member_epoch
    assert driver.sync(late, epoch).error is Errors.NONE
    driver.ok(join("B", "foo"))
    assert driver.heartbeat_classic(late, epoch) is Errors.REBALANCE_IN_PROGRESS
    driver.advance(CLASSIC_REBALANCE_MS - 1)
    assert driver.heartbeat_classic(late, epoch) is Errors.REBALANCE_IN_PROGRESS  # does not re-arm it
    assert late in driver.shard.consumer_groups[GROUP].members
    driver.advance(1)
    assert late not in driver.shard.consumer_groups[GROUP].members
    driver.assert_replay_equals_live()


def test_classic_members_leave_a_consumer_group_in_one_batch() -> None:
    driver = MixedDriver({"foo": 2, "bar": 2})
    consumer_group_with(driver, "A")
    m1 = driver.call(classic_join("", "foo")).member_id
    m2 = driver.call(classic_join("", "foo", "bar", group_instance_id="i2")).member_id
    epoch = driver.shard.consumer_groups[GROUP].group_epoch
    before = len(driver.log)
    response = driver.leave_classic(
        MemberIdentity(m1), MemberIdentity("", "i2"), MemberIdentity("A"), MemberIdentity("x", "i9")
    )
    assert [(r.member_id, r.group_instance_id, r.error) for r in response.members] == [
        (m1, None, Errors.NONE),
        (m2, "i2", Errors.NONE),
        ("A", None, Errors.UNKNOWN_MEMBER_ID),
        ("x", "i9", Errors.UNKNOWN_MEMBER_ID),
    ]
    metadata = {"foo": driver.shard.topics["foo"]}
    assert driver.log[before:] == [
        helpers.current_assignment_tombstone(GROUP, m1),
        helpers.target_assignment_tombstone(GROUP, m1),
        helpers.member_subscription_tombstone(GROUP, m1),
        helpers.current_assignment_tombstone(GROUP, m2),
        helpers.target_assignment_tombstone(GROUP, m2),
        helpers.member_subscription_tombstone(GROUP, m2),
        helpers.subscription_metadata_record(GROUP, metadata),
        helpers.epoch_record(GROUP, epoch + 1),
    ]
    assert list(driver.shard.consumer_groups[GROUP].members) == ["A"]
    driver.assert_replay_equals_live()


def test_consumer_static_member_takes_a_classic_members_instance_id() -> None:
    driver = MixedDriver({"foo": 2})
    consumer_group_with(driver, "A")
    classic = driver.call(classic_join("", "foo", group_instance_id="i1")).member_id
    response = driver.ok(join("S", "foo", instance_id="i1"))
    group = driver.shard.consumer_groups[GROUP]
    assert classic not in group.members and group.members["S"].classic_member_metadata is None
    assert response.member_id == "S"
    driver.assert_replay_equals_live()


# ----------------------------------------------------------------- downgrade


def mixed_group(driver: MixedDriver, instance_id: str | None = None) -> tuple[str, str]:
    """A Stable consumer group: consumer member B and classic member m, both on foo and bar."""
    b = driver.ok(join("B", "foo", "bar"))
    m = driver.call(classic_join("", "foo", "bar", group_instance_id=instance_id)).member_id
    for _ in range(4):
        b = driver.ok(beat("B", b.member_epoch, tuple(b.assignment or ())))
        member = driver.shard.consumer_groups[GROUP].members[m]
        owned = tuple(
            (name, p)
            for name in ("foo", "bar")
            for p in sorted(member.assigned_partitions.get(tid(name), ()))
        )
        joined = driver.call(classic_join(m, "foo", "bar", owned=owned, group_instance_id=instance_id))
        driver.sync(m, joined.generation_id)
    assert driver.shard.consumer_groups[GROUP].state.value == "Stable"
    assert_no_double_owner(driver)
    return m, "B"


def test_last_consumer_member_leaving_downgrades_the_group() -> None:
    driver = MixedDriver({"foo": 3, "bar": 2})
    m, b = mixed_group(driver)
    group = driver.shard.consumer_groups[GROUP]
    epoch = group.group_epoch
    m_partitions = group.target_assignment[m]
    before = len(driver.log)

    response = driver.ok(beat(b, -1))

    assert response.member_epoch == -1
    records = driver.log[before:]
    # Members in the group's order (Kafka's test compares each pair unordered).
    assert records[:-1] == [
        helpers.current_assignment_tombstone(GROUP, b),
        helpers.current_assignment_tombstone(GROUP, m),
        helpers.target_assignment_tombstone(GROUP, b),
        helpers.target_assignment_tombstone(GROUP, m),
        helpers.target_assignment_epoch_tombstone(GROUP),
        helpers.member_subscription_tombstone(GROUP, b),
        helpers.member_subscription_tombstone(GROUP, m),
        helpers.subscription_metadata_tombstone(GROUP),
        helpers.epoch_tombstone(GROUP),
    ]
    value = records[-1].value
    assert records[-1].key == GroupMetadataKey(GROUP)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == (
        "consumer", epoch, "range", m
    )
    [stored] = value.members
    assert (stored.member_id, stored.session_timeout_ms, stored.rebalance_timeout_ms) == (
        m, SESSION_MS, CLASSIC_REBALANCE_MS
    )
    names = {tid("foo"): "foo", tid("bar"): "bar"}
    assert decoded(stored.assignment) == {(names[t], p) for t, ps in m_partitions.items() for p in ps}
    # A classic group again, rebalancing: its member has a heartbeat, the group a join timer.
    assert GROUP not in driver.shard.consumer_groups
    classic = driver.shard.groups[GROUP]
    assert classic.is_(GroupState.PREPARING_REBALANCE)
    assert driver.shard.timers.get(("heartbeat", GROUP, m)) is not None
    assert driver.shard.timers.get(("join", GROUP)) is not None
    assert driver.shard.timers.get(("consumer-session", GROUP, m)) is None
    driver.assert_replay_equals_live()
    # The classic member rejoins and the classic rebalance completes.
    token = driver.submit(classic_join(m, "foo", "bar"))
    answer = driver.take(token)
    assert answer.error is Errors.NONE and answer.generation_id == epoch + 1 and answer.leader == m


def test_last_consumer_member_session_timeout_downgrades_the_group() -> None:
    driver = MixedDriver({"foo": 3, "bar": 2})
    m, _ = mixed_group(driver)
    for _ in range(4):
        driver.advance(SESSION_MS - 1_000)
        driver.heartbeat_classic(m, driver.shard.consumer_groups[GROUP].members[m].member_epoch)
    driver.advance(45_000 - 4 * (SESSION_MS - 1_000))
    assert GROUP not in driver.shard.consumer_groups
    assert driver.shard.groups[GROUP].is_(GroupState.PREPARING_REBALANCE)
    driver.assert_replay_equals_live()


def test_downgrade_disabled_by_policy_only_fences() -> None:
    driver = MixedDriver({"foo": 3, "bar": 2}, group_consumer_migration_policy="upgrade")
    m, b = mixed_group(driver)
    driver.ok(beat(b, -1))
    assert list(driver.shard.consumer_groups[GROUP].members) == [m]
    driver.assert_replay_equals_live()


def test_no_downgrade_when_the_group_exceeds_the_classic_max_size() -> None:
    driver = MixedDriver({"foo": 3, "bar": 2}, group_max_size=1)
    mixed_group(driver)
    driver.call(classic_join("", "foo"))
    driver.ok(beat("B", -1))
    assert len(driver.shard.consumer_groups[GROUP].members) == 2


def test_classic_static_member_replacing_the_last_consumer_member_downgrades() -> None:
    driver = MixedDriver({"foo": 2})
    driver.ok(join("S", "foo", instance_id="i1"))
    m = driver.call(classic_join("", "foo")).member_id
    group = driver.shard.consumer_groups[GROUP]
    s_owned = group.members["S"].assigned_partitions
    # S has not revoked what its target gives m: the classic group records what S owns (a departure:
    # Kafka records S's target, which would let m and the new member both own foo-1).
    assert s_owned[tid("foo")] == {0, 1} and group.target_assignment["S"][tid("foo")] == {0}
    before = len(driver.log)
    joined = driver.call(classic_join("", "foo", group_instance_id="i1"))
    assert joined.error is Errors.NONE
    new_id = joined.member_id
    records = driver.log[before:]
    # Kafka's replaceMember records, then the group's tombstones with the joining id, then the classic group.
    assert records[:3] == [
        helpers.current_assignment_tombstone(GROUP, "S"),
        helpers.target_assignment_tombstone(GROUP, "S"),
        helpers.member_subscription_tombstone(GROUP, "S"),
    ]
    assert records[-1].key == GroupMetadataKey(GROUP)
    assert helpers.current_assignment_tombstone(GROUP, new_id) in records
    classic = driver.shard.groups[GROUP]
    assert set(classic.members) == {m, new_id} and classic.is_(GroupState.STABLE)
    assert decoded(classic.members[new_id].assignment) == {("foo", 0), ("foo", 1)}
    assert decoded(classic.members[m].assignment) == set()
    driver.assert_replay_equals_live()


def test_round_trip_classic_consumer_classic_consumer() -> None:
    driver = MixedDriver({"foo": 4})
    driver.classic_group(
        ("m1", ("foo",), (("foo", 0), ("foo", 1))), ("m2", ("foo",), (("foo", 2), ("foo", 3)))
    )
    driver.ok(join("A", "foo"))
    driver.ok(beat("A", -1))
    assert GROUP not in driver.shard.consumer_groups
    ids = list(driver.shard.groups[GROUP].members)
    tokens = [driver.submit(classic_join(member_id, "foo")) for member_id in ids]
    responses = [driver.take(token) for token in tokens]
    generation = responses[0].generation_id
    leader = responses[0].leader
    assignments = (
        (ids[0], assignment(("foo", 0), ("foo", 1))), (ids[1], assignment(("foo", 2), ("foo", 3)))
    )
    sync = [
        driver.submit(
            SyncGroupRequest(
                GROUP, generation, member_id, assignments=assignments if member_id == leader else ()
            )
        )
        for member_id in ids
    ]
    assert all(driver.take(token).error is Errors.NONE for token in sync)
    driver.assert_replay_equals_live()
    # And up again: the offsets-holding classic entry never got in the way.
    driver.ok(join("A", "foo"))
    assert set(driver.shard.consumer_groups[GROUP].members) == {*ids, "A"}
    assert_no_double_owner(driver)
    driver.assert_replay_equals_live()


def test_classic_member_commits_with_its_epoch_and_keeps_its_timers_after_a_load() -> None:
    driver = MixedDriver({"foo": 2})
    consumer_group_with(driver, "A")
    m = driver.call(classic_join("", "foo")).member_id
    epoch = driver.shard.consumer_groups[GROUP].members[m].member_epoch

    def commit(generation: int) -> Errors:
        request = OffsetCommitRequest(
            GROUP, (OffsetCommitPartition("foo", 0, 7),), generation_id=generation, member_id=m
        )
        return driver.call(request).errors()[("foo", 0)]

    assert commit(epoch) is Errors.NONE
    assert commit(epoch + 1) is Errors.ILLEGAL_GENERATION  # not STALE_MEMBER_EPOCH: a classic member
    loaded = driver.replayed()
    loaded.on_loaded(driver.now)
    assert loaded.timers.get(("consumer-session", GROUP, m)).deadline_ms == driver.now + SESSION_MS
    assert loaded.timers.get(("consumer-session", GROUP, "A")).deadline_ms == driver.now + 45_000


def test_list_groups_shows_one_group_of_the_type_it_has_become() -> None:
    driver = MixedDriver({"foo": 3, "bar": 2})

    def listed() -> list[tuple[str, str, str]]:
        response = driver.call(ListGroupsRequest())
        return [(g.group_id, g.group_type, g.state) for g in response.groups]

    m, b = mixed_group(driver)
    epoch = driver.shard.consumer_groups[GROUP].members[m].member_epoch
    offsets = (OffsetCommitPartition("foo", 0, 1),)
    commit = OffsetCommitRequest(GROUP, offsets, generation_id=epoch, member_id=m)
    assert driver.call(commit).errors() == {("foo", 0): Errors.NONE}
    assert driver.shard.groups[GROUP].offsets  # the offsets holder is not listed
    assert listed() == [(GROUP, "consumer", "Stable")]
    driver.ok(beat(b, -1))
    assert listed() == [(GROUP, "classic", "PreparingRebalance")]
    driver.ok(join("C", "foo"))
    assert listed() == [(GROUP, "consumer", "Reconciling")]
    assert len(driver.shard.groups[GROUP].offsets) == 1
    driver.assert_replay_equals_live()


def test_classic_static_replacement_with_another_subscription_rebalances() -> None:
    """KAFKA-19546: the downgraded group rebalances when the replacing member subscribes to other topics."""
    driver = MixedDriver({"foo": 2, "bar": 1})
    driver.ok(join("S", "foo", instance_id="i1"))
    driver.call(classic_join("", "foo"))
    joined = driver.call(classic_join("", "foo", "bar", group_instance_id="i1"))
    assert joined.error is Errors.NONE
    assert driver.shard.groups[GROUP].is_(GroupState.PREPARING_REBALANCE)
    driver.assert_replay_equals_live()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_new_dynamic_classic_member_joins_and_syncs_at_its_protocol_version(version: int) -> None:
    """Kafka's testJoiningConsumerGroupWithNewDynamicMember and
    testClassicGroupSyncToConsumerGroupWithAllConsumerProtocolVersions."""
    driver = MixedDriver({"foo": 2, "bar": 1})
    a = driver.ok(join("A", "foo"))
    driver.ok(beat("A", a.member_epoch, tuple(a.assignment or ())))
    metadata = subscription("foo", "bar", version=version)
    request = JoinGroupRequest(GROUP, SESSION_MS, CLASSIC_REBALANCE_MS, "consumer", (("range", metadata),))
    required = driver.call(request)
    assert required.error is Errors.MEMBER_ID_REQUIRED and driver.log[-1].key != GroupMetadataKey(GROUP)
    before = len(driver.log)
    joined = driver.call(dataclasses.replace(request, member_id=required.member_id))
    member = driver.shard.consumer_groups[GROUP].members[required.member_id]
    assert joined == JoinGroupResponse(Errors.NONE, member.member_id, 2, "consumer", "range")
    assert member.classic_member_metadata == ClassicMemberMetadata(
        SESSION_MS, (ClassicProtocol("range", metadata),)
    )
    records = driver.log[before:]
    topics = driver.shard.topics
    # A keeps its target (foo): only the changed target is written.
    assert records == [
        helpers.member_subscription_record(GROUP, member),
        helpers.subscription_metadata_record(GROUP, {"bar": topics["bar"], "foo": topics["foo"]}),
        helpers.epoch_record(GROUP, 2),
        helpers.target_assignment_record(GROUP, member.member_id, {tid("bar"): frozenset({0})}),
        helpers.target_assignment_epoch_record(GROUP, 2),
        helpers.current_assignment_record(GROUP, member),
    ]
    # bar was free: the member owns it at once, at the group epoch.
    assert member.state is MemberState.STABLE and member.assigned_partitions == {tid("bar"): {0}}
    synced = driver.sync(member.member_id, 2, protocol_type="consumer", protocol_name="range")
    assert synced.assignment[:2] == version.to_bytes(2, "big") and decoded(synced.assignment) == {("bar", 0)}
    assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")


def test_classic_static_member_upgrades_itself_by_heartbeating() -> None:
    """Kafka's testConsumerGroupHeartbeatFromExistingClassicStaticMember."""
    driver = MixedDriver({"foo": 6, "bar": 3})
    m, _ = mixed_group(driver, instance_id="i1")
    group = driver.shard.consumer_groups[GROUP]
    old, target = group.members[m], group.target_assignment_of(m)
    epoch = group.group_epoch
    assert old.is_reconciled_to(epoch)
    before = len(driver.log)
    request = dataclasses.replace(
        join("N", "foo", "bar", instance_id="i1", server_assignor="uniform"), rebalance_timeout_ms=5_000
    )
    response = driver.ok(request)
    replacing = dataclasses.replace(old, member_id="N", member_epoch=0, previous_member_epoch=0)
    final = dataclasses.replace(
        replacing, member_epoch=epoch, rebalance_timeout_ms=5_000, server_assignor_name="uniform",
        classic_member_metadata=None, client_id="", client_host="",
    )
    assert driver.log[before:] == [
        helpers.current_assignment_tombstone(GROUP, m),
        helpers.target_assignment_tombstone(GROUP, m),
        helpers.member_subscription_tombstone(GROUP, m),
        helpers.member_subscription_record(GROUP, replacing),
        helpers.target_assignment_record(GROUP, "N", target),
        helpers.current_assignment_record(GROUP, replacing),
        helpers.member_subscription_record(GROUP, final),
        helpers.current_assignment_record(GROUP, final),
    ]
    assert response.member_epoch == epoch
    assert driver.shard.timers.get(("consumer-session", GROUP, "N")).deadline_ms == driver.now + 45_000
    driver.assert_replay_equals_live()
