"""Random assignor cases, rebuilt from a seed, and the compact form of their results.

`generate_golden.py` ran Kafka's own `UniformAssignor` and `RangeAssignor` on
these cases and stored Kafka's results in `assignor_golden.json`;
`test_assignor_golden.py` rebuilds each case from its seed and checks that our
assignors give the same results. The cases stress what decides Kafka's output
beyond the unit tests: member order, topic ids sharing a Java hash bucket,
more than 12 topics (a larger `HashSet`), partition numbers past the set's
capacity, previous owners over quota or no longer subscribed, static members
and non-ASCII member ids for the range assignor's sort.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from coordinator.consumer.assignors import Assignment, GroupSpec, MemberSpec, SubscriptionType

MISSING_TOPIC = UUID(int=0x0BAD_0000_0000_0000_0000_0000_0000_0001)


@dataclass(frozen=True, slots=True)
class GoldenCase:
    seed: int
    assignor: str
    group: GroupSpec
    counts: Mapping[UUID, int]


def _uuid(rng: random.Random) -> UUID:
    return UUID(int=rng.getrandbits(128) | 1)


def _member_ids(rng: random.Random, count: int) -> list[str]:
    prefixes = ["m", "member-", "consumer-", "é", "\U0001f600", "Z"]
    ids = {f"{rng.choice(prefixes)}{rng.randrange(1000)}" for _ in range(count)}
    ordered = sorted(ids)
    rng.shuffle(ordered)
    return ordered


def _previous(rng: random.Random, ids: list[str], counts: dict[UUID, int]) -> list[dict[UUID, set[int]]]:
    owned: list[dict[UUID, set[int]]] = [{} for _ in ids]
    fill = rng.choice([0.0, 0.3, 0.7, 1.0])
    for topic_id, count in counts.items():
        for partition in range(count):
            if rng.random() < fill:
                owned[rng.randrange(len(ids))].setdefault(topic_id, set()).add(partition)
    return owned


def generate_case(seed: int) -> GoldenCase:
    rng = random.Random(seed)
    assignor = "range" if rng.random() < 0.25 else "uniform"
    homogeneous = rng.random() < 0.5
    topic_count = rng.randint(13, 16) if rng.random() < 0.15 else rng.randint(1, 6)
    largest = 70 if rng.random() < 0.3 else 12
    counts = {_uuid(rng): rng.randint(0, largest) for _ in range(topic_count)}
    topics = list(counts)
    ids = _member_ids(rng, rng.randint(1, 10))
    shared = rng.sample(topics, rng.randint(1, len(topics)))
    owned = _previous(rng, ids, counts)
    members = []
    for index, member_id in enumerate(ids):
        subscribed = list(shared) if homogeneous else rng.sample(topics, rng.randint(0, len(topics)))
        rng.shuffle(subscribed)
        if rng.random() < 0.02:
            subscribed.append(MISSING_TOPIC)
        assignment_topics = list(owned[index])
        rng.shuffle(assignment_topics)
        assignment = {t: frozenset(owned[index][t]) for t in assignment_topics}
        instance = f"i{rng.randrange(100)}" if assignor == "range" and rng.random() < 0.3 else None
        members.append(MemberSpec(member_id, tuple(subscribed), assignment, instance_id=instance))
    kind = SubscriptionType.HOMOGENEOUS if homogeneous else SubscriptionType.HETEROGENEOUS
    return GoldenCase(seed, assignor, GroupSpec(tuple(members), kind), counts)


def encode_partitions(partitions: frozenset[int]) -> str:
    """{0, 1, 2, 5} -> '0-2.5'"""
    runs: list[str] = []
    ordered = sorted(partitions)
    start = previous = ordered[0]
    for partition in ordered[1:] + [None]:
        if partition is not None and partition == previous + 1:
            previous = partition
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if partition is not None:
            start = previous = partition
    return ".".join(runs)


def encode_result(case: GoldenCase, result: Mapping[str, Assignment]) -> dict[str, str]:
    """member -> 'topic index:partitions;...', topics numbered as in `case.counts`."""
    index = {topic_id: i for i, topic_id in enumerate(case.counts)}
    return {
        member_id: ";".join(
            f"{index[t]}:{encode_partitions(ps)}"
            for t, ps in sorted(assignment.items(), key=lambda e: index[e[0]])
        )
        for member_id, assignment in result.items()
    }
