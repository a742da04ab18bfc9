"""StickyAssignor ("sticky", eager) and CooperativeStickyAssignor ("cooperative-sticky", KIP-429).

Both run `AbstractStickyAssignor`: balanced first, then as few moves as
possible. When all members subscribe to the same topics the constrained
algorithm runs (`sticky_constrained`), else the general one (`sticky_general`).

- StickyAssignor learns what each member owned, and in which generation, from
  its own user data, which a member fills from its last assignment.
- CooperativeStickyAssignor learns it from the subscription's owned
  partitions and generation (v2+), or the generation in its user data. Then,
  per KIP-429, a partition that changes owner is left out of this round: the
  old owner revokes it, rejoins, and the next rebalance gives it to the new
  owner. In the constrained case the builder records those partitions; in
  the general case they are the ones added to one member and revoked from
  another (`computePartitionsTransferringOwnership`).
"""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.assignors.base import GroupInput, MemberSubscription, PartitionAssignor, RebalanceProtocol
from coordinator.assignors.sticky_common import (
    MemberData,
    MemberDataFn,
    decode_cooperative_generation,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    remove_first,
    resolve_previous_ownership,
)
from coordinator.assignors.sticky_constrained import ConstrainedAssignmentBuilder
from coordinator.assignors.sticky_general import GeneralAssignmentBuilder
from coordinator.topic_partition import TopicPartition

MemberPartitions = dict[str, list[TopicPartition]]


def sticky_assign(
    group: GroupInput, member_data: MemberDataFn
) -> tuple[MemberPartitions, dict[TopicPartition, str] | None]:
    """`AbstractStickyAssignor.assignPartitions`: the assignment, and the partitions changing owner.

    The second value is None after the general algorithm, as Java's
    `partitionsTransferringOwnership`, which the cooperative assignor then computes.
    """
    previous = resolve_previous_ownership(group, member_data)
    if previous.all_subscriptions_equal:
        builder = ConstrainedAssignmentBuilder(group.partitions_per_topic, previous)
        return builder.build(), builder.transferring
    return GeneralAssignmentBuilder(group, previous, member_data).build(), None


class StickyAssignor(PartitionAssignor):
    name = "sticky"

    def member_data(self, sub: MemberSubscription) -> MemberData:
        # Eager members revoke everything before joining, so only the user data knows.
        return decode_sticky_user_data(sub.user_data)

    def assign_group(self, group: GroupInput) -> MemberPartitions:
        return sticky_assign(group, self.member_data)[0]

    def subscription_user_data(
        self, last_assignment: Sequence[TopicPartition] | None, last_generation: int
    ) -> bytes | None:
        if last_assignment is None:
            return None
        return encode_sticky_user_data(last_assignment, last_generation)


class CooperativeStickyAssignor(PartitionAssignor):
    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def member_data(self, sub: MemberSubscription) -> MemberData:
        owned = list(sub.owned_partitions)
        if sub.generation is not None:
            return MemberData(owned, sub.generation)
        if sub.user_data is None:
            return MemberData(owned, None)
        return MemberData(owned, decode_cooperative_generation(sub.user_data))

    def assign_group(self, group: GroupInput) -> MemberPartitions:
        assignment, transferring = sticky_assign(group, self.member_data)
        if transferring is None:
            transferring = _partitions_transferring_ownership(group, assignment)
        for tp, member_id in transferring.items():
            remove_first(assignment[member_id], tp)
        return assignment

    def subscription_user_data(
        self, last_assignment: Sequence[TopicPartition] | None, last_generation: int
    ) -> bytes | None:
        return encode_cooperative_user_data(last_generation)


def _partitions_transferring_ownership(
    group: GroupInput, assignment: MemberPartitions
) -> dict[TopicPartition, str]:
    """Partitions newly given to one member that another member owned and now loses."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member_id, assigned in assignment.items():
        owned = group.subscriptions[member_id].owned_partitions
        owned_set = set(owned)
        added.update((tp, member_id) for tp in assigned if tp not in owned_set)
        assigned_set = set(assigned)
        revoked.update(tp for tp in owned if tp not in assigned_set)
    return {tp: member_id for tp, member_id in added.items() if tp in revoked}
