"""A consumer group's state, and replaying its records into it.

Follows Kafka's `modern/consumer/ConsumerGroup.java` and `modern/ModernGroup.java`
and the consumer group `replay(...)` methods of `GroupMetadataManager.java`, of
the Kafka 4.0 line: apache/kafka 1eb7644349cb (2024-10-25), plus what Kafka
4.0 added after it and this module carries: the resolved regular expressions
(ConsumerGroupRegularExpression records, `SubscriptionCount` by name and by
regex, the 4.0 `subscriptionType` rule) and KAFKA-19862's tolerant partition
epochs (apache/kafka#20907, in 4.0 as #21118).

The group holds what its records say (Kafka's "hard state"): the group epoch,
the target assignment epoch and target, the subscription metadata, the
resolved regexes and the members; and what Kafka derives from them on every
change: static members by instance id, server assignor counts, subscribed
topic names, members per regex, classic-protocol counts, the inverted target
and the partition epochs (the epoch of the member that owns each partition,
assigned or pending revocation: reconciliation hands a partition on only
when its epoch is gone). Its state is recomputed as Kafka's
`maybeUpdateGroupState`: EMPTY without members, ASSIGNING while the group
epoch is ahead of the target's, RECONCILING while a member is not STABLE at
the target epoch, else STABLE. Kafka never computes DEAD for a consumer group
(it describes a group that does not exist as Dead); neither does this.

The group changes only through the methods Kafka's replay calls
(`replay.py` applies the records with them); the heartbeat handler computes
new records from what it reads here. Departures: the subscription type is
computed when asked (Kafka caches it and does not refresh it when a resolved
regex changes); a tie between preferred assignors goes to the first counted
(Kafka: the first in its hash map's order); no metrics, no timeline
snapshots.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import Enum
from typing import NamedTuple
from uuid import UUID

from coordinator.consumer.assignors.spec import EMPTY_ASSIGNMENT, Assignment, SubscriptionType, TopicMetadata
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.reconciliation import NOT_OWNED, MemberState


class ConsumerGroupState(Enum):
    """Kafka's `ConsumerGroup.ConsumerGroupState`, valued by the name Kafka shows."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class IllegalGroupState(RuntimeError):
    """Kafka's IllegalStateException while replaying: a broken invariant, the shard must reload."""


class ResolvedRegularExpression(NamedTuple):
    """Kafka's `ResolvedRegularExpression`: the topics a regex matched, as its record holds them."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


class SubscriptionCount(NamedTuple):
    """Kafka's `SubscriptionCount`: members naming a topic, and resolved regexes matching it."""

    by_name: int
    by_regex: int


def _add_count(counts: dict[str, SubscriptionCount], topic: str, by_name: int, by_regex: int) -> None:
    """Kafka's inc/dec Name/Regex count: an entry goes when both counts reach zero."""
    old = counts.get(topic, SubscriptionCount(0, 0))
    new = SubscriptionCount(old.by_name + by_name, old.by_regex + by_regex)
    if new.by_name <= 0 and new.by_regex <= 0:
        counts.pop(topic, None)
    else:
        counts[topic] = new


def _add(counts: dict[str, int], key: str, delta: int) -> None:
    """Kafka's `Utils.incValue`/`decValue`: a count that reaches zero is removed."""
    value = counts.get(key, 0) + delta
    if value <= 0:
        counts.pop(key, None)
    else:
        counts[key] = value


