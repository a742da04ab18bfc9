"""Classic-protocol members inside a consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Follows `GroupMetadataManager.java` at apache/kafka 1eb7644349cb (2024-10-25):
`classicGroupJoinToConsumerGroup`, `classicGroupSyncToConsumerGroup`,
`classicGroupHeartbeatToConsumerGroup`, `classicGroupLeaveToConsumerGroup`,
`throwIfClassicProtocolIsNotSupported`, `throwIfRebalanceInProgress`,
`validateConsumerGroupMember` and `prepareAssignment`.

Rules, as Kafka:
- JoinGroup: GROUP_MAX_SIZE_REACHED for a new member of a full group;
  INCONSISTENT_GROUP_PROTOCOL unless the protocol type is "consumer" and one
  of the member's protocols is supported by every classic member; a dynamic
  member without an id (JoinGroup v4+) gets MEMBER_ID_REQUIRED and a new id
  (no pending member is kept: the next JoinGroup with it creates the member).
  The member's subscription (topics, rack, owned partitions) comes from the
  ConsumerProtocol bytes of its first protocol; its session timeout and
  protocols are stored as ClassicMemberMetadata. Then the heartbeat's steps:
  a changed subscription bumps the group epoch, the server assignor computes
  the target, and the member is reconciled with its owned partitions. The
  JoinGroup is answered at once: generation = the member epoch, protocol type
  "consumer", protocol name = the member's first protocol, no leader, no
  members (the client is a follower and sends an empty SyncGroup). Its join
  timer stops; its session timer (its own session timeout) and a sync timer
  (its rebalance timeout) start. A static member with a new id replaces the
  member holding its instance id (no UNRELEASED_INSTANCE_ID for classic
  members); if that was the last consumer-protocol member, the group is
  downgraded (`migration.py`; a rebalance starts if the subscription changed,
  KAFKA-19546).
- SyncGroup, Heartbeat: UNKNOWN_MEMBER_ID for an unknown member or one not
  using the classic protocol, FENCED_INSTANCE_ID for an instance id held by
  another member, ILLEGAL_GENERATION unless the generation is the member
  epoch. SyncGroup: INCONSISTENT_GROUP_PROTOCOL for another protocol type or
  name; REBALANCE_IN_PROGRESS when the group epoch is ahead of the member's
  (unless it is revoking); else its assigned partitions, encoded at its
  subscription's ConsumerProtocol version, with the request's protocol type
  and name. Heartbeat: re-arms the session timer; REBALANCE_IN_PROGRESS when
  the member must rejoin (the group epoch is ahead of its epoch, it has
  partitions to revoke, or the partitions it waits for are free). Both arm
  the join timer (if not armed) when they ask the member to rejoin.
- LeaveGroup: each member (by member id, or by instance id, a missing member
  id being an administrative removal) is removed with its three tombstones
  and its timers stop; then the subscription metadata if it changed, and the
  group epoch + 1. Errors are per member (UNKNOWN_MEMBER_ID,
  FENCED_INSTANCE_ID). A classic leave never downgrades the group.

Departures:
- A subscription that does not decode answers INCONSISTENT_GROUP_PROTOCOL
  (Kafka throws IllegalStateException, an unknown server error): bad client
  bytes must not fail the shard.
- When a LeaveGroup empties the group, the target epoch is written too
  (KAFKA-20442, as `fencing.py` does for a leave heartbeat).
- The encoded assignment lists topics by name and partitions ascending
  (Kafka: its hash maps' order).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from coordinator.classic.group import CONSUMER_PROTOCOL_TYPE
from coordinator.consumer import fencing, migration
from coordinator.consumer import records as helpers
from coordinator.consumer.fencing import HeartbeatError
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.heartbeat import (
    HeartbeatStep,
    kafka_uuid_string,
    known_static_member,
    unknown_member,
)
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.reconciliation import MemberState
from coordinator.consumer.subscriptions import subscription_metadata
from coordinator.consumer_protocol import Subscription, decode_subscription
from coordinator.errors import Errors
from coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    ConsumerGroupTopicPartitions,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberLeaveResult,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.records import Record

if TYPE_CHECKING:
    from coordinator.shard import Shard


# ---------------------------------------------------------------- JoinGroup


def handle_join_group(shard: Shard, group: ConsumerGroup, request: JoinGroupRequest) -> JoinGroupResponse:
    """Kafka's `classicGroupJoinToConsumerGroup` (the request's checks of every JoinGroup are done)."""
    unknown = request.member_id == UNKNOWN_MEMBER_ID
    member_id = kafka_uuid_string(shard) if unknown else request.member_id
    try:
        _ClassicJoin.check_size(shard, group, member_id)
        names = {name for name, _ in request.protocols}
        if not supports_classic_protocols(group, request.protocol_type, names):
            raise HeartbeatError(
                Errors.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported."
            )
        if unknown and request.require_known_member_id and request.group_instance_id is None:
            return JoinGroupResponse(Errors.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except ValueError as exc:
            raise HeartbeatError(
                Errors.INCONSISTENT_GROUP_PROTOCOL, f"Malformed embedded consumer protocol: {exc}"
            ) from exc
        return _ClassicJoin(shard, group, request, unknown, subscription).run(member_id)
    except HeartbeatError as exc:
        return JoinGroupResponse(exc.error, request.member_id)


def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """Kafka's `ConsumerGroup.supportsClassicProtocols`."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    if group.is_empty():
        return bool(names)
    supported = group.classic_protocol_members_supported_protocols
    return any(supported.get(name, 0) == group.num_classic_protocol_members for name in names)


