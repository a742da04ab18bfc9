"""RangeAssignor: Kafka's "range" strategy (`org.apache.kafka.clients.consumer.RangeAssignor`).

Per topic, the partitions in numeric order are cut into contiguous ranges,
one per subscribed member in `MemberInfo` order (static members first by
group.instance.id, then dynamic members by member id); the first
`partitions % members` members get one partition more.

Topics are walked in Java's `partitionsPerTopic` HashMap order, which only
decides the order inside each member's list. Java's rack-aware branch needs
partition replica racks, which raygroups does not have (see `base`), so it
never runs here, as it never runs on Java's `assign(Map<String, Integer>)` path.
"""

from __future__ import annotations

from coordinator.assignors.base import GroupInput, PartitionAssignor
from coordinator.assignors.java_compat import member_order_key
from coordinator.topic_partition import TopicPartition


class RangeAssignor(PartitionAssignor):
    name = "range"

    def assign_group(self, group: GroupInput) -> dict[str, list[TopicPartition]]:
        subscriptions = group.subscriptions
        consumers_per_topic: dict[str, list[str]] = {}
        for member_id, sub in subscriptions.items():
            for topic in sub.topics:
                consumers_per_topic.setdefault(topic, []).append(member_id)

        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        for topic, num_partitions in group.partitions_per_topic.items():
            members = sorted(
                consumers_per_topic.get(topic, []),
                key=lambda m: member_order_key(m, subscriptions[m].group_instance_id),
            )
            # Java collects them into a LinkedHashMap: a topic listed twice counts once.
            consumers = list(dict.fromkeys(members))
            if not consumers:
                continue
            per_consumer, with_extra = divmod(num_partitions, len(consumers))
            start = 0
            for index, consumer in enumerate(consumers):
                length = per_consumer + (1 if index < with_extra else 0)
                assignment[consumer].extend(TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        return assignment
