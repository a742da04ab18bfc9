"""The `uniform` server-side assignor (Kafka's default) and its homogeneous builder.

Follows Kafka's `assignor/UniformAssignor.java` and
`assignor/UniformHomogeneousAssignmentBuilder.java` at apache/kafka
1eb7644349cb (2024-10-25). Balance first (member sizes differ by at most
one), then stickiness (a member keeps what it has, up to its quota).

Homogeneous (every member subscribes to the same topics):
1. Quotas: `total // members`, one more for the first `total % members` members
   in `GroupSpec.members` order.
2. Unassigned: the partitions of each subscribed topic, topics in Java
   `HashSet` order, that no member holds.
3. Each member keeps its partitions up to its quota, in the order of its
   assignment map and of Java's `HashSet<Integer>`; the rest, and any topic it
   no longer subscribes to, is revoked (revoked partitions queue after the
   unassigned ones).
4. Members under quota, in order, take the queue in order.

Heterogeneous subscriptions go to `uniform_heterogeneous`. Departures: none in
the algorithm; Java orders come from `java_order` (see there for its limits).
Kafka's rack awareness is not in this version of the builders either.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from coordinator.consumer.assignors.java_order import partition_set_order, topic_set_order
from coordinator.consumer.assignors.spec import (
    Assignment,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    SubscriptionType,
    TopicMetadata,
    partition_count,
)
from coordinator.consumer.assignors.uniform_heterogeneous import assign_heterogeneous

UNIFORM_ASSIGNOR_NAME = "uniform"

TopicPartition = tuple[UUID, int]


class UniformAssignor:
    """Kafka's `UniformAssignor`: homogeneous or heterogeneous builder by subscription type."""

    @property
    def name(self) -> str:
        return UNIFORM_ASSIGNOR_NAME

    def assign(self, group: GroupSpec, topics: Mapping[UUID, TopicMetadata]) -> GroupAssignment:
        if not group.members:
            return GroupAssignment({})
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            return GroupAssignment(assign_homogeneous(group, topics))
        return GroupAssignment(assign_heterogeneous(group, topics))


def assign_homogeneous(group: GroupSpec, topics: Mapping[UUID, TopicMetadata]) -> dict[str, Assignment]:
    """Kafka's `UniformHomogeneousAssignmentBuilder.build()`."""
    subscribed = topic_set_order(group.members[0].subscribed_topic_ids)
    if not subscribed:
        return {}
    assigned = group.assigned_partitions()
    unassigned: list[TopicPartition] = []
    total = 0
    for topic_id in subscribed:
        count = partition_count(topics, topic_id)
        taken = assigned.get(topic_id, set())
        unassigned.extend((topic_id, p) for p in range(count) if p not in taken)
        total += count

    minimum_quota, extra = divmod(total, len(group.members))
    subscribed_set = frozenset(subscribed)
    target: dict[str, Assignment] = {}
    unfilled: list[tuple[str, int]] = []
    for member in group.members:
        quota = minimum_quota + (1 if extra > 0 else 0)
        extra = max(extra - 1, 0)
        kept, remaining, revoked = _keep_up_to_quota(member, subscribed_set, quota)
        unassigned.extend(revoked)
        target[member.member_id] = kept
        if remaining > 0:
            unfilled.append((member.member_id, remaining))

    _assign_remaining(target, unfilled, unassigned)
    return target


def _keep_up_to_quota(
    member: MemberSpec, subscribed: frozenset[UUID], quota: int
) -> tuple[Assignment, int, list[TopicPartition]]:
    """The member's kept assignment (its own mapping when untouched), its remaining quota, what it loses."""
    changed: dict[UUID, frozenset[int]] | None = None
    revoked: list[TopicPartition] = []
    for topic_id, partitions in member.assignment.items():
        if topic_id not in subscribed:
            changed = dict(member.assignment) if changed is None else changed
            del changed[topic_id]
        elif len(partitions) <= quota:
            quota -= len(partitions)
        else:
            ordered = partition_set_order(partitions)
            kept, lost = ordered[:quota], ordered[quota:]
            quota = 0
            changed = dict(member.assignment) if changed is None else changed
            if kept:
                changed[topic_id] = frozenset(kept)
            else:
                del changed[topic_id]
            revoked.extend((topic_id, p) for p in lost)
    return (member.assignment if changed is None else changed), quota, revoked


def _assign_remaining(
    target: dict[str, Assignment], unfilled: list[tuple[str, int]], unassigned: list[TopicPartition]
) -> None:
    """Kafka's `assignRemainingPartitions`: members under quota take the queue in order."""
    index = 0
    for member_id, quota in unfilled:
        if index >= len(unassigned):
            break
        taken = unassigned[index : index + quota]
        index += len(taken)
        grown: dict[UUID, set[int]] = {topic_id: set(ps) for topic_id, ps in target[member_id].items()}
        for topic_id, partition in taken:
            grown.setdefault(topic_id, set()).add(partition)
        target[member_id] = {topic_id: frozenset(ps) for topic_id, ps in grown.items()}
    if index < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
