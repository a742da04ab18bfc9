"""What a server-side assignor reads and returns: plain frozen data.

Mirrors Kafka's assignor API (`group-coordinator-api/.../api/assignor/`:
`GroupSpec`, `MemberSubscription`, `MemberAssignment`, `GroupAssignment`,
`SubscribedTopicDescriber`, `SubscriptionType`, `PartitionAssignorException`)
and `modern/TopicMetadata.java`, read at apache/kafka 1eb7644349cb (2024-10-25).

Rules:
- Topic ids are `uuid.UUID`, Kafka's `Uuid` with the same 128 bits.
- An `Assignment` maps topic id -> partitions. Its key order is the order in
  which Kafka would iterate that member's assignment map (the homogeneous
  uniform builder revokes in that order); `target.py` gives Java's order.
- `GroupSpec.members` is in the order Kafka iterates `GroupSpec.memberIds()`,
  and `MemberSpec.subscribed_topic_ids` (distinct ids) in the order Kafka
  iterates the member's `TopicIds`: its topic names' Java `HashSet` order.
- Mappings inside these frozen dataclasses are never mutated by this package:
  treat them as read-only values.

Departures: `GroupSpec.assigned_partitions` (Kafka's `isPartitionAssigned`) is derived from the members'
assignments, where Kafka passes the group's inverted target assignment; the two
are the same set of partitions whenever Kafka builds a spec (the only member it
removes in `TargetAssignmentBuilder` is a replaced static member whose
assignment the new member carries). Kafka's topic describer also answers
`racksForPartition` with an empty set in this version, so no rack data is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol
from uuid import UUID

Assignment = Mapping[UUID, frozenset[int]]

EMPTY_ASSIGNMENT: Assignment = {}


class PartitionAssignorError(Exception):
    """Kafka's `PartitionAssignorException`: the assignor cannot compute an assignment."""


class SubscriptionType(Enum):
    """Whether every member subscribes to the same topics (Kafka's `SubscriptionType`)."""

    HOMOGENEOUS = "Homogeneous"
    HETEROGENEOUS = "Heterogeneous"


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One subscribed topic as the group sees it (Kafka's `modern.TopicMetadata`)."""

    topic_id: UUID
    name: str
    partition_count: int

    def __post_init__(self) -> None:
        if self.topic_id.int == 0:
            raise ValueError("Topic id cannot be ZERO_UUID.")
        if not self.name:
            raise ValueError("Topic name cannot be empty.")
        if self.partition_count < 0:
            raise ValueError("Number of partitions cannot be negative.")


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member for the assignor: Kafka's `MemberSubscriptionAndAssignmentImpl`."""

    member_id: str
    subscribed_topic_ids: tuple[UUID, ...]
    assignment: Assignment = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The members, in Kafka's iteration order, and their subscription type."""

    members: tuple[MemberSpec, ...]
    subscription_type: SubscriptionType

    def assigned_partitions(self) -> dict[UUID, set[int]]:
        """Every partition some member holds in the current target, by topic."""
        assigned: dict[UUID, set[int]] = {}
        for member in self.members:
            for topic_id, partitions in member.assignment.items():
                assigned.setdefault(topic_id, set()).update(partitions)
        return assigned


@dataclass(frozen=True, slots=True)
class GroupAssignment:
    """The new target assignment: member id -> assignment (Kafka's `GroupAssignment`)."""

    members: Mapping[str, Assignment]


def partition_count(topics: Mapping[UUID, TopicMetadata], topic_id: UUID) -> int:
    """Kafka's `SubscribedTopicDescriber.numPartitions`, with its -1 turned into the assignor's error."""
    metadata = topics.get(topic_id)
    if metadata is None:
        raise PartitionAssignorError(
            f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
        )
    return metadata.partition_count


class ConsumerGroupPartitionAssignor(Protocol):
    """A server-side assignor: `uniform` or `range` (Kafka's `ConsumerGroupPartitionAssignor`)."""

    @property
    def name(self) -> str: ...

    def assign(self, group: GroupSpec, topics: Mapping[UUID, TopicMetadata]) -> GroupAssignment:
        """The new target assignment; raises `PartitionAssignorError` when there is none."""
        ...
