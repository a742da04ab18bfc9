"""Data structures of Kafka's general sticky assignment, with Java's exact ordering.

- `SizeOrderedMembers` is the `TreeSet<String>` ordered by Java's
  `SubscriptionComparator`: assigned-partition count, then member id. Like
  the Java set, it reads the live assignment, so callers remove a member
  before changing its partitions and add it back after.
- `PartitionMovements` is `AbstractStickyAssignor.PartitionMovements`: it
  records, per topic, which partitions moved between which two members during
  this rebalance, so a move back can pick a partition that moved the other way.
  Java picks `iterator().next()` of a `HashSet<TopicPartition>`, which
  `JavaHashSet` reproduces. Its cycle check (`isSticky`) only feeds Java's
  logs and tests, so it is left out.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from coordinator.assignors.base import AssignorError
from coordinator.assignors.java_compat import JavaHashSet, topic_partition_hash
from coordinator.topic_partition import TopicPartition, java_string_key

_Key = tuple[int, bytes, str]
ConsumerPair = tuple[str, str]  # (source member, destination member)


class SizeOrderedMembers:
    __slots__ = ("_assignment", "_keys")

    def __init__(self, assignment: dict[str, list[TopicPartition]]) -> None:
        self._assignment = assignment
        self._keys: list[_Key] = []

    def _key(self, member_id: str) -> _Key:
        return len(self._assignment[member_id]), java_string_key(member_id), member_id

    def add(self, member_id: str) -> None:
        key = self._key(member_id)
        index = bisect.bisect_left(self._keys, key)
        if index == len(self._keys) or self._keys[index] != key:
            self._keys.insert(index, key)

    def remove(self, member_id: str) -> None:
        """Removes the entry matching the member's current count, if any, as TreeSet.remove does."""
        key = self._key(member_id)
        index = bisect.bisect_left(self._keys, key)
        if index < len(self._keys) and self._keys[index] == key:
            del self._keys[index]

    def first(self) -> str:
        if not self._keys:
            raise AssignorError("no member left to balance (Java: NoSuchElementException)")
        return self._keys[0][2]

    def last(self) -> str:
        if not self._keys:
            raise AssignorError("no member left to balance (Java: NoSuchElementException)")
        return self._keys[-1][2]

    def __iter__(self) -> Iterator[str]:
        return iter([key[2] for key in self._keys])


class PartitionMovements:
    __slots__ = ("_by_topic", "_moves")

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[ConsumerPair, JavaHashSet[TopicPartition]]] = {}
        self._moves: dict[TopicPartition, ConsumerPair] = {}

    def _remove_record(self, tp: TopicPartition) -> ConsumerPair:
        pair = self._moves.pop(tp)
        for_topic = self._by_topic[tp.topic]
        for_topic[pair].discard(tp)
        if not len(for_topic[pair]):
            del for_topic[pair]
        if not for_topic:
            del self._by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: ConsumerPair) -> None:
        self._moves[tp] = pair
        for_topic = self._by_topic.setdefault(tp.topic, {})
        for_topic.setdefault(pair, JavaHashSet(topic_partition_hash)).add(tp)

    def move_partition(self, tp: TopicPartition, old_member: str, new_member: str) -> None:
        if tp in self._moves:
            # Moved before in this rebalance: record one move from its first owner, or none if it went back.
            first_owner = self._remove_record(tp)[0]
            if first_owner != new_member:
                self._add_record(tp, (first_owner, new_member))
        else:
            self._add_record(tp, (old_member, new_member))

    def partition_to_move(self, tp: TopicPartition, old_member: str, new_member: str) -> TopicPartition:
        """Java's `getTheActualPartitionToBeMoved`: undo an opposite move of the topic if there is one."""
        for_topic = self._by_topic.get(tp.topic)
        if for_topic is None:
            return tp
        if tp in self._moves:
            old_member = self._moves[tp][0]
        reverse = for_topic.get((new_member, old_member))
        if reverse is None:
            return tp
        return reverse.first()
