"""Which Kafka listener coordinates a group, and which brokers Metadata lists, on the direct path.

Kafka answers FindCoordinator with the broker that leads the group's
`__consumer_offsets` partition; raygroups answers the Kafka listener inside
the actor that leads the group's offsets partition (`gateway.direct`).
Rules:
- The address comes from the leader itself (`OffsetPartition.kafka_listener`,
  one Ray call per lookup, never cached across lookups): a leader that
  answers is alive, and says whether it still leads. A leader that no
  longer leads (moved, unloaded) or cannot be reached makes the routing
  refresh once and the new leader be asked (admin clients such as
  kafka-python's do not retry FindCoordinator); a partition with no leader
  then, or whose new leader does not lead either, is
  COORDINATOR_NOT_AVAILABLE, and the client asks again.
- A leader without a listener (turned off, or no free port on its node),
  or whose listener is on loopback on another node (unreachable from this
  broker's clients), is answered with the fallback: the gateway asked,
  which reaches every group through Ray (a listener: COORDINATOR_NOT_AVAILABLE).
- Metadata lists every broker: the gateways and the routed leaders'
  listeners (the controller's `kafka_brokers`, read at most once a
  `BROKERS_TTL_S`), as Kafka lists every broker; aiokafka connects to no
  coordinator Metadata did not list. Loopback brokers of other nodes are
  left out. A gateway names itself in that call, and at least every
  `REGISTER_EVERY_S` while it serves (`keep_registered`): the controller
  forgets a gateway it has not heard from for a while (one that died).
- A listener's Kafka node id names the partition and its leader epoch
  (`listener_node_id`), so it is stable for a leader's incarnation and a
  new leader is a new broker to the client; it never collides with a
  gateway's id (below 2**28, gateway.deploy.kafka_node_id).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coordinator.errors import Errors
from gateway.direct.node_ids import is_listener, listener_partition, ray_node
from gateway.security import is_loopback

logger = logging.getLogger(__name__)

LOOKUP_TIMEOUT_S = 5.0
BROKERS_TTL_S = 1.0
# A serving gateway names itself to the controller this often, Metadata or not: the
# controller lists gateways heard from within its GATEWAY_TTL_S (30 s).
REGISTER_EVERY_S = 10.0

Broker = tuple[int, str, int]


@dataclass(frozen=True, slots=True)
class Coordinator:
    """FindCoordinator's answer for one key: an address, or an error with no node."""

    error: Errors
    node_id: int = -1
    host: str = ""
    port: int = -1


NOT_AVAILABLE = Coordinator(Errors.COORDINATOR_NOT_AVAILABLE)


class LeaderRouting:
    """Group -> the listener of its offsets partition's leader, and the service's brokers,
    through a `Client` (`leader`, `refresh_async`, `partition_for`, `controller`) that
    `make_client` gives (called on this loop's thread; it may block, so it runs in a thread).
    `register`: this broker is a gateway, named to the controller with each brokers read."""

    def __init__(self, make_client: Callable[[], Any], register: bool) -> None:
        self._make_client = make_client
        self._client: Any = None
        self._register = register
        self._node = ""
        self._brokers: list[Broker] = []
        self._brokers_at = -BROKERS_TTL_S
        self._lock = asyncio.Lock()

    async def client(self) -> Any:
        if self._client is None:
            async with self._lock:
                if self._client is None:
                    self._client = await asyncio.to_thread(self._make_client)
                    self._node = ray_node()
        return self._client

    async def coordinator(self, group_id: str, fallback: Coordinator | None) -> Coordinator:
        """The listener coordinating `group_id`; `fallback` where its leader has none
        reachable (None: COORDINATOR_NOT_AVAILABLE there)."""
        try:
            client = await self.client()
        except Exception as exc:  # no controller (yet): the Kafka client asks again
            logger.warning("FindCoordinator for %r: no routing: %r", group_id, exc)
            return NOT_AVAILABLE
        for attempt in range(2):
            partition = client.partition_for(group_id)
            leader = client.leader(partition)
            if leader is None or attempt:
                await client.refresh_async()  # the cached routing may predate the election
                partition = client.partition_for(group_id)  # or a repartition
                leader = client.leader(partition)
            if leader is None:
                return NOT_AVAILABLE
            try:
                found = await asyncio.wait_for(leader.kafka_listener.remote(group_id), LOOKUP_TIMEOUT_S)
            except Exception as exc:  # a dead or hung leader: the routing is asked again
                logger.debug("partition %d: leader's Kafka listener not known: %r", partition, exc)
                continue
            if found is None or not self._reachable(found["host"], found.get("ray_node", "")):
                logger.debug("partition %d: leader without a reachable Kafka listener (%s): %s", partition,
                             found, "the fallback" if fallback else "not available")
                return fallback or NOT_AVAILABLE
            # A group its partition handed off in a repartition: the routing is asked again.
            if found["leads"] and found.get("owns", True):
                return Coordinator(Errors.NONE, found["node_id"], found["host"], found["port"])
        return NOT_AVAILABLE

    async def brokers(self, me: Any) -> list[Broker]:
        """Every broker this broker's clients can reach (module docstring), this node's
        first; `me` is this broker's `GatewayInfo`."""
        now = time.monotonic()
        if now - self._brokers_at < BROKERS_TTL_S:
            return self._brokers
        try:
            client = await self.client()
            own = (me.node_id, me.host, me.port, self._node) if self._register else None
            found = await asyncio.wait_for(client.controller.kafka_brokers.remote(own), LOOKUP_TIMEOUT_S)
        except Exception as exc:  # the controller restarting: this broker alone meanwhile
            logger.warning("Kafka brokers not known: %r", exc)
            return [(me.node_id, me.host, me.port)]
        reachable = [broker for broker in found if self._reachable(broker[1], broker[3])]
        # This node's brokers first: a listener names the first gateway as the topics' leader.
        reachable.sort(key=lambda broker: broker[3] != self._node)
        self._brokers = [(node, host, port) for node, host, port, _ in reachable]
        self._brokers_at = now
        return self._brokers

    async def keep_registered(self, me: Callable[[], Any]) -> None:
        """A gateway's task while it serves (`me()`: its current `GatewayInfo`): name itself
        every `REGISTER_EVERY_S`, so it stays listed without Metadata traffic and a restarted
        controller learns it again; a failed naming is logged and tried again."""
        while True:
            self._brokers_at = -BROKERS_TTL_S  # this read asks the controller, so it names me
            await self.brokers(me())
            await asyncio.sleep(REGISTER_EVERY_S)

    async def listing(self, me: Any) -> Callable[[int], bool]:
        """Which partitions a gateway's ListGroups lists: those whose leader has no
        listener among the brokers (each listener lists its own partition's groups);
        how many there are, the routing says (actors/client/fanout.py `EveryPartition`)."""
        brokers = await self.brokers(me)
        listed = frozenset(listener_partition(node) for node, _, _ in brokers if is_listener(node))
        return lambda partition: partition not in listed

    async def close(self, me: Any) -> None:
        """A gateway closing (`me`, its `GatewayInfo`): the controller lists it no more."""
        if self._register and self._client is not None:
            closed = self._client.controller.kafka_gateway_closed.remote(me.node_id, me.host, me.port)
            try:
                await asyncio.wait_for(closed, LOOKUP_TIMEOUT_S)
            except Exception as exc:
                logger.warning("the controller may still list this gateway: %r", exc)

    def _reachable(self, host: str, where: str) -> bool:
        """A loopback address is reachable only from its own node."""
        return not is_loopback(host) or not where or not self._node or where == self._node
