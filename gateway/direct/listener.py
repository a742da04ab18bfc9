"""A partition leader's Kafka listener: a socket on the partition's event loop.

The listener runs on the partition actor's event loop, beside its runtime,
whose one thread is the scarce resource (DESIGN 9). Its connections are the
gateway's (`gateway.connection`, one core for both): asyncio protocols that
parse every complete frame of a read in one pass, answer in request order,
and apply the same `Limits` (frame size, SASL gate, memory pool held until
the answer is written, frame deadline, idle sweep, connection cap), with
SASL/PLAIN and TLS from the same files, loopback only without either. What
the listener adds: its port, the APIs it serves (`local`), FindCoordinator's
and Metadata's answers through the controller's routing, and `describe`.
- A flood of connections cannot stall the shard: each pass of the loop
  handles what one socket read brought, connections past the cap are
  closed at accept, and a slow client is closed at its frame's deadline.
- Port: the first free one of the node's range
  (`KafkaListenerSettings.ports`); `ListenerUnavailable` when none is.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable
from typing import Any

import ray

from actors.client.client import Client, controller_handle
from actors.core.settings import TOPIC_REGISTRY_NAME
from coordinator.errors import Errors
from gateway.authorize import guard_for
from gateway.connection import DEFAULT_HOST, ConnectionCore, Limits
from gateway.direct import local
from gateway.direct.routing import Coordinator, LeaderRouting, listener_node_id, ray_node
from gateway.security import SecurityConfig, load_plain_users

logger = logging.getLogger(__name__)


def plugin(host: Any) -> DirectListener:
    """The listener of partition actor `host` (`actors.partition.kafka_plug.ListenerHost`), not
    started: the `raygroups.partition_listeners` entry point.

    Security is read on this node, from the paths in the service's settings:
    without SASL or TLS the listener is on loopback (gateway.security), else
    on the node's IP, as the deployed gateways are."""
    config = host.settings.kafka_listener
    security = SecurityConfig(
        plain_users=load_plain_users(config.sasl_users_file),
        tls_cert=config.tls_cert,
        tls_key=config.tls_key,
        tls_client_ca=config.tls_client_ca,
        super_users=frozenset(config.super_users),
        allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
        ssl_principal_mapping_rules=config.ssl_principal_mapping_rules,
    )
    bind_host = DEFAULT_HOST
    if security.sasl or security.tls:
        bind_host = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return DirectListener(host, bind_host, security, Limits(**dict(config.limits)))


class ListenerUnavailable(Exception):
    """The listener cannot listen (no free port in its range)."""


class DirectListener:
    """The Kafka listener of one partition actor (`host`, an `actors.partition.kafka_plug.ListenerHost`)."""

    def __init__(self, host: Any, bind_host: str, security: SecurityConfig, limits: Limits) -> None:
        self.host = host
        self.bind_host = bind_host
        self.security = security
        self.limits = limits
        self.port = -1
        self.client = local.LocalClient(host)
        self.routing = LeaderRouting(self._make_client, register=False)
        self.ray_node = ray_node()
        self.core = ConnectionCore(
            f"Kafka listener of partition {host.partition}", security, limits, local.SUPPORTED, local.handle,
            lambda: (self.info(), self.client, self), logger,
            guard_for(security, self._registry),
        )
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        low, high = self.host.settings.kafka_listener.ports
        loop = asyncio.get_running_loop()
        tls = self.security.ssl_context()
        for port in range(low, high + 1):
            try:
                self._server = await loop.create_server(
                    self.core.protocol, self.bind_host, port, ssl=tls, backlog=1024
                )
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    continue
                raise
            self.port = port
            break
        else:
            raise ListenerUnavailable(f"no free port in {low}-{high} on {self.bind_host}")
        self.core.start()
        logger.info("partition %d: Kafka listener on %s:%d (%s)", self.host.partition, self.bind_host,
                    self.port, self.security.protocol)

    def acls_changed(self) -> None:
        """The topic registry's push after an ACL change: read them now (`AclWatch.nudge`)."""
        if self.core.guard is not None:
            self.core.guard.watch.nudge()

    @property
    def node_id(self) -> int:
        return listener_node_id(self.host.partition, self.host.epoch)

    def describe(self) -> dict[str, Any]:
        return {
            "host": self.bind_host, "port": self.port, "node_id": self.node_id, "ray_node": self.ray_node,
            "protocol": self.security.protocol, **self.core.stats(), "served": dict(self.core.served),
        }

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
        if self._server is not None:
            self._server.close()
        await self.core.close()
