"""What a leader's Kafka listener serves its connections with: the gateway's code, loaded late.

The heavy half of `gateway.direct.listener`: the connection core the
gateway uses (`gateway.connection`: frame limits, SASL gate, memory pool,
deadlines, idle sweep), the APIs a listener answers in process
(`gateway.direct.local`), FindCoordinator's and Metadata's answers through
the controller's routing (`gateway.direct.routing`) and the ACL guard.
Importing it costs a process some 3 MiB (kio, the handlers, the Ray
client), so a plaintext listener imports it when its first client connects,
a secured one at start (`gateway.plain`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import ray

from actors.client.client import Client, controller_handle
from actors.core.settings import TOPIC_REGISTRY_NAME
from coordinator.errors import Errors
from gateway.authorize import guard_for
from gateway.connection import ConnectionCore, KafkaConnection, Limits
from gateway.direct import local
from gateway.direct.node_ids import listener_node_id
from gateway.direct.routing import Coordinator, LeaderRouting
from gateway.security import SecurityConfig


def security_of(host: Any) -> SecurityConfig:
    """The security of partition actor `host`'s listener, read on this node from the paths
    in the service's settings."""
    return SecurityConfig.read(host.settings.kafka_listener)


class ServedListener:
    """The connections of one partition actor's listener (`host`, an
    `actors.partition.kafka_plug.ListenerHost`) bound at `bind_host`:`port`."""

    def __init__(
        self, host: Any, bind_host: str, port: int, security: SecurityConfig, log: logging.Logger
    ) -> None:
        self.host = host
        self.bind_host = bind_host
        self.port = port
        self.security = security
        self.client = local.LocalClient(host)
        self.routing = LeaderRouting(self._make_client, register=False)
        self.core = ConnectionCore(
            f"Kafka listener of partition {host.partition}", security,
            Limits(**dict(host.settings.kafka_listener.limits)), local.SUPPORTED, local.handle,
            lambda: (self.info(), self.client, self), log,
            guard_for(security, self._registry),
        )

    def start(self) -> None:
        """Start the idle sweeper (on the running loop)."""
        self.core.start()

    def protocol(self) -> KafkaConnection:
        """A new connection (the server's protocol factory)."""
        return self.core.protocol()

    @property
    def node_id(self) -> int:
        return listener_node_id(self.host.partition, self.host.epoch)

    def stats(self) -> dict[str, Any]:
        return {**self.core.stats(), "served": dict(self.core.served)}

    def acls_changed(self) -> None:
        """The topic registry's push after an ACL change: read them now (`AclWatch.nudge`)."""
        if self.core.guard is not None:
            self.core.guard.watch.nudge()

    def info(self) -> local.ListenerInfo:
        return local.ListenerInfo(self.node_id, self.bind_host, self.port)

    async def coordinator(self, group_id: str, fallback: Coordinator | None) -> Coordinator:
        """FindCoordinator's answer for `group_id` (gateway.direct.local); a leader
        without a reachable listener is COORDINATOR_NOT_AVAILABLE (no `fallback` here)."""
        if self.client.partition_for(group_id) == self.host.partition and self.host.leads():
            return Coordinator(Errors.NONE, self.node_id, self.bind_host, self.port)
        return await self.routing.coordinator(group_id, None)

    async def brokers(self, me: Any) -> list[tuple[int, str, int]]:
        """Metadata's brokers: the service's, this listener among them."""
        return await self.routing.brokers(me)

    async def listing(self, me: Any) -> Callable[[int], bool]:
        """ListGroups on a listener lists its own partition's groups, as a Kafka broker."""
        own = self.host.partition
        return lambda partition: partition == own

    async def registry_client(self) -> Client | None:
        """The service's `Client` (the topic registry through Ray); None without one."""
        try:
            client: Client = await self.routing.client()
        except Exception:
            return None
        return client

    def _registry(self) -> Any:
        if not ray.is_initialized():  # a partition driven without Ray (tests)
            raise RuntimeError("no Ray: no topic registry")
        return ray.get_actor(TOPIC_REGISTRY_NAME, namespace=self.host.settings.namespace)

    def _make_client(self) -> Client:
        if not ray.is_initialized():  # a partition driven without Ray (tests): get_actor would start one
            raise RuntimeError("no Ray: no controller")
        # A service component: it authorizes its clients itself (docs/security.md).
        return Client(controller_handle(self.host.settings.namespace), service=True)

    async def close(self) -> None:
        await self.core.close()
