"""The uniform assignor for members with different subscriptions.

Follows Kafka's `assignor/UniformHeterogeneousAssignmentBuilder.java` at
apache/kafka 1eb7644349cb (2024-10-25; the KAFKA-17710 rework): balance first,
then stickiness.
1. Each member keeps the partitions of topics it still subscribes to.
2. Unassigned partitions go, topic by topic, to the topic's least loaded
   subscribers. Topics sort by partitions per subscriber (descending), then
   subscriber count (ascending), then topic id (`Uuid.compareTo`); members by
   assigned count, then position in `GroupSpec.members`.
3. Up to 16 passes over the topics with two or more subscribers move a
   subscriber's highest partitions to the least loaded subscribers until each
   topic's subscribers differ by at most one, stopping after a full pass with
   no move.
Departures: none; the member order is the caller's (`GroupSpec.members`).
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from coordinator.consumer.assignors.java_order import uuid_key
from coordinator.consumer.assignors.spec import Assignment, GroupSpec, TopicMetadata, partition_count

MAX_ITERATION_COUNT = 16
UNASSIGNED = -1


class _MemberBalancer:
    """Kafka's `MemberAssignmentBalancer`: the least and most loaded ranges of one topic's subscribers."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.sorted_members: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        """Resets for `members`; returns the spread of their sizes."""
        sizes = self.sizes
        self.sorted_members = sorted(members, key=lambda m: (sizes[m], m))
        first, last = self.sorted_members[0], self.sorted_members[-1]
        self.least_end = 0
        self.least_count = sizes[first] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(self.sorted_members)
        self.most_count = sizes[last] + 1
        self.next_most = len(self.sorted_members) - 1
        return sizes[last] - sizes[first]

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            self.least_count += 1
            while (
                self.least_end < len(self.sorted_members)
                and self.sizes[self.sorted_members[self.least_end]] == self.least_count
            ):
                self.least_end += 1
            self.next_least = 0
        member = self.sorted_members[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The next member to take a partition from, or -1 when none can give one."""
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = self.sizes[self.sorted_members[self.most_start - 1]]
            else:
                self.most_count -= 1
            while (
                self.most_start > 0
                and self.sizes[self.sorted_members[self.most_start - 1]] == self.most_count
            ):
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = self.sorted_members[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drops the member last returned by `next_most_loaded` from the most loaded range."""
        members = self.sorted_members
        position = self.next_most + 1
        members[position], members[self.most_end - 1] = members[self.most_end - 1], members[position]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _Builder:
    def __init__(self, group: GroupSpec, topics: Mapping[UUID, TopicMetadata]) -> None:
        self.members = group.members
        self.subscriptions = [frozenset(member.subscribed_topic_ids) for member in self.members]
        self.counts: dict[UUID, int] = {}
        self.subscribers: dict[UUID, list[int]] = {}
        for index, member in enumerate(self.members):
            for topic_id in member.subscribed_topic_ids:
                self.counts[topic_id] = partition_count(topics, topic_id)
                self.subscribers.setdefault(topic_id, []).append(index)
        self.sizes = [0] * len(self.members)
        self.owners = {topic_id: [UNASSIGNED] * count for topic_id, count in self.counts.items()}
        self.target: list[Assignment] = [member.assignment for member in self.members]
        self.editable: dict[int, dict[UUID, set[int]]] = {}

    def topic_order(self, topic_ids: list[UUID]) -> list[UUID]:
        def key(topic_id: UUID) -> tuple[float, int, tuple[int, int]]:
            subscribers = len(self.subscribers[topic_id])
            return -(self.counts[topic_id] / subscribers), subscribers, uuid_key(topic_id)

        return sorted(topic_ids, key=key)

    def revoke_unsubscribed(self) -> None:
        for index, member in enumerate(self.members):
            kept: dict[UUID, frozenset[int]] | None = None
            for topic_id, partitions in member.assignment.items():
                if topic_id in self.subscriptions[index]:
                    self.sizes[index] += len(partitions)
                    owners = self.owners[topic_id]
                    for partition in partitions:
                        owners[partition] = index
                else:
                    kept = dict(member.assignment) if kept is None else kept
                    del kept[topic_id]
            if kept is not None:
                self.target[index] = kept

    def assign_remaining(self) -> None:
        unassigned: dict[UUID, list[int]] = {}
        for topic_id, owners in self.owners.items():
            free = [p for p, owner in enumerate(owners) if owner == UNASSIGNED]
            if free:
                unassigned[topic_id] = free
        balancer = _MemberBalancer(self.sizes)
        for topic_id in self.topic_order(list(unassigned)):
            balancer.initialize(self.subscribers[topic_id])
            for partition in unassigned[topic_id]:
                self.move(topic_id, partition, balancer.next_least_loaded())

    def balance(self) -> None:
        movable = [topic_id for topic_id in self.owners if len(self.subscribers[topic_id]) >= 2]
        if not movable:
            return
        ordered = self.topic_order(movable)
        balancer = _MemberBalancer(self.sizes)
        last_rebalanced = -1
        for _ in range(MAX_ITERATION_COUNT):
            for index, topic_id in enumerate(ordered):
                if index == last_rebalanced:
                    return
                if self.balance_topic(topic_id, balancer) > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def balance_topic(self, topic_id: UUID, balancer: _MemberBalancer) -> int:
        """Kafka's `balanceTopic`: moves partitions from the most to the least loaded subscribers."""
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return 0
        owners = self.owners[topic_id]
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for position, partition in enumerate(partitions):
            start.setdefault(owners[partition], position)
            end[owners[partition]] = position + 1
        moved = 0
        while not balancer.is_balanced():
            donor = balancer.next_most_loaded()
            while donor != -1 and end.get(donor, 0) - start.get(donor, 0) <= 0:
                balancer.exclude_most_loaded()
                donor = balancer.next_most_loaded()
            if donor == -1:
                break
            end[donor] -= 1
            partition = partitions[end[donor]]
            receiver = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self.move(topic_id, partition, receiver)
            moved += 1
        return moved

    def _editable(self, index: int) -> dict[UUID, set[int]]:
        editable = self.editable.get(index)
        if editable is None:
            editable = {topic_id: set(ps) for topic_id, ps in self.target[index].items()}
            self.editable[index] = editable
        return editable

    def move(self, topic_id: UUID, partition: int, index: int) -> None:
        """Kafka's `assignPartition`: takes the partition from its owner, if any, and gives it to `index`."""
        owners = self.owners[topic_id]
        previous = owners[partition]
        if previous != UNASSIGNED:
            held = self._editable(previous).get(topic_id)
            if held is not None:
                held.discard(partition)
                if not held:
                    del self._editable(previous)[topic_id]
            self.sizes[previous] -= 1
        self._editable(index).setdefault(topic_id, set()).add(partition)
        owners[partition] = index
        self.sizes[index] += 1

    def result(self) -> dict[str, Assignment]:
        for index, editable in self.editable.items():
            self.target[index] = {topic_id: frozenset(ps) for topic_id, ps in editable.items()}
        return {member.member_id: self.target[i] for i, member in enumerate(self.members)}


def assign_heterogeneous(group: GroupSpec, topics: Mapping[UUID, TopicMetadata]) -> dict[str, Assignment]:
    """Kafka's `UniformHeterogeneousAssignmentBuilder.build()`."""
    builder = _Builder(group, topics)
    if not builder.owners:
        return {}
    builder.revoke_unsubscribed()
    builder.assign_remaining()
    builder.balance()
    return builder.result()
