"""Kafka's sticky assignment when members subscribe to different topics.

`AbstractStickyAssignor.GeneralAssignmentBuilder`, without its rack-aware
steps (no partition racks here, see `base`):

1. Keep every previously owned partition whose topic the member still
   subscribes to (dropping it means a revocation is required).
2. Give each unassigned partition, topics ordered by (number of subscribers,
   name), to the subscribed member with the fewest partitions (ties by id).
3. Leave out topics with a single subscriber and members that already hold
   everything they can; then, until balanced, move partitions towards members
   with 2+ fewer partitions, preferring to hand a partition back to its owner
   in an older generation, and undoing opposite moves first (stickiness).
4. If the moves did not lower the balance score, keep the step-2 result.

Java's own quirks are kept, since the results must be Java's: a partition
handed back to its older-generation owner is not checked against that
member's current subscription, and where Java would hit a null (the older
owner holds only single-subscriber topics) `AssignorError` is raised.
"""

from __future__ import annotations

from coordinator.assignors.base import AssignorError, GroupInput
from coordinator.assignors.sticky_common import MemberDataFn, PreviousOwnership
from coordinator.assignors.sticky_structures import PartitionMovements, SizeOrderedMembers
from coordinator.consumer_protocol import DEFAULT_GENERATION_ID
from coordinator.topic_partition import TopicPartition, java_string_key

# Java's ConsumerGenerationPair: the member that owned a partition in an older generation.
_PreviousOwner = tuple[str, int]


