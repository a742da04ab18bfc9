"""The assignor interface shared by range, roundrobin, sticky and cooperative-sticky.

Mirrors Kafka's `ConsumerPartitionAssignor` / `AbstractPartitionAssignor`:
the leader hands every member's subscription and the partition count of each
topic to `assign`, which returns each member's partitions.

Rules:
- Pure and stateless: what Java keeps in the assignor between rebalances
  (the member's last assignment and generation, for its subscription user
  data) is passed in as arguments instead.
- `members` is in JoinGroup response order, the order in which Java's leader
  fills its `HashMap<String, Subscription>`; `GroupInput` turns that into
  Java's iteration order (`java_compat`), so order-dependent steps match.
- As in Java, only topics somebody subscribes to and that have at least one
  partition take part; a subscribed topic missing from `partitions_per_topic`
  is skipped, like a topic without metadata.
- Partition replicas have no racks here (we only know partition counts),
  which is exactly Java's `assign(Map<String, Integer>, ...)` path: its
  rack-aware branches never run, whatever racks the members report.
- Each member's list is in the order Java builds it, so encoding it with
  `consumer_protocol.encode_assignment` gives Java's bytes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from coordinator.assignors.java_compat import java_string_hash_order
from coordinator.consumer_protocol import DEFAULT_GENERATION_ID, Subscription
from coordinator.topic_partition import TopicPartition


class RebalanceProtocol(IntEnum):
    """Kafka's `ConsumerPartitionAssignor.RebalanceProtocol` (KIP-429), by id."""

    EAGER = 0
    COOPERATIVE = 1


class AssignorError(RuntimeError):
    """A broken invariant inside an assignor, where Java throws IllegalStateException or NPE."""


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member's subscription as the leader sees it: Java's `Subscription` plus groupInstanceId."""

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = DEFAULT_GENERATION_ID
    group_instance_id: str | None = None
    rack_id: str | None = None
    user_data: bytes | None = None

    @property
    def generation(self) -> int | None:
        """Java's `Subscription.generationId()`: absent when negative."""
        return self.generation_id if self.generation_id >= 0 else None

    @classmethod
    def from_subscription(cls, sub: Subscription, group_instance_id: str | None = None) -> MemberSubscription:
        """What Java's leader builds from decoded bytes; an empty rack id means no rack."""
        return cls(
            topics=sub.topics,
            owned_partitions=sub.owned_partitions,
            generation_id=sub.generation_id,
            group_instance_id=group_instance_id,
            rack_id=sub.rack_id or None,
            user_data=sub.user_data,
        )


@dataclass(frozen=True, slots=True)
class GroupInput:
    """The assignor's input in Java's iteration order.

    `subscriptions` iterates like the leader's `HashMap<String, Subscription>`;
    `partitions_per_topic` like `AbstractPartitionAssignor`'s HashMap of the
    subscribed topics that have partitions.
    """

    subscriptions: dict[str, MemberSubscription]
    partitions_per_topic: dict[str, int]

    @classmethod
    def build(
        cls, members: Mapping[str, MemberSubscription], partition_counts: Mapping[str, int]
    ) -> GroupInput:
        subscriptions = {m: members[m] for m in java_string_hash_order(members)}
        all_topics = java_string_hash_order(t for sub in subscriptions.values() for t in sub.topics)
        with_partitions = [t for t in all_topics if partition_counts.get(t, 0) > 0]
        ordered = java_string_hash_order(with_partitions)
        return cls(subscriptions, {t: partition_counts[t] for t in ordered})


class PartitionAssignor(ABC):
    """A client-side assignor: `name` is the JoinGroup protocol name."""

    name: ClassVar[str]
    # In order of preference, as Java's `supportedProtocols()`.
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    @property
    def protocol(self) -> RebalanceProtocol:
        return self.supported_protocols[0]

    def assign(
        self, members: Mapping[str, MemberSubscription], partitions_per_topic: Mapping[str, int]
    ) -> dict[str, list[TopicPartition]]:
        """Each member's partitions, keyed in the order of `members`."""
        if not members:
            return {}
        raw = self.assign_group(GroupInput.build(members, partitions_per_topic))
        return {member_id: raw[member_id] for member_id in members}

    @abstractmethod
    def assign_group(self, group: GroupInput) -> dict[str, list[TopicPartition]]:
        """The algorithm proper, on Java-ordered input with at least one member."""

    def subscription_user_data(
        self, last_assignment: Sequence[TopicPartition] | None, last_generation: int
    ) -> bytes | None:
        """Java's `subscriptionUserData(topics)`, from the state `onAssignment` would have kept."""
        return None
