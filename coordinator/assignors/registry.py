"""The built-in assignors by JoinGroup protocol name, the names of Kafka's `partition.assignment.strategy`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from coordinator.assignors.base import PartitionAssignor
from coordinator.assignors.range import RangeAssignor
from coordinator.assignors.roundrobin import RoundRobinAssignor
from coordinator.assignors.sticky import CooperativeStickyAssignor, StickyAssignor

ASSIGNORS: Mapping[str, PartitionAssignor] = MappingProxyType(
    {
        assignor.name: assignor
        for assignor in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor())
    }
)


def get_assignor(name: str) -> PartitionAssignor:
    """The assignor for a protocol name; ValueError if it is not one of ours."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown assignor {name!r}; known: {', '.join(ASSIGNORS)}") from None
