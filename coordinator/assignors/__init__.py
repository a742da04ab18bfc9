"""Kafka's client-side partition assignors, with Java Kafka's results for the same inputs.

`range`, `roundrobin`, `sticky` and `cooperative-sticky` (KIP-429), pure and
deterministic. `ASSIGNORS` maps protocol names to assignors; `leader` turns
member subscription bytes into assignment bytes as the group leader does.
"""

from coordinator.assignors.base import (
    AssignorError,
    MemberSubscription,
    PartitionAssignor,
    RebalanceProtocol,
)
from coordinator.assignors.leader import perform_assignment, subscription_metadata
from coordinator.assignors.range import RangeAssignor
from coordinator.assignors.registry import ASSIGNORS, get_assignor
from coordinator.assignors.roundrobin import RoundRobinAssignor
from coordinator.assignors.sticky import CooperativeStickyAssignor, StickyAssignor

__all__ = [
    "ASSIGNORS",
    "AssignorError",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "get_assignor",
    "perform_assignment",
    "subscription_metadata",
]
