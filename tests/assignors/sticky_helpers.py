"""Building sticky-assignor members the way Kafka's Java tests do, for either sticky assignor."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from coordinator.assignors import MemberSubscription
from coordinator.assignors.sticky_common import encode_cooperative_user_data, encode_sticky_user_data
from coordinator.topic_partition import TopicPartition as TP


def tps(spec: str) -> list[TP]:
    """'t0-0 t1-2' -> [TP('t0', 0), TP('t1', 2)]"""
    out = []
    for item in spec.replace(",", " ").split():
        topic, partition = item.rsplit("-", 1)
        out.append(TP(topic, int(partition)))
    return out


def fresh(*topics: str) -> MemberSubscription:
    """Java tests' `subscription(topics, i)`: nothing owned, no generation."""
    return MemberSubscription(tuple(topics))


def owning(assignor: str, topics: Iterable[str], owned: Sequence[TP], generation: int) -> MemberSubscription:
    """Java tests' `buildSubscriptionV2Above` for the given assignor.

    Eager sticky: the claim travels in the user data, nothing in owned_partitions.
    Cooperative: owned_partitions and generation_id carry it, user data the generation.
    """
    if assignor == "sticky":
        return MemberSubscription(
            tuple(topics),
            owned_partitions=(),
            generation_id=generation,
            user_data=encode_sticky_user_data(owned, generation),
        )
    return MemberSubscription(
        tuple(topics),
        owned_partitions=tuple(owned),
        generation_id=generation,
        user_data=encode_cooperative_user_data(generation),
    )


def as_sets(assignment: dict[str, list[TP]]) -> dict[str, set[TP]]:
    return {member_id: set(partitions) for member_id, partitions in assignment.items()}
