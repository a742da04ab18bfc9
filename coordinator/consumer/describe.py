"""A consumer group as ConsumerGroupDescribe shows it.

Kafka's `ConsumerGroup.asDescribedGroup` and
`ConsumerGroupMember.asConsumerGroupDescribeMember` (apache/kafka, the 4.x
line): the group's state, epoch, target assignment epoch and assignor (the
one most members prefer, else the default); per member its epoch, ids, rack,
client, subscription (names and regex), current assignment, target
assignment and MemberType (0 classic, 1 consumer). Assignments name each
topic by id and by name; a topic the shard's topics do not know is left out,
as Kafka leaves out a topic missing from its metadata image.

Departure: Kafka lists members, topics, partitions and subscribed names in
its hash maps' order; these are sorted (members by id, topics by name), so
an answer does not depend on the order members joined.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from coordinator.consumer.assignors import DEFAULT_ASSIGNOR_NAME
from coordinator.consumer.assignors.spec import Assignment
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.errors import Errors
from coordinator.messages import (
    MEMBER_TYPE_CLASSIC,
    MEMBER_TYPE_CONSUMER,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedTopicPartitions,
)


def describe_consumer_group(
    group: ConsumerGroup, topic_names: Mapping[UUID, str], default_assignor: str = DEFAULT_ASSIGNOR_NAME
) -> DescribedConsumerGroup:
    """Kafka's `asDescribedGroup`; `topic_names` maps the known topics' ids to their names."""
    members = tuple(
        describe_member(group.members[member_id], group.target_assignment_of(member_id), topic_names)
        for member_id in sorted(group.members)
    )
    return DescribedConsumerGroup(
        Errors.NONE,
        group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_server_assignor() or default_assignor,
        members=members,
    )


def describe_member(
    member: ConsumerGroupMember, target: Assignment, topic_names: Mapping[UUID, str]
) -> DescribedConsumerGroupMember:
    """Kafka's `asConsumerGroupDescribeMember`."""
    return DescribedConsumerGroupMember(
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        subscribed_topic_regex=member.subscribed_topic_regex_or_none,
        assignment=described_partitions(member.assigned_partitions, topic_names),
        target_assignment=described_partitions(target, topic_names),
        member_type=MEMBER_TYPE_CLASSIC if member.use_classic_protocol else MEMBER_TYPE_CONSUMER,
    )


def described_partitions(
    assignment: Assignment, topic_names: Mapping[UUID, str]
) -> tuple[DescribedTopicPartitions, ...]:
    """Kafka's `topicPartitionsFromMap`: the known topics of an assignment, sorted by name."""
    described = [
        DescribedTopicPartitions(topic_id, topic_names[topic_id], tuple(sorted(partitions)))
        for topic_id, partitions in assignment.items()
        if topic_id in topic_names
    ]
    return tuple(sorted(described, key=lambda entry: (entry.topic_name, entry.topic_id)))


def group_not_found(group_id: str) -> DescribedConsumerGroup:
    return DescribedConsumerGroup(Errors.GROUP_ID_NOT_FOUND, group_id, f"Group {group_id} not found.")


def not_a_consumer_group(group_id: str) -> DescribedConsumerGroup:
    return DescribedConsumerGroup(
        Errors.GROUP_ID_NOT_FOUND, group_id, f"Group {group_id} is not a consumer group."
    )
