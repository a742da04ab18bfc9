"""Online migration between the two group types: a classic group becomes a consumer group and back.

Follows `GroupMetadataManager.java` at apache/kafka 1eb7644349cb (2024-10-25):
`validateOnlineUpgrade`, `convertToConsumerGroup` (with
`ConsumerGroup.fromClassicGroup` and `createConsumerGroupRecords`),
`validateOnlineDowngradeWithFencedMember`,
`validateOnlineDowngradeWithReplacedMemberId` and `convertToClassicGroup`
(with `ClassicGroup.fromConsumerGroup` and `createClassicGroupRecords`).

Rules, as Kafka:
- Upgrade: the first ConsumerGroupHeartbeat (epoch 0) to a non-empty classic
  group converts it if `group_consumer_migration_policy` allows upgrades, the
  group's protocol type is "consumer" and it has at most
  `group_consumer_max_size` members; otherwise GROUP_ID_NOT_FOUND ("Group %s is
  not a consumer group"). Parked JoinGroup/SyncGroup requests of the classic
  group are answered REBALANCE_IN_PROGRESS. The records: the classic group's
  tombstone, then the consumer group's (members' metadata, group epoch, every
  member's target, target epoch, members' current assignments). The group
  epoch and the target epoch are the classic generation; every member is
  STABLE at it (previous epoch too), its subscription and its assignment
  decoded from the ConsumerProtocol bytes (topics unknown to the shard
  dropped), its session timeout and JoinGroup protocols kept as
  ClassicMemberMetadata. A subscription or assignment that does not decode
  answers GROUP_ID_NOT_FOUND ("... the embedded consumer protocol is
  malformed"), nothing written. Each converted member's session timer is its
  own session timeout.
- Downgrade: when the last member using the consumer protocol leaves or is
  fenced and at least one member (all classic) remains, if the policy allows
  downgrades and the remaining members fit `group_max_size`; or when a
  classic static member replaces the last consumer-protocol one (no rebalance
  then). The records: the consumer group's tombstones (the replaced member's
  under the joining member's id), then the classic GroupMetadata: Stable,
  generation = group epoch, protocol type "consumer", the protocol the members
  vote for, leader the first member, each member's assignment encoded at the
  version of its subscription metadata. The classic members'
  heartbeats are scheduled and, for a leave or a fence, a rebalance starts
  (PreparingRebalance: every member must rejoin).
Also from later Kafka: KAFKA-19546 (apache/kafka#20417, 4.0.2/4.1.1): a
static replacement whose subscription differs from the replaced member's
starts a rebalance too.

Departures:
- The classic group stores, as each member's assignment, the partitions the
  member owns in the consumer group (assigned and still pending revocation);
  Kafka stores its target assignment. A target may hold partitions that other
  members have not released yet, or not hold partitions the member still
  consumes: the classic group would then hand out (a Stable group answers a
  rejoin and SyncGroup with the stored assignment, as after a static
  member's replacement) or, upgraded again before its members rejoin, convert
  into a consumer group partitions two members own at once. The seeded mixed
  simulation found the second case (tests/consumer/test_mixed_simulation.py).
- Members are converted in the order the source group holds them (Kafka: its
  hash maps' order); an encoded assignment lists topics by name and partitions
  ascending (Kafka: its hash maps' order).
- A classic group without a selected protocol (a first rebalance in progress)
  does not convert (GROUP_ID_NOT_FOUND, as for a malformed one; Kafka 1eb7644349cb
  fails with NoSuchElementException). A classic leader's assignment giving one
  partition to two members does not convert either (Kafka fails with
  IllegalStateException): nothing is written.
- Downgrading cancels the consumer group's member timers (Kafka leaves them to
  fail their group-type check); upgrading cancels the classic timers (Kafka:
  the same). The classic group's committed offsets stay through both
  conversions (Kafka keeps offsets apart from groups; here the shard keeps a
  group's offsets on its classic `Group` entry, which a GroupMetadata
  tombstone leaves holding them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from uuid import UUID

from coordinator.classic import rebalance
from coordinator.classic.group import CONSUMER_PROTOCOL_TYPE, Group, Member
from coordinator.classic.state import GroupState
from coordinator.consumer import fencing
from coordinator.consumer import records as helpers
from coordinator.consumer.group import ConsumerGroup, IllegalGroupState
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.reconciliation import MemberState
from coordinator.consumer.replay import replay as replay_consumer_record
from coordinator.consumer_protocol import (
    ASSIGNMENT_VERSION_MAX,
    Assignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from coordinator.errors import Errors
from coordinator.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    GroupMetadataKey,
    GroupMetadataValue,
    Record,
)
from coordinator.topic_partition import TopicPartition

if TYPE_CHECKING:
    from coordinator.shard import Shard


# ------------------------------------------------------------------ upgrade


def validate_online_upgrade(shard: Shard, classic: Group) -> bool:
    """Kafka's `validateOnlineUpgrade`."""
    return (
        shard.config.consumer_group_upgrade_enabled
        and classic.protocol_type == CONSUMER_PROTOCOL_TYPE
        and classic.size <= shard.config.group_consumer_max_size
    )


