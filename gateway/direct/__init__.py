"""Kafka clients straight to the coordinator: a Kafka listener in each partition leader.

Kafka's clients find a group's coordinator with FindCoordinator and then
talk to that broker alone. raygroups answers FindCoordinator with the
listener inside the actor that leads the group's offsets partition
(`routing`), which serves the group and offset APIs on the partition's own
event loop through the gateway's handlers (`local`, `listener`): one hop
and one encode/decode per request, no Ray call and no pickle (DESIGN 9).
The gateways stay the bootstrap brokers (ApiVersions, Metadata, topics,
ListGroups and the other fan-out admin requests) and the fallback path
(`raygroups gateway --no-direct`, `KafkaListenerSettings.enabled`).

The partition actor loads `listener.plugin` through the
`raygroups.partition_listeners` entry point, as actors/ never imports
gateway/ (actors.partition.kafka_plug).
"""
