"""Group placement: Kafka's `partitionFor(groupId)`, and `Routing` while the count changes.

`(groupId.hashCode & 0x7fffffff) % partitions`, with Java's String.hashCode
over UTF-16 code units. Not quite Kafka's rule: Kafka's `Utils.abs(n)` is
`n == Integer.MIN_VALUE ? 0 : Math.abs(n)`, which differs from the mask for
every other negative hash (about half of all group ids), so such a group
lands on another partition number than Kafka would give it. Nothing a client
sees depends on it (Kafka clients ask FindCoordinator; Ray clients take the
routing from the controller), but every running service's groups sit where
this rule put them: changing it needs the rule recorded per service and the
groups moved by a handoff, as a repartition moves them (docs/capacity.md).
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass
from functools import lru_cache
from math import lcm
from operator import mul

# 31**i mod 2**32, reversed per length: a hash is then one sum of products in C (map and
# sum) rather than a Python step per character, about 3x faster (a repartition hashes
# every group of a partition; issue 46's scale benchmark).
_HASH_TABLE_CHARS = 64
_POWERS = [pow(31, i, 1 << 32) for i in range(_HASH_TABLE_CHARS)]
_REVERSED_POWERS = [tuple(_POWERS[n - 1 :: -1]) if n else () for n in range(_HASH_TABLE_CHARS + 1)]
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode as a signed 32-bit int."""
    units = text.encode("ascii") if text.isascii() else array("H", text.encode(_UTF16))
    if len(units) <= _HASH_TABLE_CHARS:
        h: int = sum(map(mul, units, _REVERSED_POWERS[len(units)])) & 0xFFFFFFFF
    else:
        h = 0
        for unit in units:
            h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=65_536)
def group_hash(group_id: str) -> int:
    """Kafka's `Utils.abs(groupId.hashCode)`. Cached: clients route every request."""
    return java_string_hash(group_id) & 0x7FFFFFFF


def partition_for(group_id: str, num_partitions: int) -> int:
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return group_hash(group_id) % num_partitions


@dataclass(frozen=True, slots=True)
class Routing:
    """Which partition serves each group, also while the partition count changes.

    `count` partitions; during a change from `previous` partitions
    (coordinator/handoff.py), a group is still served by its partition under
    `previous` until that partition has handed its groups off (`switched`).
    """

    count: int
    previous: int | None = None
    switched: frozenset[int] = frozenset()
    # The repartition this routing belongs to (0: none ever ran); the controller numbers them.
    version: int = 0

    def partition_for(self, group_id: str) -> int:
        h = group_hash(group_id)  # hashed once for both counts
        if self.previous is None:
            return h % self.count
        old = h % self.previous
        return h % self.count if old in self.switched else old

    @property
    def partitions(self) -> int:
        """How many partitions serve groups or take them over: the larger count."""
        return max(self.count, self.previous or 0)

    def claim(self, partition: int) -> tuple[int, frozenset[int]]:
        """The groups this routing sends to `partition`: those whose hash (`abs(hashCode)`)
        modulo the returned modulus is one of the returned residues. One count divides
        the other (coordinator/handoff.py `refusal`), so the larger is a modulus."""
        count, previous = self.count, self.previous
        if previous is None:
            return count, frozenset({partition} if partition < count else ())
        modulus = max(count, previous)
        residues: set[int] = set()
        if partition < previous and partition not in self.switched:
            residues.update(range(partition, modulus, previous))
        if partition < count:
            residues.update(r for r in range(partition, modulus, count) if r % previous in self.switched)
        return modulus, frozenset(residues)

    def sends_same(self, other: Routing, partition: int) -> bool:
        """Whether both routings send exactly the same groups to `partition` (an answer
        given by one is then the whole answer under the other)."""
        if self == other:
            return True
        mine, theirs = self.claim(partition), other.claim(partition)
        modulus = lcm(mine[0], theirs[0])
        return _expand(mine, modulus) == _expand(theirs, modulus)

    def with_switched(self, partition: int) -> Routing:
        return Routing(self.count, self.previous, self.switched | {partition}, self.version)

    def merged(self, other: Routing | None) -> Routing:
        """What both routings know: the newer repartition, or for the same one every
        partition either says has switched (a switch is never undone)."""
        if other is None or other.version < self.version:
            return self
        if other.version > self.version:
            return other
        if self.previous is None or other.previous is None:  # the repartition is over
            return self if self.previous is None else other
        return Routing(self.count, self.previous, self.switched | other.switched, self.version)

    def encode(self) -> bytes:
        """The form a switch record holds (`coordinator/handoff.py`)."""
        switched = ",".join(map(str, sorted(self.switched)))
        return f"{self.version};{self.count};{self.previous or 0};{switched}".encode("ascii")

    @classmethod
    def decode(cls, data: bytes) -> Routing:
        version, count, previous, switched = data.decode("ascii").split(";")
        return cls(
            int(count), int(previous) or None,
            frozenset(int(p) for p in switched.split(",") if p), int(version),
        )


def _expand(claim: tuple[int, frozenset[int]], modulus: int) -> frozenset[int]:
    """A claim's residues modulo a multiple of its modulus."""
    own, residues = claim
    return frozenset(r + k for r in residues for k in range(0, modulus, own))
