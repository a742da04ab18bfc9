"""Reconciling one member towards its target assignment: revoke first, assign what is free.

Follows Kafka's `modern/consumer/CurrentAssignmentBuilder.java`, `modern/MemberState.java`
and, from `GroupMetadataManager.java`, `throwIfConsumerGroupMemberEpochIsInvalid`,
`isSubset` and `maybeReconcile`, at apache/kafka 1eb7644349cb (2024-10-25).

A member moves between four states (persisted as Kafka's int8 values):
- STABLE: it has its whole target, or nothing more it can get yet.
- UNREVOKED_PARTITIONS: it must give up `partitions_pending_revocation` and
  stays at its epoch until a heartbeat's owned partitions show none of them
  (a heartbeat without the owned list counts as still owning them); then it
  moves to epoch + 1 and reconciles again.
- UNRELEASED_PARTITIONS: it is at the target epoch but waits for partitions
  whose previous owners have not released them (`partition_epoch` is not -1).
- UNKNOWN: a state from a newer coordinator; the member is fenced unless it
  reports owning nothing, then it reconciles from scratch.
Per topic: kept = current ∩ target, revoked = current - kept, added = target -
kept minus partitions still owned elsewhere.

Departures: Kafka's builder works on the whole `ConsumerGroupMember`; this
module takes and returns only its reconciliation fields (`MemberAssignmentState`,
the value of Kafka's ConsumerGroupCurrentMemberAssignment record). Scheduling
or cancelling the rebalance timeout and writing the record when the state
changed stay with the caller (`maybeReconcile`'s other half).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from uuid import UUID

from coordinator.consumer.assignors.spec import Assignment
from coordinator.errors import Errors

NOT_OWNED = -1

OwnedPartitions = Sequence[tuple[UUID, Sequence[int]]]
"""A heartbeat's `TopicPartitions`: (topic id, partitions) pairs the member owns; None when not sent."""

PartitionEpoch = Callable[[UUID, int], int]
"""The epoch of a partition's current owner in the group, or -1 when nobody owns it."""


class MemberState(IntEnum):
    """Kafka's `MemberState`, with its persisted byte values."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        """A value this version does not know reads as UNKNOWN, as in Kafka."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class FencedMemberEpochError(Exception):
    """Kafka's `FencedMemberEpochException`: the member must drop its partitions and rejoin."""

    error_code = Errors.FENCED_MEMBER_EPOCH


@dataclass(frozen=True, slots=True)
class MemberAssignmentState:
    """A member's epochs, state and partitions: Kafka's ConsumerGroupCurrentMemberAssignment value."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """Kafka's `ModernGroupMember.isReconciledTo`."""
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch


def check_member_epoch(
    member: MemberAssignmentState, received_epoch: int, owned: OwnedPartitions | None
) -> None:
    """Kafka's `throwIfConsumerGroupMemberEpochIsInvalid` for a heartbeat with a positive epoch.

    A smaller epoch passes only when it is the previous epoch and the member
    owns a subset of its assigned partitions: the response that bumped its
    epoch was lost.
    """
    if received_epoch > member.member_epoch:
        raise FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({received_epoch}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin."
        )
    if received_epoch < member.member_epoch and (
        received_epoch != member.previous_member_epoch or not is_subset(owned, member.assigned_partitions)
    ):
        raise FencedMemberEpochError(
            f"The consumer group member has a smaller member epoch ({received_epoch}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin."
        )


def is_subset(owned: OwnedPartitions | None, assignment: Assignment) -> bool:
    """Every owned partition is in `assignment`; a missing owned list is not a subset (Kafka's `isSubset`)."""
    if owned is None:
        return False
    for topic_id, partitions in owned:
        assigned = assignment.get(topic_id)
        if assigned is None or any(p not in assigned for p in partitions):
            return False
    return True


