"""Java's iteration and comparison orders, where Kafka's assignors depend on them.

Kafka's sticky assignors iterate `HashMap`s and `HashSet`s, and what they
iterate first decides who keeps a contested partition. To give Java's results
we reproduce `java.util.HashMap` order (OpenJDK 8+): a table of power-of-two
capacity (16 at the first put, doubled whenever size exceeds 3/4 of it), a key
goes to bucket `spread(hashCode) & (capacity - 1)` with
`spread(h) = h ^ (h >>> 16)`, buckets iterate in index order and a bucket in
insertion order. Resizing splits a bucket keeping relative order, so order
within a bucket is the order of (last) insertion, whatever the resizes.

Not modelled: buckets turned into trees (9+ keys in one bucket of a table of
64+), which needs a colliding-hash input Kafka member ids and topic-partitions
do not produce.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from coordinator.routing import java_string_hash
from coordinator.topic_partition import TopicPartition, java_string_key

K = TypeVar("K", bound=Hashable)

_INITIAL_CAPACITY = 16
_MASK32 = 0xFFFFFFFF


def topic_partition_hash(tp: TopicPartition) -> int:
    """Java's `TopicPartition.hashCode()`: 31 * (31 + partition) + topic.hashCode(), as int32."""
    value = (31 * (31 + tp.partition) + java_string_hash(tp.topic)) & _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def _bucket(hash_code: int, capacity: int) -> int:
    h = hash_code & _MASK32
    return (h ^ (h >> 16)) & (capacity - 1)


def _capacity_for(size: int, capacity: int = _INITIAL_CAPACITY) -> int:
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def java_hash_order(keys: Iterable[K], hash_code: Callable[[K], int]) -> list[K]:
    """Iteration order of a fresh `new HashMap<>()` / `new HashSet<>()` after putting `keys` in turn.

    A repeated key keeps its first position, as `put` of an existing key does.
    """
    first_seen = list(dict.fromkeys(keys))
    capacity = _capacity_for(len(first_seen))
    ranked = sorted(range(len(first_seen)), key=lambda i: (_bucket(hash_code(first_seen[i]), capacity), i))
    return [first_seen[i] for i in ranked]


def java_string_hash_order(keys: Iterable[str]) -> list[str]:
    return java_hash_order(keys, java_string_hash)


class JavaHashSet(Generic[K]):
    """A `new HashSet<>()` under add/remove, for code that asks for its first element."""

    __slots__ = ("_hash_code", "_seq", "_next_seq", "_capacity")

    def __init__(self, hash_code: Callable[[K], int]) -> None:
        self._hash_code = hash_code
        self._seq: dict[K, int] = {}
        self._next_seq = 0
        self._capacity = _INITIAL_CAPACITY

    def __contains__(self, key: object) -> bool:
        return key in self._seq

    def __len__(self) -> int:
        return len(self._seq)

    def add(self, key: K) -> None:
        if key in self._seq:
            return
        self._seq[key] = self._next_seq
        self._next_seq += 1
        self._capacity = _capacity_for(len(self._seq), self._capacity)

    def discard(self, key: K) -> None:
        # Java never shrinks the table, so capacity stays.
        self._seq.pop(key, None)

    def first(self) -> K:
        """`iterator().next()`; the set must not be empty."""
        return min(self._seq, key=lambda k: (_bucket(self._hash_code(k), self._capacity), self._seq[k]))


def member_order_key(member_id: str, group_instance_id: str | None) -> tuple[int, bytes]:
    """Java's `MemberInfo.compareTo`: static members first by group.instance.id, then dynamic by member id."""
    if group_instance_id is not None:
        return 0, java_string_key(group_instance_id)
    return 1, java_string_key(member_id)
