"""Kafka's sticky assignment when every member subscribes to the same topics.

`AbstractStickyAssignor.ConstrainedAssignmentBuilder` (KAFKA-9987, Kafka 2.8+),
without its rack-aware steps (no partition racks here, see `base`):

1. Each member keeps its previously owned partitions, sorted by (partition,
   topic), up to its quota: all of them if fewer than `min_quota`; `max_quota`
   while fewer than `partitions % members` members have been given the extra
   one; `min_quota` otherwise. The rest are revoked. Members are visited in
   Java's HashMap order, which decides who gets the extra partitions.
2. The unassigned partitions, sorted by topic then partition, are dealt round
   robin to the members under `min_quota` (sorted by member id), then one each
   to members at exactly `min_quota` in the order they reached it.

A partition that is assigned to a new member although it was revoked from,
or claimed by several, previous owners is recorded in `transferring`, which
the cooperative assignor withholds for one rebalance.
"""

from __future__ import annotations

from coordinator.assignors.base import AssignorError
from coordinator.assignors.sticky_common import PreviousOwnership
from coordinator.topic_partition import TopicPartition, java_string_key, java_topic_partition_key


class ConstrainedAssignmentBuilder:
    def __init__(self, partitions_per_topic: dict[str, int], previous: PreviousOwnership) -> None:
        self._partitions_per_topic = partitions_per_topic
        self._owned = previous.owned
        self._claimed_by_several = previous.claimed_by_several
        self._revoked: set[TopicPartition] = set()
        self._under_min: list[str] = []
        self._at_min: list[str] = []
        total = sum(partitions_per_topic.values())
        members = len(previous.owned)
        self._min_quota, self._expected_over_min = divmod(total, members)
        self._max_quota = self._min_quota + (1 if self._expected_over_min else 0)
        self._current_over_min = 0
        self._assignment: dict[str, list[TopicPartition]] = {m: [] for m in previous.owned}
        self._assigned: list[TopicPartition] = []
        self.transferring: dict[TopicPartition, str] = {}

    def build(self) -> dict[str, list[TopicPartition]]:
        self._assign_owned_partitions()
        unassigned = self._unassigned_partitions()
        self._under_min.sort(key=java_string_key)
        self._at_min.sort(key=java_string_key)
        self._assign_round_robin(unassigned)
        self._verify_unfilled_members()
        return self._assignment

    def _assign_owned_partitions(self) -> None:
        for member_id, claims in self._owned.items():
            owned = sorted(claims, key=lambda tp: (tp.partition, java_string_key(tp.topic)))
            for tp in [t for t in dict.fromkeys(owned) if t in self._claimed_by_several]:
                owned.remove(tp)
            if len(owned) < self._min_quota:
                self._keep(member_id, owned)
                self._under_min.append(member_id)
            elif len(owned) >= self._max_quota and self._current_over_min < self._expected_over_min:
                self._current_over_min += 1
                if self._current_over_min == self._expected_over_min:
                    self._at_min.clear()
                self._keep(member_id, owned[: self._max_quota])
                self._revoked.update(owned[self._max_quota :])
            else:
                self._keep(member_id, owned[: self._min_quota])
                self._revoked.update(owned[self._min_quota :])
                if self._current_over_min < self._expected_over_min:
                    self._at_min.append(member_id)

    def _keep(self, member_id: str, partitions: list[TopicPartition]) -> None:
        self._assignment[member_id].extend(partitions)
        self._assigned.extend(partitions)

    def _unassigned_partitions(self) -> list[TopicPartition]:
        """Java's two-pointer difference of all partitions (sorted) and the kept ones (sorted)."""
        topics = sorted(self._partitions_per_topic, key=java_string_key)
        if not self._assigned:
            return [TopicPartition(t, p) for t in topics for p in range(self._partitions_per_topic[t])]
        assigned = iter(sorted(self._assigned, key=java_topic_partition_key))
        next_assigned: TopicPartition | None = next(assigned)
        unassigned: list[TopicPartition] = []
        for topic in topics:
            for partition in range(self._partitions_per_topic[topic]):
                tp = TopicPartition(topic, partition)
                if next_assigned is None or next_assigned != tp:
                    unassigned.append(tp)
                else:
                    next_assigned = next(assigned, None)
        return unassigned

    def _assign_round_robin(self, unassigned: list[TopicPartition]) -> None:
        under_min = self._under_min
        cursor = 0  # Java's iterator over the under-min members
        for tp in unassigned:
            from_under_min = True
            if cursor < len(under_min):
                member_id = under_min[cursor]
                cursor += 1
            elif not under_min and not self._at_min:
                raise AssignorError(f"no more unfilled members for {tp} (Java: IllegalStateException)")
            elif not under_min:
                member_id = self._at_min.pop(0)
                from_under_min = False
            else:
                member_id = under_min[0]
                cursor = 1

            count = self._assign_new_partition(tp, member_id)
            if count == self._min_quota:
                if not from_under_min:
                    raise AssignorError(f"{member_id} reached min quota from the at-min list")
                cursor -= 1
                del under_min[cursor]
                self._at_min.append(member_id)
            elif count == self._max_quota:
                self._current_over_min += 1

    def _assign_new_partition(self, tp: TopicPartition, member_id: str) -> int:
        partitions = self._assignment[member_id]
        partitions.append(tp)
        # Every still-valid claim was kept above, so only these change owner.
        if tp in self._revoked or tp in self._claimed_by_several:
            self.transferring[tp] = member_id
        return len(partitions)

    def _verify_unfilled_members(self) -> None:
        if not self._under_min:
            return
        if self._current_over_min != self._expected_over_min:
            raise AssignorError("members left under min quota before the expected number reached max quota")
        for member_id in self._under_min:
            if len(self._assignment[member_id]) != self._min_quota:
                raise AssignorError(f"member {member_id} did not reach min quota {self._min_quota}")
