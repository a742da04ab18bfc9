"""RoundRobinAssignor: Kafka's "roundrobin" strategy (`org.apache.kafka.clients.consumer.RoundRobinAssignor`).

All partitions of all subscribed topics, topics sorted by name and
partitions by number, are dealt one at a time to the members in `MemberInfo`
order (static members first by group.instance.id, then dynamic by member id),
cycling as Java's `CircularIterator` does and skipping a member that does not
subscribe to the partition's topic. With identical subscriptions the counts
differ by at most one; with different ones they may not.
"""

from __future__ import annotations

from coordinator.assignors.base import GroupInput, PartitionAssignor
from coordinator.assignors.java_compat import member_order_key
from coordinator.topic_partition import TopicPartition, java_string_key


class RoundRobinAssignor(PartitionAssignor):
    name = "roundrobin"

    def assign_group(self, group: GroupInput) -> dict[str, list[TopicPartition]]:
        subscriptions = group.subscriptions
        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        members = sorted(subscriptions, key=lambda m: member_order_key(m, subscriptions[m].group_instance_id))
        topics = sorted({t for sub in subscriptions.values() for t in sub.topics}, key=java_string_key)

        cursor = 0
        for topic in topics:
            for partition in range(group.partitions_per_topic.get(topic, 0)):
                # Terminates: the topic came from some member's subscription.
                while topic not in subscriptions[members[cursor]].topics:
                    cursor = (cursor + 1) % len(members)
                assignment[members[cursor]].append(TopicPartition(topic, partition))
                cursor = (cursor + 1) % len(members)
        return assignment
