"""Loading is replaying: a consumer group record applied to the groups of a partition.

Kafka's consumer group `replay(key, value)` methods of `GroupMetadataManager.java`
(with `getOrMaybeCreatePersistedConsumerGroup`), of the Kafka 4.0 line:
apache/kafka 1eb7644349cb (2024-10-25) for key versions 3-8 and Kafka 4.0's
replay of ConsumerGroupRegularExpression (16). `replay(groups, record)`
changes `groups`, the partition's consumer groups by id, only through the
`ConsumerGroup` methods Kafka's replay calls. Rules, as Kafka:
- A value creates its group, and a member record its member.
- A tombstone of an unknown group, or of an unknown member, does nothing.
- A CurrentMemberAssignment tombstone leaves the member at epoch -1 owning
  nothing; a MemberMetadata tombstone then removes it, but only once its
  target is gone; a TargetAssignmentMetadata tombstone sets the target epoch
  to -1, only once no member has a target; a ConsumerGroupMetadata tombstone
  removes the group, only once it has no member, no target and epoch -1.
  Records out of that order raise `IllegalGroupState`: a broken invariant,
  the shard reloads (Kafka fails the load).
Departures: Kafka's `groupsByTopics` index, and replacing a simple classic
group of the same id (or refusing another group type), belong to the shard
that holds both group types and calls this.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from coordinator.consumer.assignors.spec import TopicMetadata
from coordinator.consumer.group import ConsumerGroup, IllegalGroupState, ResolvedRegularExpression
from coordinator.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroupMember,
    assignment_from_topic_partitions,
)
from coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    Record,
)

Groups = MutableMapping[str, ConsumerGroup]


def replay(groups: Groups, record: Record) -> None:
    """Apply one consumer group record to `groups`, as Kafka's `GroupMetadataManager.replay`."""
    apply = _REPLAY.get(type(record.key))
    if apply is None:
        raise TypeError(f"not a consumer group record key: {record.key!r}")
    apply(groups, record.key, record.value)


def _group(groups: Groups, group_id: str, create: bool) -> ConsumerGroup | None:
    """Kafka's `getOrMaybeCreatePersistedConsumerGroup`; None where Kafka ignores a tombstone."""
    return _created(groups, group_id) if create else groups.get(group_id)


def _created(groups: Groups, group_id: str) -> ConsumerGroup:
    group = groups.get(group_id)
    if group is None:
        group = groups[group_id] = ConsumerGroup(group_id)
    return group


def _replay_group_metadata(groups: Groups, key: ConsumerGroupMetadataKey, value: Any) -> None:
    if isinstance(value, ConsumerGroupMetadataValue):
        _created(groups, key.group_id).set_group_epoch(value.epoch)
        return
    group = groups.get(key.group_id)
    if group is None:
        return
    if group.members:
        raise IllegalGroupState(
            f"Received a tombstone record to delete group {key.group_id} but the group still has "
            f"{len(group.members)} members."
        )
    if group.target_assignment:
        raise IllegalGroupState(
            f"Received a tombstone record to delete group {key.group_id} but the target assignment "
            f"still has {len(group.target_assignment)} members."
        )
    if group.assignment_epoch != -1:
        raise IllegalGroupState(
            f"Received a tombstone record to delete group {key.group_id} but did not receive "
            "ConsumerGroupTargetAssignmentMetadataValue tombstone."
        )
    del groups[key.group_id]


def _replay_partition_metadata(groups: Groups, key: ConsumerGroupPartitionMetadataKey, value: Any) -> None:
    group = _group(groups, key.group_id, value is not None)
    if group is None:
        return
    metadata: dict[str, TopicMetadata] = {}
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        for topic in value.topics:
            metadata[topic.topic_name] = TopicMetadata(topic.topic_id, topic.topic_name, topic.num_partitions)
    group.set_subscription_metadata(metadata)


def _replay_member_metadata(groups: Groups, key: ConsumerGroupMemberMetadataKey, value: Any) -> None:
    group = _group(groups, key.group_id, value is not None)
    if group is None:
        return
    old = group.members.get(key.member_id)
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        group.update_member((old or ConsumerGroupMember(key.member_id)).with_metadata(value))
        return
    if old is None:
        return
    if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
        raise IllegalGroupState(
            f"Received a tombstone record to delete member {key.member_id} but did not receive "
            "ConsumerGroupCurrentMemberAssignmentValue tombstone."
        )
    if key.member_id in group.target_assignment:
        raise IllegalGroupState(
            f"Received a tombstone record to delete member {key.member_id} but did not receive "
            "ConsumerGroupTargetAssignmentMetadataValue tombstone."
        )
    group.remove_member(key.member_id)


def _replay_target_member(groups: Groups, key: ConsumerGroupTargetAssignmentMemberKey, value: Any) -> None:
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        assignment = assignment_from_topic_partitions(value.topic_partitions)
        _created(groups, key.group_id).update_target_assignment(key.member_id, assignment)
    elif (group := groups.get(key.group_id)) is not None:
        group.remove_target_assignment(key.member_id)


def _replay_target_metadata(
    groups: Groups, key: ConsumerGroupTargetAssignmentMetadataKey, value: Any
) -> None:
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        _created(groups, key.group_id).set_target_assignment_epoch(value.assignment_epoch)
        return
    group = groups.get(key.group_id)
    if group is None:
        return
    if group.target_assignment:
        raise IllegalGroupState(
            f"Received a tombstone record to delete target assignment of {key.group_id} but the "
            f"assignment still has {len(group.target_assignment)} members."
        )
    group.set_target_assignment_epoch(-1)


def _replay_current_assignment(
    groups: Groups, key: ConsumerGroupCurrentMemberAssignmentKey, value: Any
) -> None:
    if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        created = _created(groups, key.group_id)
        old = created.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
        created.update_member(old.with_current_assignment(value))
        return
    group = groups.get(key.group_id)
    member = None if group is None else group.members.get(key.member_id)
    if group is not None and member is not None:
        group.update_member(member.left())


def _replay_regular_expression(groups: Groups, key: ConsumerGroupRegularExpressionKey, value: Any) -> None:
    if isinstance(value, ConsumerGroupRegularExpressionValue):
        resolved = ResolvedRegularExpression(frozenset(value.topics), value.version, value.timestamp_ms)
        _created(groups, key.group_id).update_resolved_regular_expression(key.regular_expression, resolved)
    elif (group := groups.get(key.group_id)) is not None:
        group.remove_resolved_regular_expression(key.regular_expression)


_REPLAY: dict[type, Callable[[Groups, Any, Any], None]] = {
    ConsumerGroupMetadataKey: _replay_group_metadata,
    ConsumerGroupPartitionMetadataKey: _replay_partition_metadata,
    ConsumerGroupMemberMetadataKey: _replay_member_metadata,
    ConsumerGroupTargetAssignmentMetadataKey: _replay_target_metadata,
    ConsumerGroupTargetAssignmentMemberKey: _replay_target_member,
    ConsumerGroupCurrentMemberAssignmentKey: _replay_current_assignment,
    ConsumerGroupRegularExpressionKey: _replay_regular_expression,
}