class _ClassicJoin(HeartbeatStep):
    """A classic member's JoinGroup computed as a heartbeat: subscription, target, reconciliation."""

    may_defer_assignment = False  # its SyncGroup answers with the assignment

    def __init__(
        self,
        shard: Shard,
        group: ConsumerGroup,
        request: JoinGroupRequest,
        unknown: bool,
        subscription: Subscription,
    ) -> None:
        self.shard = shard
        self.join_request = request
        self.unknown = unknown
        self.subscription = subscription
        self.join = True
        self.group = group
        self.records: list[Record] = []
        self.upgraded = None
        self.replaced: ConsumerGroupMember | None = None
        self.new_regex_topics: frozenset[str] | None = None
        self.assigned = False
        self.owned = _owned_partitions(shard, subscription)

    @staticmethod
    def check_size(shard: Shard, group: ConsumerGroup, member_id: str) -> None:
        """Kafka's `throwIfConsumerGroupIsFull`."""
        max_size = shard.config.group_consumer_max_size
        if len(group.members) >= max_size and member_id not in group.members:
            raise HeartbeatError(
                Errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )

    def run(self, member_id: str) -> JoinGroupResponse:  # type: ignore[override]
        shard, group, request = self.shard, self.group, self.join_request
        member = self._member(member_id)
        updated = self._updated(member)
        reconciled = self.update_and_reconcile(member, updated)
        instance_id = request.group_instance_id
        existing = None if instance_id is None else group.static_members.get(instance_id)
        downgrade = existing is not None and migration.validate_online_downgrade_with_replaced_member(
            shard, group, existing
        )
        members = list(group.members.values())
        changed_subscription = False
        if downgrade:
            assert existing is not None
            self.records += migration.downgrade_records(shard, group, existing, reconciled)
            replaced = group.members[existing].subscribed_topic_names
            changed_subscription = replaced != reconciled.subscribed_topic_names
        self.write_records()
        fencing.cancel_join_timeout(shard, group.group_id, reconciled.member_id)
        if downgrade:
            assert existing is not None
            migration.after_downgrade(shard, group.group_id, members, reconciled, changed_subscription)
        else:
            fencing.schedule_session_timeout(
                shard, group.group_id, reconciled.member_id, request.session_timeout_ms
            )
            fencing.schedule_sync_timeout(
                shard, group.group_id, reconciled.member_id, request.rebalance_timeout_ms
            )
        return JoinGroupResponse(
            Errors.NONE,
            reconciled.member_id,
            reconciled.member_epoch,
            CONSUMER_PROTOCOL_TYPE,
            reconciled.supported_classic_protocols[0].name,
        )

    def _member(self, member_id: str) -> ConsumerGroupMember:
        """Kafka's `getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember` for a classic member."""
        group, instance_id = self.group, self.join_request.group_instance_id
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        if not self.unknown:
            return known_static_member(group, member_id, instance_id)
        existing = group.static_member(instance_id)
        if existing is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        new = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        self._replace_member(existing, new)
        return new

    def _updated(self, member: ConsumerGroupMember) -> ConsumerGroupMember:
        request, subscription = self.join_request, self.subscription
        changes: dict[str, object] = {
            "client_id": request.client_id,
            "client_host": request.client_host,
            "subscribed_topic_names": frozenset(subscription.topics),
            "classic_member_metadata": migration.classic_metadata(
                request.session_timeout_ms, request.protocols
            ),
        }
        if request.group_instance_id is not None:
            changes["instance_id"] = request.group_instance_id
        if subscription.rack_id is not None:
            changes["rack_id"] = subscription.rack_id
        if request.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
        return dataclasses.replace(member, **changes)  # type: ignore[arg-type]


def _owned_partitions(shard: Shard, subscription: Subscription) -> tuple[ConsumerGroupTopicPartitions, ...]:
    """The subscription's owned partitions by topic id; topics the shard does not know are dropped."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in subscription.owned_partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple(
        ConsumerGroupTopicPartitions(shard.topics[topic].topic_id, tuple(partitions))
        for topic, partitions in by_topic.items()
        if topic in shard.topics
    )


# ------------------------------------------------------- SyncGroup, Heartbeat


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """Kafka's `validateConsumerGroupMember` then `throwIfMemberDoesNotUseClassicProtocol`."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise unknown_member(group, member_id)
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise HeartbeatError(
                Errors.UNKNOWN_MEMBER_ID,
                f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
            )
        known_static_member(group, member_id, instance_id)
    if not member.use_classic_protocol:
        raise HeartbeatError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
        )
    return member


