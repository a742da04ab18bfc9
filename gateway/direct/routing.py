"""Which Kafka listener coordinates a group: FindCoordinator's answer on the direct path.

Kafka answers FindCoordinator with the broker that leads the group's
`__consumer_offsets` partition; raygroups answers the Kafka listener inside
the actor that leads the group's offsets partition (`gateway.direct`).
Rules:
- The address comes from the leader itself (`OffsetPartition.kafka_listener`,
  one Ray call per lookup, never cached across lookups): a leader that
  answers is alive, and says whether it still leads. A leader that no
  longer leads (moved, unloaded) makes the routing refresh once and the new
  leader be asked; a leader that cannot be reached, or a partition with no
  leader, is COORDINATOR_NOT_AVAILABLE, and the client asks again.
- A leader without a listener (turned off, or no free port on its node)
  is answered with the fallback: the gateway asked, which reaches every
  group through Ray.
- A listener's Kafka node id names the partition and its leader epoch
  (`listener_node_id`), so it is stable for a leader's incarnation and a
  new leader is a new broker to the client; it never collides with a
  gateway's id (below 2**28, gateway.deploy.kafka_node_id).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from coordinator.errors import Errors

logger = logging.getLogger(__name__)

LISTENER_NODE_BASE = 1 << 28
PARTITIONS_MAX = 1 << 12
# Leader epochs wrap after this many: a node id is reused only 16384 incarnations later.
EPOCHS_WRAP = 1 << 14
LOOKUP_TIMEOUT_S = 5.0


def listener_node_id(partition: int, epoch: int) -> int:
    """The Kafka node id of `partition`'s listener under leader `epoch` (a positive int32)."""
    if not 0 <= partition < PARTITIONS_MAX:
        raise ValueError(f"direct listeners serve partitions 0-{PARTITIONS_MAX - 1}, not {partition}")
    return LISTENER_NODE_BASE + (epoch % EPOCHS_WRAP) * PARTITIONS_MAX + partition


@dataclass(frozen=True, slots=True)
class Coordinator:
    """FindCoordinator's answer for one key: an address, or an error with no node."""

    error: Errors
    node_id: int = -1
    host: str = ""
    port: int = -1


NOT_AVAILABLE = Coordinator(Errors.COORDINATOR_NOT_AVAILABLE)


class LeaderRouting:
    """Group -> the listener of its offsets partition's leader, through a `Client`'s
    routing (`leader(partition)`, `refresh_async`, `partition_for`)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def coordinator(self, group_id: str, fallback: Coordinator | None) -> Coordinator:
        """The listener coordinating `group_id`; `fallback` where its leader has none
        (None: COORDINATOR_NOT_AVAILABLE there)."""
        client = self.client
        partition = client.partition_for(group_id)
        for attempt in range(2):
            leader = client.leader(partition)
            if leader is None or attempt:
                await client.refresh_async()  # the cached routing may predate the election
                leader = client.leader(partition)
            if leader is None:
                return NOT_AVAILABLE
            try:
                found = await asyncio.wait_for(leader.kafka_listener.remote(), LOOKUP_TIMEOUT_S)
            except Exception as exc:  # a dead or hung leader: the client asks again shortly
                logger.debug("partition %d: leader's Kafka listener not known: %r", partition, exc)
                await client.refresh_async()
                return NOT_AVAILABLE
            if found is None:
                return fallback or NOT_AVAILABLE
            if found["leads"]:
                return Coordinator(Errors.NONE, found["node_id"], found["host"], found["port"])
        return NOT_AVAILABLE