class ConsumerGroup:
    """Kafka's `ConsumerGroup`: its hard state and everything derived from it."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.state = ConsumerGroupState.EMPTY
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.resolved_regular_expressions: dict[str, ResolvedRegularExpression] = {}
        # Derived from the above, as Kafka keeps them.
        self.static_members: dict[str, str] = {}
        self.server_assignors: dict[str, int] = {}
        self.subscribed_topic_names: dict[str, SubscriptionCount] = {}
        self.subscribed_regular_expressions: dict[str, int] = {}
        self.num_classic_protocol_members = 0
        self.classic_protocol_members_supported_protocols: dict[str, int] = {}
        self.inverted_target_assignment: dict[UUID, dict[int, str]] = {}
        self.partition_epochs: dict[UUID, dict[int, int]] = {}
        # The members not reconciled to the target epoch, kept as members change so that
        # the state is known without visiting every member (Kafka scans them on each change:
        # quadratic when 10,000 members join or a log of them is replayed).
        self.unreconciled_members: set[str] = set()

    # ----------------------------------------------------------- reading

    def is_empty(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def current_partition_epoch(self, topic_id: UUID, partition: int) -> int:
        """The epoch of the member owning the partition, or -1: `reconciliation.PartitionEpoch`."""
        return self.partition_epochs.get(topic_id, {}).get(partition, NOT_OWNED)

    def target_assignment_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, EMPTY_ASSIGNMENT)

    def target_assignment_for(self, member_id: str, instance_id: str | None) -> Assignment:
        """Kafka's `targetAssignment(memberId, instanceId)`: a static member's comes by instance id."""
        if instance_id is None:
            return self.target_assignment_of(member_id)
        previous = self.static_members.get(instance_id)
        return EMPTY_ASSIGNMENT if previous is None else self.target_assignment_of(previous)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = None if instance_id is None else self.static_members.get(instance_id)
        return None if member_id is None else self.members[member_id]

    def num_subscribed_members(self, regex: str) -> int:
        return self.subscribed_regular_expressions.get(regex, 0)

    def preferred_server_assignor(self) -> str | None:
        """The assignor most members name (Kafka: `max` over the counts; the first of a tie here)."""
        return max(self.server_assignors, key=self.server_assignors.__getitem__, default=None)

    def compute_preferred_server_assignor(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None
    ) -> str | None:
        """The preferred assignor were `old` replaced by `new`; the group is not changed."""
        counts = dict(self.server_assignors)
        _count_assignor(counts, old, -1)
        _count_assignor(counts, new, 1)
        return max(counts, key=counts.__getitem__, default=None)

    def subscription_type(self) -> SubscriptionType:
        regexes, names = self.subscribed_regular_expressions, self.subscribed_topic_names
        return subscription_type(regexes, names, len(self.members))

    def compute_subscribed_topic_names(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None
    ) -> dict[str, SubscriptionCount]:
        """Kafka's `computeSubscribedTopicNames(old, new)`: the counts were `old` replaced by `new`.

        The topics of `old`'s regex go when it was its last subscriber and `new` does not use it.
        """
        counts = dict(self.subscribed_topic_names)
        for name in () if old is None else old.subscribed_topic_names:
            _add_count(counts, name, -1, 0)
        for name in () if new is None else new.subscribed_topic_names:
            _add_count(counts, name, 1, 0)
        old_regex = None if old is None else old.subscribed_topic_regex_or_none
        new_regex = None if new is None else new.subscribed_topic_regex_or_none
        resolved = self.resolved_regular_expressions.get(old_regex or "")
        if old_regex is not None and old_regex != new_regex and self.num_subscribed_members(old_regex) == 1:
            for topic in () if resolved is None else resolved.topics:
                _add_count(counts, topic, 0, -1)
        return counts

    def compute_subscribed_topic_names_without(
        self, removed: list[ConsumerGroupMember]
    ) -> dict[str, SubscriptionCount]:
        """Kafka's `computeSubscribedTopicNames(Set<ConsumerGroupMember>)`: the counts without `removed`."""
        counts = dict(self.subscribed_topic_names)
        for member in removed:
            for name in member.subscribed_topic_names:
                _add_count(counts, name, -1, 0)
        return counts

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Kafka's `waitingOnUnreleasedPartition`: a target partition still owned by someone else."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        owner_epoch = self.current_partition_epoch
        return any(owner_epoch(t, p) != NOT_OWNED for t, p in self.pending_partitions(member))

    def pending_partitions(self, member: ConsumerGroupMember) -> Iterator[tuple[UUID, int]]:
        """The partitions the group's target gives the member and it does not own yet."""
        for topic_id, partitions in self.target_assignment_of(member.member_id).items():
            assigned = member.assigned_partitions.get(topic_id, frozenset())
            for partition in partitions - assigned:
                yield topic_id, partition

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        member = self.members[member_id]
        return self.num_classic_protocol_members == len(self.members) - 1 and not member.use_classic_protocol

    # ---------------------------------------------------------- changing

    def set_group_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch
        self._update_state()

    def set_target_assignment_epoch(self, epoch: int) -> None:
        if epoch != self.assignment_epoch:
            self.unreconciled_members = {
                member_id for member_id, member in self.members.items() if not member.is_reconciled_to(epoch)
            }
        self.assignment_epoch = epoch
        self._update_state()

    def set_subscription_metadata(self, metadata: Mapping[str, TopicMetadata]) -> None:
        self.subscription_metadata = dict(metadata)

    def update_member(self, new: ConsumerGroupMember) -> None:
        """Kafka's `updateMember`: add or replace a member and everything derived from it."""
        old = self.members.get(new.member_id)
        self.members[new.member_id] = new
        self._count_member(old, -1)
        self._count_member(new, 1)
        if old is not None:
            self._remove_partition_epochs(old)
        self._add_partition_epochs(new.assigned_partitions, new.member_epoch)
        self._add_partition_epochs(new.partitions_pending_revocation, new.member_epoch)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        if new.is_reconciled_to(self.assignment_epoch):
            self.unreconciled_members.discard(new.member_id)
        else:
            self.unreconciled_members.add(new.member_id)
        self._update_state()

    def remove_member(self, member_id: str) -> None:
        """Kafka's `removeMember`."""
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._count_member(old, -1)
        self._remove_partition_epochs(old)
        if old.instance_id is not None:
            self.static_members.pop(old.instance_id, None)
        self.unreconciled_members.discard(member_id)
        self._update_state()

    def update_target_assignment(self, member_id: str, assignment: Assignment) -> None:
        self._update_inverted_target(member_id, self.target_assignment_of(member_id), assignment)
        self.target_assignment[member_id] = assignment

    def remove_target_assignment(self, member_id: str) -> None:
        self._update_inverted_target(member_id, self.target_assignment_of(member_id), EMPTY_ASSIGNMENT)
        self.target_assignment.pop(member_id, None)

    def update_resolved_regular_expression(self, regex: str, resolved: ResolvedRegularExpression) -> None:
        self.remove_resolved_regular_expression(regex)
        self.resolved_regular_expressions[regex] = resolved
        for topic in resolved.topics:
            _add_count(self.subscribed_topic_names, topic, 0, 1)

    def remove_resolved_regular_expression(self, regex: str) -> None:
        old = self.resolved_regular_expressions.pop(regex, None)
        for topic in () if old is None else old.topics:
            _add_count(self.subscribed_topic_names, topic, 0, -1)

    # ---------------------------------------------------------- internal

    def _update_state(self) -> None:
        """Kafka's `maybeUpdateGroupState`."""
        if not self.members:
            self.state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            self.state = ConsumerGroupState.ASSIGNING
        elif self.unreconciled_members:
            self.state = ConsumerGroupState.RECONCILING
        else:
            self.state = ConsumerGroupState.STABLE

    def _count_member(self, member: ConsumerGroupMember | None, delta: int) -> None:
        """The counts one member adds (delta 1) or takes away (-1)."""
        if member is None:
            return
        for name in member.subscribed_topic_names:
            _add_count(self.subscribed_topic_names, name, delta, 0)
        _count_assignor(self.server_assignors, member, delta)
        regex = member.subscribed_topic_regex_or_none
        if regex is not None:
            _add(self.subscribed_regular_expressions, regex, delta)
        if member.classic_member_metadata is not None:
            self.num_classic_protocol_members += delta
            for protocol in member.classic_member_metadata.supported_protocols:
                _add(self.classic_protocol_members_supported_protocols, protocol.name, delta)

    def _remove_partition_epochs(self, member: ConsumerGroupMember) -> None:
        """KAFKA-19862: an epoch is removed only where it is still the member's (compacted logs)."""
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                epochs = self.partition_epochs.get(topic_id)
                if epochs is None:
                    continue
                for partition in partitions:
                    if epochs.get(partition) == member.member_epoch:
                        del epochs[partition]
                if not epochs:
                    del self.partition_epochs[topic_id]

    def _add_partition_epochs(self, assignment: Assignment, epoch: int) -> None:
        """KAFKA-19862: a newer epoch takes a partition over; the same or an older one is a double owner."""
        for topic_id, partitions in assignment.items():
            if not partitions:
                continue
            epochs = self.partition_epochs.setdefault(topic_id, {})
            for partition in partitions:
                previous = epochs.get(partition)
                if previous is not None and previous >= epoch:
                    raise IllegalGroupState(
                        f"Cannot set the epoch of {topic_id}-{partition} to {epoch} because the partition "
                        f"is still owned at epoch {previous}"
                    )
                epochs[partition] = epoch

    def _update_inverted_target(self, member_id: str, old: Assignment, new: Assignment) -> None:
        """Kafka's `updateInvertedTargetAssignment`: who targets each partition."""
        for topic_id in {*old, *new}:
            before = old.get(topic_id, frozenset())
            after = new.get(topic_id, frozenset())
            owners = self.inverted_target_assignment.setdefault(topic_id, {})
            for partition in before - after:
                # Another member may have taken it already: remove it only if still ours.
                if owners.get(partition) == member_id:
                    del owners[partition]
            for partition in after - before:
                owners[partition] = member_id
            if not owners:
                del self.inverted_target_assignment[topic_id]


def _count_assignor(counts: dict[str, int], member: ConsumerGroupMember | None, delta: int) -> None:
    if member is not None and member.server_assignor_name is not None:
        _add(counts, member.server_assignor_name, delta)


def subscription_type(
    regexes: Mapping[str, int], topic_names: Mapping[str, SubscriptionCount], member_count: int
) -> SubscriptionType:
    """Kafka 4.0's `ConsumerGroup.subscriptionType`.

    Homogeneous when every member names the same topics and none uses a regex,
    or when every member uses the same one regex and no topic is also named.
    """
    if not regexes:
        same = all(count.by_name == member_count for count in topic_names.values())
    elif next(iter(regexes.values())) == member_count:
        same = all(count.by_regex == 1 and count.by_name == 0 for count in topic_names.values())
    else:
        same = False
    return SubscriptionType.HOMOGENEOUS if same else SubscriptionType.HETEROGENEOUS