def owns_revoked_partitions(owned: OwnedPartitions | None, pending_revocation: Assignment) -> bool:
    """The member still reports one of the partitions it must revoke; no owned list counts as yes."""
    if owned is None:
        return True
    for topic_id, partitions in owned:
        pending = pending_revocation.get(topic_id, frozenset())
        if any(p in pending for p in partitions):
            return True
    return False


def has_assigned_partitions_changed(old: MemberAssignmentState, new: MemberAssignmentState) -> bool:
    """Kafka's `ConsumerGroupMember.hasAssignedPartitionsChanged`: the heartbeat then sends the assignment."""
    return dict(old.assigned_partitions) != dict(new.assigned_partitions)


def maybe_reconcile(
    member: MemberAssignmentState,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: OwnedPartitions | None,
) -> MemberAssignmentState:
    """Kafka's `maybeReconcile` without its records and timers: `member` itself when already reconciled."""
    if member.is_reconciled_to(target_epoch):
        return member
    return reconcile(member, target_epoch, target, partition_epoch, owned)


def reconcile(
    member: MemberAssignmentState,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: OwnedPartitions | None,
) -> MemberAssignmentState:
    """Kafka's `CurrentAssignmentBuilder.build()`: the next state, or `member` itself when it cannot move.

    Raises `FencedMemberEpochError` for a member in the UNKNOWN state that still owns partitions.
    """
    step = _Step(target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return step.next_assignment(member, member.member_epoch)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_revoked_partitions(owned, member.partitions_pending_revocation):
            return member
        return step.next_assignment(member, member.member_epoch + 1)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return step.next_assignment(member, member.member_epoch)
    if owned is None or len(owned) > 0:
        raise FencedMemberEpochError(
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin."
        )
    return step.next_assignment(member, target_epoch)


@dataclass(frozen=True, slots=True)
class _Step:
    target_epoch: int
    target: Assignment
    partition_epoch: PartitionEpoch
    owned: OwnedPartitions | None

    def next_assignment(self, member: MemberAssignmentState, epoch: int) -> MemberAssignmentState:
        """Kafka's `computeNextAssignment`, `epoch` being the member's epoch to reconcile from."""
        assigned: dict[UUID, frozenset[int]] = {}
        revoking: dict[UUID, frozenset[int]] = {}
        adding: dict[UUID, frozenset[int]] = {}
        unreleased = False
        current_assignment = member.assigned_partitions
        for topic_id in {*self.target, *current_assignment}:
            wanted = self.target.get(topic_id, frozenset())
            current = current_assignment.get(topic_id, frozenset())
            kept = current & wanted
            pending = wanted - kept
            free = frozenset(p for p in pending if self.partition_epoch(topic_id, p) == NOT_OWNED)
            unreleased = unreleased or len(free) < len(pending)
            _put_nonempty(assigned, topic_id, kept)
            _put_nonempty(revoking, topic_id, current - kept)
            _put_nonempty(adding, topic_id, free)

        if revoking and owns_revoked_partitions(self.owned, revoking):
            return _state(MemberState.UNREVOKED_PARTITIONS, member, epoch, assigned, revoking)
        # Kafka's three other outcomes: the free partitions join at the target epoch, and the
        # member waits in UNRELEASED_PARTITIONS while some are still owned elsewhere.
        for topic_id, partitions in adding.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return _state(state, member, self.target_epoch, assigned, {})


def _put_nonempty(into: dict[UUID, frozenset[int]], topic_id: UUID, partitions: frozenset[int]) -> None:
    if partitions:
        into[topic_id] = partitions


def _state(
    state: MemberState,
    member: MemberAssignmentState,
    epoch: int,
    assigned: Mapping[UUID, frozenset[int]],
    revoking: Mapping[UUID, frozenset[int]],
) -> MemberAssignmentState:
    """Kafka's `Builder.updateMemberEpoch`: the old epoch becomes the previous one."""
    return MemberAssignmentState(epoch, member.member_epoch, state, assigned, revoking)
