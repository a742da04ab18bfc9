"""Building a consumer group's records: Kafka's record helpers for KIP-848.

Follows the consumer group half of Kafka's `GroupCoordinatorRecordHelpers.java`
and `ConsumerGroup.createGroupTombstoneRecords` / `createConsumerGroupRecords`,
of the Kafka 4.0 line: apache/kafka 1eb7644349cb (2024-10-25) for key
versions 3-8, Kafka 4.0 for the regular expression record (16) and the regex
tombstones of a deleted group. Each function is named after Kafka's without
its `newConsumerGroup` prefix (`member_subscription_record` is
`newConsumerGroupMemberSubscriptionRecord`).

Rules, as Kafka: a member's subscribed topic names, and a regex's topics, are
written sorted; a group is deleted by tombstones in the order replay accepts
(current assignments, target members, target epoch, member metadata, regexes,
subscription metadata, group epoch) and created from a converted classic
group in the order `createConsumerGroupRecords` gives. Departures: partitions
are written in ascending order and an assignment's topics in its mapping's
order (Kafka: its hash sets' and maps' iteration order); the deprecated rack
lists of the subscription metadata are written empty (Kafka 1eb7644349cb
writes none either).
"""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.consumer.assignors.spec import Assignment, TopicMetadata
from coordinator.consumer.group import ConsumerGroup, ResolvedRegularExpression
from coordinator.consumer.member import ConsumerGroupMember
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
    TopicMetadataRecord,
    TopicPartitions,
)


def to_topic_partitions(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    """An assignment as a record's topic partitions (Kafka's `toTopicPartitions`)."""
    return tuple(TopicPartitions(topic_id, tuple(sorted(parts))) for topic_id, parts in assignment.items())


def member_subscription_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """ConsumerGroupMemberMetadata (key version 5): the member's subscription and client."""
    value = ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor_name,
        classic_member_metadata=member.classic_member_metadata,
    )
    return Record(ConsumerGroupMemberMetadataKey(group_id, member.member_id), value)


def member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None)


def subscription_metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata]) -> Record:
    """ConsumerGroupPartitionMetadata (key version 4): the subscribed topics' ids and sizes."""
    topics = tuple(
        TopicMetadataRecord(topic.topic_id, topic.name, topic.partition_count) for topic in metadata.values()
    )
    return Record(ConsumerGroupPartitionMetadataKey(group_id), ConsumerGroupPartitionMetadataValue(topics))


def subscription_metadata_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupPartitionMetadataKey(group_id), None)


def epoch_record(group_id: str, group_epoch: int) -> Record:
    """ConsumerGroupMetadata (key version 3): the group epoch."""
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(group_epoch))


def epoch_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupMetadataKey(group_id), None)


def target_assignment_record(group_id: str, member_id: str, partitions: Assignment) -> Record:
    """ConsumerGroupTargetAssignmentMember (key version 7): one member's target."""
    value = ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(partitions))
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), value)


def target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)


def target_assignment_epoch_record(group_id: str, assignment_epoch: int) -> Record:
    """ConsumerGroupTargetAssignmentMetadata (key version 6): the epoch of the installed target."""
    value = ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch)
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id), value)


def target_assignment_epoch_tombstone(group_id: str) -> Record:
    return Record(ConsumerGroupTargetAssignmentMetadataKey(group_id), None)


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """ConsumerGroupCurrentMemberAssignment (key version 8): epochs, state and owned partitions."""
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member.member_epoch,
        member.previous_member_epoch,
        int(member.state),
        to_topic_partitions(member.assigned_partitions),
        to_topic_partitions(member.partitions_pending_revocation),
    )
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id), value)


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)


def regular_expression_record(group_id: str, regex: str, resolved: ResolvedRegularExpression) -> Record:
    """ConsumerGroupRegularExpression (key version 16): the topics a regex resolved to."""
    topics = tuple(sorted(resolved.topics))
    value = ConsumerGroupRegularExpressionValue(topics, resolved.version, resolved.timestamp_ms)
    return Record(ConsumerGroupRegularExpressionKey(group_id, regex), value)


def regular_expression_tombstone(group_id: str, regex: str) -> Record:
    return Record(ConsumerGroupRegularExpressionKey(group_id, regex), None)


def group_tombstone_records(
    group: ConsumerGroup, replaced: tuple[str, str] | None = None
) -> list[Record]:
    """Kafka's `createGroupTombstoneRecords`: every tombstone that deletes `group`, in replay's order.

    `replaced` = (leaving member id, joining member id) is Kafka's
    `createGroupTombstoneRecordsWithReplacedMember`: the joining member's
    tombstones are written in place of the leaving member's.
    """
    group_id = group.group_id
    member_ids = [
        replaced[1] if replaced is not None and member_id == replaced[0] else member_id
        for member_id in group.members
    ]
    records = [current_assignment_tombstone(group_id, member_id) for member_id in member_ids]
    records += [target_assignment_tombstone(group_id, member_id) for member_id in member_ids]
    records.append(target_assignment_epoch_tombstone(group_id))
    records += [member_subscription_tombstone(group_id, member_id) for member_id in member_ids]
    records += [regular_expression_tombstone(group_id, regex) for regex in group.resolved_regular_expressions]
    records.append(subscription_metadata_tombstone(group_id))
    records.append(epoch_tombstone(group_id))
    return records


def consumer_group_records(group: ConsumerGroup) -> list[Record]:
    """Kafka's `createConsumerGroupRecords`: the records that create `group` (a converted classic group).

    Members, the group epoch, every member's target, the target epoch (the
    group epoch, as Kafka writes it), then the members' current assignments.
    """
    group_id = group.group_id
    records = [member_subscription_record(group_id, member) for member in group.members.values()]
    records.append(epoch_record(group_id, group.group_epoch))
    records += [
        target_assignment_record(group_id, member_id, group.target_assignment_of(member_id))
        for member_id in group.members
    ]
    records.append(target_assignment_epoch_record(group_id, group.group_epoch))
    records += [current_assignment_record(group_id, member) for member in group.members.values()]
    return records