def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
    """Kafka's `throwIfGenerationIdUnmatched`."""
    if member.member_epoch != generation_id:
        raise HeartbeatError(
            Errors.ILLEGAL_GENERATION,
            f"The request generation id {generation_id} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}.",
        )


def handle_sync_group(shard: Shard, group: ConsumerGroup, request: SyncGroupRequest) -> SyncGroupResponse:
    """Kafka's `classicGroupSyncToConsumerGroup`."""
    if group.is_empty():
        return SyncGroupResponse(Errors.UNKNOWN_MEMBER_ID)
    try:
        member = _classic_member(group, request.member_id, request.group_instance_id)
        _check_generation(member, request.generation_id)
        protocol = member.supported_classic_protocols[0]
        if request.protocol_type is not None and request.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise HeartbeatError(Errors.INCONSISTENT_GROUP_PROTOCOL, "protocol type mismatch")
        if request.protocol_name is not None and request.protocol_name != protocol.name:
            raise HeartbeatError(Errors.INCONSISTENT_GROUP_PROTOCOL, "protocol name mismatch")
        # Kafka's `throwIfRebalanceInProgress`: a member not revoking must rejoin to catch up.
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            fencing.schedule_join_timeout_if_absent(shard, group.group_id, member)
            raise HeartbeatError(Errors.REBALANCE_IN_PROGRESS, "a new rebalance is triggered")
        assignment = migration.encode_member_assignment(shard, member.assigned_partitions, protocol.metadata)
    except HeartbeatError as exc:
        return SyncGroupResponse(exc.error)
    except ValueError:
        return SyncGroupResponse(Errors.UNKNOWN_SERVER_ERROR)
    fencing.cancel_sync_timeout(shard, group.group_id, member.member_id)
    fencing.schedule_session_timeout(
        shard, group.group_id, member.member_id, member.classic_protocol_session_timeout_ms
    )
    return SyncGroupResponse(Errors.NONE, assignment, request.protocol_type, request.protocol_name)


def handle_heartbeat(shard: Shard, group: ConsumerGroup, request: HeartbeatRequest) -> HeartbeatResponse:
    """Kafka's `classicGroupHeartbeatToConsumerGroup`."""
    try:
        member = _classic_member(group, request.member_id, request.group_instance_id)
        _check_generation(member, request.generation_id)
    except HeartbeatError as exc:
        return HeartbeatResponse(exc.error)
    group_id = group.group_id
    timeout_ms = member.classic_protocol_session_timeout_ms
    fencing.schedule_session_timeout(shard, group_id, member.member_id, timeout_ms)
    if (
        member.member_epoch < group.group_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (
            member.state is MemberState.UNRELEASED_PARTITIONS
            and not group.waiting_on_unreleased_partition(member)
        )
    ):
        fencing.schedule_join_timeout_if_absent(shard, group_id, member)
        return HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS)
    return HeartbeatResponse(Errors.NONE)


# --------------------------------------------------------------- LeaveGroup


def handle_leave_group(shard: Shard, group: ConsumerGroup, request: LeaveGroupRequest) -> LeaveGroupResponse:
    """Kafka's `classicGroupLeaveToConsumerGroup`."""
    group_id = group.group_id
    results: list[MemberLeaveResult] = []
    leaving: dict[str, ConsumerGroupMember] = {}
    records: list[Record] = []
    for identity in request.members:
        member_id, instance_id = identity.member_id, identity.group_instance_id
        try:
            if instance_id is None:
                member = _classic_member(group, member_id, None)
            else:
                static = group.static_member(instance_id)
                if static is None:
                    raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                member = static
                if member_id != UNKNOWN_MEMBER_ID:
                    # An empty member id is an administrative removal by instance id.
                    known_static_member(group, member_id, instance_id)
                if not member.use_classic_protocol:
                    raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID, "not a classic member")
                member_id = member.member_id
        except HeartbeatError as exc:
            results.append(MemberLeaveResult(member_id, instance_id, exc.error))
            continue
        records += [
            helpers.current_assignment_tombstone(group_id, member_id),
            helpers.target_assignment_tombstone(group_id, member_id),
            helpers.member_subscription_tombstone(group_id, member_id),
        ]
        fencing.cancel_member_timers(shard, group_id, member_id)
        results.append(MemberLeaveResult(member_id, instance_id, Errors.NONE))
        leaving[member_id] = member
    if records:
        counts = group.compute_subscribed_topic_names_without(list(leaving.values()))
        metadata = subscription_metadata(counts, shard.topics)
        if metadata != group.subscription_metadata:
            records.append(helpers.subscription_metadata_record(group_id, metadata))
        records.append(helpers.epoch_record(group_id, group.group_epoch + 1))
        if len(leaving) == len(group.members):
            # KAFKA-20442: the group is empty, the target epoch catches up with the group's.
            records.append(helpers.target_assignment_epoch_record(group_id, group.group_epoch + 1))
    for record in records:
        shard.write(record)
    return LeaveGroupResponse(Errors.NONE, tuple(results))
