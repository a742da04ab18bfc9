"""Adapters that run kafka-python 3.0.12's assignors on our inputs, for differential tests.

kafka-python is a reference only where it follows Java's rules (see
stack-notes): its range and roundrobin group static and dynamic members with
`itertools.groupby` over unsorted input, so callers keep static members first,
and its roundrobin needs identical subscriptions. Its sticky assignor is a port
of Java's pre-2.8 algorithm, so it agrees with ours on fresh groups only.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor as KpCooperative
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from coordinator.assignors import MemberSubscription
from coordinator.consumer_protocol import group_by_topic_in_order
from coordinator.topic_partition import TopicPartition

KP_ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": KpCooperative,
}


class FakeCluster:
    """The two methods of kafka-python's ClusterMetadata its assignors call."""

    def __init__(self, partitions_per_topic: Mapping[str, int]) -> None:
        self._counts = dict(partitions_per_topic)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._counts.get(topic)
        return set(range(count)) if count else None

    def topics(self) -> set[str]:
        return set(self._counts)


def _kp_member(member_id: str, sub: MemberSubscription) -> SimpleNamespace:
    owned = [
        ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
        for t, ps in group_by_topic_in_order(sorted(sub.owned_partitions))
    ]
    metadata = ConsumerProtocolSubscription(
        version=3,
        topics=list(sub.topics),
        user_data=b"",
        owned_partitions=owned,
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    return SimpleNamespace(member_id=member_id, group_instance_id=sub.group_instance_id, metadata=metadata)


def kafka_python_assign(
    name: str, members: Mapping[str, MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, set[TopicPartition]]:
    """kafka-python's result for the same group, as sets (its lists are sorted, not Java-ordered)."""
    assignor_cls = KP_ASSIGNORS[name]
    assignor: AbstractPartitionAssignor = (
        assignor_cls() if name in ("sticky", "cooperative-sticky") else assignor_cls
    )
    kp_members = [_kp_member(member_id, sub) for member_id, sub in members.items()]
    result = assignor.assign(FakeCluster(partitions_per_topic), kp_members)
    return {
        member_id: {TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions()}
        for member_id, assignment in result.items()
    }
