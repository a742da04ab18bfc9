"""The `range` server-side assignor: contiguous ranges, co-partitioned where possible.

Follows Kafka's `assignor/RangeAssignor.java` at apache/kafka 1eb7644349cb
(2024-10-25), the KAFKA-16944 rewrite, unchanged through Kafka 4.3.
Members sort static first by instance id, then dynamic by member id (Java
`String.compareTo`); each topic's partitions are cut in that order into ranges
of `count // subscribers`, the first `count % subscribers` subscribers taking
one more. With the same topics and partition counts for everyone, each member
gets the same partition numbers of every topic.

This version is not sticky: the assignment depends only on the sorted members,
their subscriptions and the partition counts (static members keep theirs
across restarts through their instance ids). The older sticky range assignor
that `kip848-notes.md` section 4 describes was replaced by this rewrite.
Departures: none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from coordinator.consumer.assignors.java_order import java_string_key
from coordinator.consumer.assignors.spec import (
    Assignment,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    SubscriptionType,
    TopicMetadata,
)

RANGE_ASSIGNOR_NAME = "range"


@dataclass(slots=True)
class _TopicRanges:
    """Kafka's private `RangeAssignor.TopicMetadata`: where the next range of one topic starts."""

    topic_id: UUID
    partition_count: int
    subscribers: int
    minimum_quota: int = -1
    extra: int = -1
    next_start: int = 0

    def next_range(self) -> range:
        if self.minimum_quota == -1:
            self.minimum_quota, self.extra = divmod(self.partition_count, self.subscribers)
        quota = self.minimum_quota
        if self.extra > 0:
            quota += 1
            self.extra -= 1
        start = self.next_start
        end = min(start + quota, self.partition_count)
        self.next_start = end
        return range(start, end)


def member_sort_key(member: MemberSpec) -> tuple[int, bytes]:
    """Kafka's `sortMemberIds`: static members first by instance id, then dynamic ones by member id."""
    if member.instance_id is not None:
        return 0, java_string_key(member.instance_id)
    return 1, java_string_key(member.member_id)


def _count(topics: Mapping[UUID, TopicMetadata], topic_id: UUID) -> int:
    metadata = topics.get(topic_id)
    if metadata is None:
        raise PartitionAssignorError("Member is subscribed to a non-existent topic")
    return metadata.partition_count


class RangeAssignor:
    """Kafka's server-side `RangeAssignor`."""

    @property
    def name(self) -> str:
        return RANGE_ASSIGNOR_NAME

    def assign(self, group: GroupSpec, topics: Mapping[UUID, TopicMetadata]) -> GroupAssignment:
        if not group.members:
            return GroupAssignment({})
        members = sorted(group.members, key=member_sort_key)
        ranges: dict[UUID, _TopicRanges] = {}
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            for topic_id in members[0].subscribed_topic_ids:
                ranges[topic_id] = _TopicRanges(topic_id, _count(topics, topic_id), len(group.members))
        else:
            for member in members:
                for topic_id in member.subscribed_topic_ids:
                    if topic_id not in ranges:
                        ranges[topic_id] = _TopicRanges(topic_id, _count(topics, topic_id), 0)
                    ranges[topic_id].subscribers += 1
        homogeneous_topics = list(ranges) if group.subscription_type is SubscriptionType.HOMOGENEOUS else None
        assignments: dict[str, Assignment] = {}
        for member in members:
            assignment: dict[UUID, frozenset[int]] = {}
            subscribed = homogeneous_topics if homogeneous_topics is not None else member.subscribed_topic_ids
            for topic_id in subscribed:
                cut = ranges[topic_id].next_range()
                if cut:
                    assignment[topic_id] = frozenset(cut)
            assignments[member.member_id] = assignment
        return GroupAssignment(assignments)