def convert_to_consumer_group(shard: Shard, classic: Group) -> tuple[list[Record], ConsumerGroup]:
    """Kafka's `convertToConsumerGroup`: the records of the conversion and the group they build.

    The group is not registered: it exists once the records are written.
    Raises fencing.HeartbeatError(GROUP_ID_NOT_FOUND) when the classic group cannot be read.
    """
    group_id = classic.group_id
    try:
        source = _from_classic_group(shard, classic)
    except (ValueError, KeyError, IllegalGroupState) as exc:
        raise fencing.HeartbeatError(
            Errors.GROUP_ID_NOT_FOUND,
            f"Cannot upgrade the classic group {group_id} to consumer group because the embedded "
            "consumer protocol is malformed.",
        ) from exc
    records = [Record(GroupMetadataKey(group_id), None), *helpers.consumer_group_records(source)]
    # The group the heartbeat reads is the one replaying its records builds.
    built: dict[str, ConsumerGroup] = {}
    for record in records[1:]:
        replay_consumer_record(built, record)
    return records, built[group_id]


def _from_classic_group(shard: Shard, classic: Group) -> ConsumerGroup:
    """Kafka's `ConsumerGroup.fromClassicGroup`."""
    protocol = classic.protocol_name
    if protocol is None:
        raise ValueError(f"classic group {classic.group_id} has no protocol selected")
    topic_ids = {name: topic.topic_id for name, topic in shard.topics.items()}
    generation = classic.generation_id
    group = ConsumerGroup(classic.group_id)
    group.set_group_epoch(generation)
    group.set_target_assignment_epoch(generation)
    for classic_member in classic.members.values():
        assignment = decode_assignment(classic_member.assignment)
        subscription = decode_subscription(classic_member.metadata(protocol))
        assigned: dict[UUID, set[int]] = {}
        for topic, partition in assignment.partitions:
            topic_id = topic_ids.get(topic)
            if topic_id is not None:
                assigned.setdefault(topic_id, set()).add(partition)
        partitions = {topic_id: frozenset(parts) for topic_id, parts in assigned.items()}
        member = ConsumerGroupMember(
            classic_member.member_id,
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            instance_id=classic_member.group_instance_id,
            rack_id=subscription.rack_id,
            rebalance_timeout_ms=classic_member.rebalance_timeout_ms,
            client_id=classic_member.client_id,
            client_host=classic_member.client_host,
            subscribed_topic_names=frozenset(subscription.topics),
            assigned_partitions=partitions,
            classic_member_metadata=classic_metadata(
                classic_member.session_timeout_ms, classic_member.protocols
            ),
        )
        group.update_target_assignment(member.member_id, partitions)
        group.update_member(member)
    return group


