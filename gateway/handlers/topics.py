"""What the gateway tells Kafka clients about topics: the topic registry, seen as a broker's log.

raygroups holds no topic data; the registry (actors/client/topics.py) knows each
topic's partition count and each partition's log start and end offsets as
producers or adapters report them. Rules:
- A partition exists when the registry has its topic with more partitions
  than its index; anything else is UNKNOWN_TOPIC_OR_PARTITION.
- Every partition's leader is the gateway asked, at leader epoch 0 (the
  registry has no leader changes): any gateway answers for every
  partition, and the one a client reached is the one known to be up.
- A topic's id is the registry's (`Client.topic_ids_async`): given at
  creation, kept with the topic, never the zero UUID Kafka reserves, and
  the id the coordinator assigns consumer groups' partitions by (KIP-848).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actors.client import topics as registry
from coordinator.errors import Errors

if TYPE_CHECKING:
    from gateway.context import RequestContext

LEADER_EPOCH = 0

Bounds = dict[tuple[str, int], int]


async def topics_with_ids(
    ctx: RequestContext, names: Iterable[str] | None
) -> dict[str, tuple[int, uuid.UUID]]:
    """(partition count, topic id) per existing topic of `names` (every topic when None)."""
    wanted = None if names is None else list(names)
    counts, ids = await asyncio.gather(
        ctx.client.describe_topics_async(wanted), ctx.client.topic_ids_async(wanted)
    )
    # A topic created between the two reads is left to the next request.
    return {name: (count, ids[name]) for name, count in counts.items() if name in ids}


@dataclass(frozen=True, slots=True)
class TopicIds:
    """The registry's topic ids both ways, for requests that name topics by id."""

    names: dict[uuid.UUID, str]
    ids: dict[str, uuid.UUID]


async def topic_ids(ctx: RequestContext) -> TopicIds:
    """Every topic's id, and every id's topic."""
    ids = await ctx.client.topic_ids_async(None)
    return TopicIds({topic_id: name for name, topic_id in ids.items()}, ids)


async def offset_bounds(ctx: RequestContext, names: Iterable[str]) -> tuple[Bounds, Bounds]:
    """(log start offsets, end offsets) of every partition of the existing topics of `names`."""
    wanted = sorted(set(names))
    controller = ctx.client.controller
    start, end = await asyncio.gather(
        registry.start_offsets_async(controller, wanted), registry.end_offsets_async(controller, wanted)
    )
    return start, end


def partition_error(end: Bounds, topic: str, partition: int) -> Errors:
    """NONE for a partition the registry has, else UNKNOWN_TOPIC_OR_PARTITION."""
    return Errors.NONE if (topic, partition) in end else Errors.UNKNOWN_TOPIC_OR_PARTITION
