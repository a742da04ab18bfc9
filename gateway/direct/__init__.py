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

The partition actor loads this package through the
`raygroups.partition_listeners` entry point (`plugin`), as actors/ never
imports gateway/ (actors.partition.kafka_plug).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.direct.listener import DirectListener


def plugin(host: Any) -> DirectListener:
    """The listener of partition actor `host` (`actors.partition.kafka_plug.ListenerHost`), not started.

    Security is read on this node, from the paths in the service's settings:
    without SASL or TLS the listener is on loopback (gateway.security), else
    on the node's IP, as the deployed gateways are."""
    # Imported here: gateway.server imports this package's routing (no import circle).
    from gateway.direct.listener import DirectListener
    from gateway.security import SecurityConfig, load_plain_users
    from gateway.server import DEFAULT_HOST, Limits

    config = host.settings.kafka_listener
    security = SecurityConfig(
        plain_users=load_plain_users(config.sasl_users_file),
        tls_cert=config.tls_cert,
        tls_key=config.tls_key,
        tls_client_ca=config.tls_client_ca,
    )
    bind_host = DEFAULT_HOST
    if security.sasl or security.tls:
        import ray

        bind_host = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return DirectListener(host, bind_host, security, Limits(**dict(config.limits)))