def classic_metadata(
    session_timeout_ms: int, protocols: tuple[tuple[str, bytes], ...]
) -> ClassicMemberMetadata:
    """ClassicMemberMetadata from a JoinGroup's session timeout and protocols."""
    return ClassicMemberMetadata(
        session_timeout_ms, tuple(ClassicProtocol(name, bytes(metadata)) for name, metadata in protocols)
    )


def retire_classic_group(shard: Shard, classic: Group) -> None:
    """Before its tombstone: the classic group's parked requests must rejoin (REBALANCE_IN_PROGRESS)."""
    for member in classic.members.values():
        rebalance.answer_parked(shard, member, Errors.REBALANCE_IN_PROGRESS)
        classic.set_join_token(member, None)


def schedule_converted_sessions(shard: Shard, group: ConsumerGroup) -> None:
    """After an upgrade: each converted member's session timer, at its own session timeout."""
    for member in group.members.values():
        fencing.schedule_session_timeout(
            shard, group.group_id, member.member_id, member.classic_protocol_session_timeout_ms
        )


# ---------------------------------------------------------------- downgrade


def validate_online_downgrade_with_fenced_member(shard: Shard, group: ConsumerGroup, member_id: str) -> bool:
    """Kafka's `validateOnlineDowngradeWithFencedMember`."""
    return (
        group.all_members_use_classic_protocol_except(member_id)
        and len(group.members) > 1
        and shard.config.consumer_group_downgrade_enabled
        and len(group.members) - 1 <= shard.config.group_max_size
    )


def validate_online_downgrade_with_replaced_member(
    shard: Shard, group: ConsumerGroup, replaced_member_id: str
) -> bool:
    """Kafka's `validateOnlineDowngradeWithReplacedMemberId`."""
    return (
        replaced_member_id in group.members
        and group.all_members_use_classic_protocol_except(replaced_member_id)
        and shard.config.consumer_group_downgrade_enabled
        and len(group.members) <= shard.config.group_max_size
    )


def downgrade_records(
    shard: Shard, group: ConsumerGroup, leaving_member_id: str, joining: ConsumerGroupMember | None
) -> list[Record]:
    """Kafka's `convertToClassicGroup` records: the consumer group's tombstones, then the classic group.

    Raises fencing.HeartbeatError(GROUP_ID_NOT_FOUND) when a member's protocol metadata cannot be read.
    """
    replaced = None if joining is None else (leaving_member_id, joining.member_id)
    records = helpers.group_tombstone_records(group, replaced)
    try:
        value = _classic_group_value(shard, group, leaving_member_id, joining)
    except ValueError as exc:
        raise fencing.HeartbeatError(
            Errors.GROUP_ID_NOT_FOUND, f"Cannot downgrade the classic group {group.group_id}: {exc}."
        ) from exc
    records.append(Record(GroupMetadataKey(group.group_id), value))
    return records


def _classic_group_value(
    shard: Shard, group: ConsumerGroup, leaving_member_id: str, joining: ConsumerGroupMember | None
) -> GroupMetadataValue:
    """Kafka's `ClassicGroup.fromConsumerGroup` then `createClassicGroupRecords`."""
    classic = Group(group.group_id, shard.now_ms)
    classic.generation_id = group.group_epoch
    members = [m for member_id, m in group.members.items() if member_id != leaving_member_id]
    if joining is not None:
        members.append(joining)
    for member in members:
        classic.add(_classic_member(member), None)
    classic.protocol_name = classic.select_protocol()
    names = {topic.topic_id: name for name, topic in shard.topics.items()}
    for classic_member in classic.members.values():
        source = classic_member.member_id
        if joining is not None and source == joining.member_id:
            # The joining static member takes the replaced member's assignment.
            source = leaving_member_id
        version = _protocol_version(classic_member.metadata(classic.protocol_name))
        classic_member.assignment = encode_assignment(
            Assignment(_topic_partitions(_owned(group.members[source]), names)), version
        )
    classic.state = GroupState.STABLE
    return classic.to_record_value()


