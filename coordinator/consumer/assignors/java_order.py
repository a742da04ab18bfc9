"""Java's iteration and comparison orders, where Kafka's server-side assignors depend on them.

The uniform assignor iterates `HashSet`s and `HashMap`s: which topic's
partitions go first, which partitions a member over its quota keeps, which
members get one partition more. To give Kafka's results we reproduce
`java.util.HashMap` iteration: a power-of-two table, a key in bucket
`spread(hashCode) & (capacity - 1)` with `spread(h) = h ^ (h >>> 16)`, buckets
in index order, a bucket in insertion order.

Hash codes: Kafka's `Uuid.hashCode` (xor of the four 32-bit words),
`String.hashCode` (`coordinator.routing.java_string_hash`), `Integer.hashCode`
(the value). Comparisons: `Uuid.compareTo` (signed 64-bit halves) and
`String.compareTo` (UTF-16 code units).

Table capacity depends on how Java built the collection, so two sizings exist:
- `copied_capacity`: `new HashSet<>(collection)` on JDK 17 (Kafka 4.0's
  minimum), `max((int) (n / .75f) + 1, 16)` rounded up to a power of two.
  JDK 19+ sizes with `ceil(n / .75)`: the two differ only when n is a multiple
  of 3 above 12 and n / .75 is a power of two (24, 48, 96, ...).
- `grown_capacity`: `new HashMap<>()` grown by puts: 16, doubled while the size
  exceeds three quarters of it.
Not modelled: buckets turned into trees (9+ keys in one bucket of a table of
64+), and Java's insertion history inside a bucket: ties keep input order,
ascending for partitions. A member's partitions share a bucket only when they
span more numbers than its set has buckets; Kafka then orders them by the
order its record listed them, which came from an earlier set's iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import lru_cache
from typing import TypeVar
from uuid import UUID

from coordinator.routing import java_string_hash

K = TypeVar("K", bound=Hashable)

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_SIGN64 = 1 << 63
_MIN_CAPACITY = 16
_MAX_CAPACITY = 1 << 30


@lru_cache(maxsize=65_536)
def uuid_hash(topic_id: UUID) -> int:
    """Kafka's `Uuid.hashCode()` as an unsigned 32-bit value."""
    value = topic_id.int
    xor = (value >> 64) ^ (value & _MASK64)
    return ((xor >> 32) ^ xor) & _MASK32


def uuid_key(topic_id: UUID) -> tuple[int, int]:
    """Sort key giving Kafka's `Uuid.compareTo` order: signed most, then least significant bits."""
    value = topic_id.int
    return _signed64(value >> 64), _signed64(value & _MASK64)


def _signed64(value: int) -> int:
    return value - (1 << 64) if value & _SIGN64 else value


@lru_cache(maxsize=65_536)
def string_hash(text: str) -> int:
    """Java's `String.hashCode()`, cached: member ids come back every assignment."""
    return java_string_hash(text) & _MASK32


def java_string_key(text: str) -> bytes:
    """Sort key giving Java's `String.compareTo` order (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def _table_size_for(capacity: int) -> int:
    size = 1
    while size < capacity and size < _MAX_CAPACITY:
        size <<= 1
    return size


def copied_capacity(size: int) -> int:
    """Table capacity of `new HashSet<>(collection)` / `new HashMap<>(map)` with `size` keys (JDK 17)."""
    return _table_size_for(max((4 * size) // 3 + 1, _MIN_CAPACITY))


def grown_capacity(peak_size: int) -> int:
    """Table capacity of a `new HashMap<>()` that once held `peak_size` keys (tables never shrink)."""
    capacity = _MIN_CAPACITY
    while peak_size > capacity * 3 // 4 and capacity < _MAX_CAPACITY:
        capacity *= 2
    return capacity


def _bucket(hash_code: int, capacity: int) -> int:
    return (hash_code ^ (hash_code >> 16)) & (capacity - 1)


def hash_order(keys: Sequence[K], hash_code: Callable[[K], int], capacity: int) -> list[K]:
    """`keys` (distinct) in the iteration order of a Java hash table of `capacity`."""
    if len(keys) < 2:  # the common case of a member on one topic: nothing to order
        return list(keys)
    indexed = sorted(range(len(keys)), key=lambda i: (_bucket(hash_code(keys[i]), capacity), i))
    return [keys[i] for i in indexed]


def topic_set_order(topic_ids: Iterable[UUID]) -> list[UUID]:
    """Iteration order of `new HashSet<>(topicIds)`."""
    keys = list(topic_ids)
    return hash_order(keys, uuid_hash, copied_capacity(len(keys)))


def topic_map_order(topic_ids: Iterable[UUID]) -> list[UUID]:
    """Iteration order of a `new HashMap<Uuid, ...>()` filled by puts, as a replayed record builds it."""
    keys = list(topic_ids)
    return hash_order(keys, uuid_hash, grown_capacity(len(keys)))


def partition_set_order(partitions: Iterable[int]) -> list[int]:
    """Iteration order of `new HashSet<>(partitions)`: ascending unless a partition reaches the capacity."""
    ordered = sorted(partitions)
    capacity = copied_capacity(len(ordered))
    if not ordered or ordered[-1] < capacity:
        return ordered
    return hash_order(ordered, lambda p: p & _MASK32, capacity)


def name_set_order(names: Iterable[str]) -> list[str]:
    """Iteration order of `new HashSet<>(topicNames)`, a member's subscribed topic names."""
    keys = list(dict.fromkeys(names))
    return hash_order(keys, string_hash, copied_capacity(len(keys)))


def member_map_order(member_ids: Sequence[str], peak_size: int) -> list[str]:
    """Iteration order of a `new HashMap<String, ...>()` that held at most `peak_size` members."""
    return hash_order(member_ids, string_hash, grown_capacity(max(peak_size, len(member_ids))))