class GeneralAssignmentBuilder:
    def __init__(self, group: GroupInput, previous: PreviousOwnership, member_data: MemberDataFn) -> None:
        self._group = group
        self._counts = group.partitions_per_topic
        self._member_data = member_data
        self._max_generation = previous.max_generation
        self._total = sum(self._counts.values())
        self._current = previous.owned
        self._topic_members: dict[str, list[str]] = {t: [] for t in self._counts}
        self._member_topics: dict[str, list[str]] = {}
        for member_id, sub in group.subscriptions.items():
            topics = [t for t in sub.topics if t in self._counts]
            self._member_topics[member_id] = topics
            for topic in topics:
                self._topic_members[topic].append(member_id)
            self._current.setdefault(member_id, [])
        self._owner: dict[TopicPartition, str] = {tp: m for m, tps in self._current.items() for tp in tps}
        topics_in_order = sorted(
            self._topic_members, key=lambda t: (len(self._topic_members[t]), java_string_key(t))
        )
        self._all_partitions = [TopicPartition(t, p) for t in topics_in_order for p in range(self._counts[t])]
        self._by_size = SizeOrderedMembers(self._current)
        self._movements = PartitionMovements()
        self._revocation_required = False

    def build(self) -> dict[str, list[TopicPartition]]:
        previous = self._previous_owners()
        unassigned = self._unassigned_partitions(self._keep_owned_partitions())
        for member_id in self._current:
            self._by_size.add(member_id)
        self._balance(previous, unassigned)
        return self._current

    def _previous_owners(self) -> dict[TopicPartition, _PreviousOwner]:
        """Java's `prepopulateCurrentAssignments`: the newest claim older than the newest generation."""
        previous: dict[TopicPartition, _PreviousOwner] = {}
        for member_id, sub in self._group.subscriptions.items():
            data = self._member_data(sub)
            if data.generation is not None and data.generation < self._max_generation:
                generation = data.generation
            elif data.generation is None and self._max_generation > DEFAULT_GENERATION_ID:
                generation = DEFAULT_GENERATION_ID
            else:
                continue
            for tp in data.partitions:
                if tp not in previous or generation > previous[tp][1]:
                    previous[tp] = (member_id, generation)
        return previous

    def _keep_owned_partitions(self) -> list[TopicPartition]:
        kept_all: list[TopicPartition] = []
        for member_id, owned in self._current.items():
            topics = self._group.subscriptions[member_id].topics
            kept: list[TopicPartition] = []
            for tp in owned:
                if tp.topic not in self._topic_members:
                    self._owner.pop(tp, None)
                elif tp.topic not in topics:
                    self._revocation_required = True
                else:
                    kept.append(tp)
            owned[:] = kept
            kept_all.extend(kept)
        return kept_all

    def _unassigned_partitions(self, assigned: list[TopicPartition]) -> list[TopicPartition]:
        # With nothing kept Java returns its list of all partitions itself; both names then
        # denote one list, which matters when fixed partitions are removed from it below.
        if not assigned:
            return self._all_partitions
        # Java's PartitionComparator: topic's subscriber count, topic, partition.
        remaining = iter(sorted(assigned, key=self._partition_order))
        next_assigned: TopicPartition | None = next(remaining)
        unassigned: list[TopicPartition] = []
        for tp in self._all_partitions:
            if next_assigned is None or next_assigned != tp:
                unassigned.append(tp)
            else:
                next_assigned = next(remaining, None)
        return unassigned

    def _partitions_of(self, member_id: str) -> list[TopicPartition]:
        partitions = self._current.get(member_id)
        if partitions is None:
            raise AssignorError(f"member {member_id} is not being balanced (Java: NullPointerException)")
        return partitions

    def _partition_order(self, tp: TopicPartition) -> tuple[int, bytes, int]:
        return len(self._topic_members[tp.topic]), java_string_key(tp.topic), tp.partition

    def _size(self, member_id: str) -> int:
        return len(self._partitions_of(member_id))

    def _max_assignment_size(self, topics: list[str]) -> int:
        if len(topics) == len(self._counts):
            return self._total
        return sum(self._counts[t] for t in topics)

    def _balance(
        self, previous: dict[TopicPartition, _PreviousOwner], unassigned: list[TopicPartition]
    ) -> None:
        initializing = not self._current[self._by_size.last()]
        for tp in unassigned:
            if self._topic_members[tp.topic]:
                self._assign_to_least_loaded(tp)

        fixed_partitions = {
            TopicPartition(t, p)
            for t, members in self._topic_members.items()
            if len(members) < 2
            for p in range(self._counts[t])
        }
        self._all_partitions[:] = [tp for tp in self._all_partitions if tp not in fixed_partitions]
        unassigned[:] = [tp for tp in unassigned if tp not in fixed_partitions]

        fixed_members: dict[str, list[TopicPartition]] = {}
        for member_id in self._member_topics:
            if not self._can_member_participate(member_id):
                self._by_size.remove(member_id)
                fixed_members[member_id] = self._current.pop(member_id)

        before = {m: list(tps) for m, tps in self._current.items()}
        owner_before = dict(self._owner)
        if not self._revocation_required:
            self._perform_reassignments(unassigned, previous)
        moved = self._perform_reassignments(self._all_partitions, previous)
        if not initializing and moved and _balance_score(self._current) >= _balance_score(before):
            self._current.clear()
            self._current.update(before)
            self._owner = owner_before

        for member_id, partitions in fixed_members.items():
            self._current[member_id] = partitions
            self._by_size.add(member_id)

    def _assign_to_least_loaded(self, tp: TopicPartition) -> None:
        for member_id in self._by_size:
            if tp.topic in self._member_topics[member_id]:
                self._by_size.remove(member_id)
                self._current[member_id].append(tp)
                self._owner[tp] = member_id
                self._by_size.add(member_id)
                return

    def _can_member_participate(self, member_id: str) -> bool:
        partitions = self._current[member_id]
        if len(partitions) < self._max_assignment_size(self._member_topics[member_id]):
            return True
        return any(len(self._topic_members[tp.topic]) >= 2 for tp in partitions)

    def _perform_reassignments(
        self, reassignable: list[TopicPartition], previous: dict[TopicPartition, _PreviousOwner]
    ) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for tp in reassignable:
                if self._is_balanced():
                    break
                owner = self._owner.get(tp)
                if owner is None:
                    raise AssignorError(f"{tp} has no owner (Java: NullPointerException)")
                older = previous.get(tp)
                if older is not None and self._size(owner) > self._size(older[0]) + 1:
                    self._reassign_to(tp, older[0])
                    performed = modified = True
                    continue
                if any(self._size(owner) > self._size(m) + 1 for m in self._topic_members[tp.topic]):
                    self._reassign(tp)
                    performed = modified = True
        return performed

    def _is_balanced(self) -> bool:
        smallest = len(self._current[self._by_size.first()])
        largest = len(self._current[self._by_size.last()])
        if smallest >= largest - 1:
            return True
        owner_now = {tp: m for m, tps in self._current.items() for tp in tps}
        for member_id in self._by_size:
            mine = self._current[member_id]
            topics = self._member_topics[member_id]
            if len(mine) == self._max_assignment_size(topics):
                continue
            held = set(mine)
            for topic in topics:
                for partition in range(self._counts[topic]):
                    tp = TopicPartition(topic, partition)
                    if tp not in held:
                        other = owner_now.get(tp)
                        if other is None:
                            raise AssignorError(f"{tp} is not assigned (Java: NullPointerException)")
                        if len(mine) + 1 < len(self._current[other]):
                            return False
        return True

    def _reassign(self, tp: TopicPartition) -> None:
        for member_id in self._by_size:
            if tp.topic in self._member_topics[member_id]:
                self._reassign_to(tp, member_id)
                return
        raise AssignorError(f"no member can take {tp}")

    def _reassign_to(self, tp: TopicPartition, new_member: str) -> None:
        to_move = self._movements.partition_to_move(tp, self._owner[tp], new_member)
        old_member = self._owner.get(to_move)
        if old_member is None:
            raise AssignorError(f"{to_move} has no owner (Java: NullPointerException)")
        old_partitions = self._partitions_of(old_member)
        new_partitions = self._partitions_of(new_member)
        self._by_size.remove(old_member)
        self._by_size.remove(new_member)
        self._movements.move_partition(to_move, old_member, new_member)
        old_partitions.remove(to_move)
        new_partitions.append(to_move)
        self._owner[to_move] = new_member
        self._by_size.add(new_member)
        self._by_size.add(old_member)


def _balance_score(assignment: dict[str, list[TopicPartition]]) -> int:
    """Sum over member pairs of the difference in partition counts; 0 is perfectly balanced."""
    sizes = sorted(len(tps) for tps in assignment.values())
    return sum(size * (2 * i - len(sizes) + 1) for i, size in enumerate(sizes))