def _owned(member: ConsumerGroupMember) -> dict[UUID, frozenset[int]]:
    """What the member may own: its assigned partitions and those it has not revoked yet."""
    owned = dict(member.assigned_partitions)
    for topic_id, partitions in member.partitions_pending_revocation.items():
        owned[topic_id] = owned.get(topic_id, frozenset()) | partitions
    return owned


def _classic_member(member: ConsumerGroupMember) -> Member:
    session_timeout_ms = member.classic_protocol_session_timeout_ms
    if session_timeout_ms is None:
        raise ValueError(f"member {member.member_id} does not use the classic protocol")
    return Member(
        member.member_id,
        member.instance_id,
        member.client_id,
        member.client_host,
        member.rebalance_timeout_ms,
        session_timeout_ms,
        CONSUMER_PROTOCOL_TYPE,
        classic_protocols(member),
    )


def classic_protocols(member: ConsumerGroupMember) -> tuple[tuple[str, bytes], ...]:
    """A classic member's JoinGroup protocols (Kafka's `supportedJoinGroupRequestProtocols`)."""
    return tuple((protocol.name, protocol.metadata) for protocol in member.supported_classic_protocols)


def _protocol_version(metadata: bytes) -> int:
    """Java's `ConsumerProtocol.deserializeVersion`; a version below 0 cannot be written."""
    if len(metadata) < 2:
        raise ValueError("Buffer underflow while parsing consumer protocol's header")
    version = int.from_bytes(metadata[:2], "big", signed=True)
    if version < 0:
        raise ValueError(f"Unsupported assignment version: {version}")
    return min(version, ASSIGNMENT_VERSION_MAX)


def encode_member_assignment(
    shard: Shard, partitions: Mapping[UUID, frozenset[int]], protocol_metadata: bytes
) -> bytes:
    """Partitions in ConsumerProtocol, at the subscription's version (Kafka's `prepareAssignment`)."""
    names = {topic.topic_id: name for name, topic in shard.topics.items()}
    version = _protocol_version(protocol_metadata)
    return encode_assignment(Assignment(_topic_partitions(partitions, names)), version)


def _topic_partitions(
    partitions: Mapping[UUID, frozenset[int]], names: Mapping[UUID, str]
) -> tuple[TopicPartition, ...]:
    """Kafka's `toConsumerProtocolAssignment`: topics the shard does not know are dropped."""
    named = sorted((names[topic_id], parts) for topic_id, parts in partitions.items() if topic_id in names)
    return tuple(TopicPartition(name, p) for name, parts in named for p in sorted(parts))


def after_downgrade(
    shard: Shard,
    group_id: str,
    members: list[ConsumerGroupMember],
    joining: ConsumerGroupMember | None,
    rebalance_anyway: bool = False,
) -> None:
    """Once the records are written: the classic group's members as Kafka holds them, their heartbeats,
    and a rebalance unless a static member replaced the leaving one (`rebalance_anyway`: it did, with
    another subscription, KAFKA-19546).

    `members` are the consumer group's members before the records were written.
    """
    if joining is not None:
        members = [*members, joining]
    for member in members:
        fencing.cancel_member_timers(shard, group_id, member.member_id)
    classic = shard.groups[group_id]
    sources = {member.member_id: member for member in members}
    for classic_member in classic.members.values():
        # The record keeps the chosen protocol only; the live member keeps all it sent (as Kafka).
        protocols = classic_protocols(sources[classic_member.member_id])
        rebalance_ms, session_ms = classic_member.rebalance_timeout_ms, classic_member.session_timeout_ms
        classic.update_member(classic_member, protocols, rebalance_ms, session_ms, None)
        rebalance.schedule_heartbeat(shard, classic, classic_member)
    if joining is None or rebalance_anyway:
        rebalance.prepare_rebalance(shard, classic)
