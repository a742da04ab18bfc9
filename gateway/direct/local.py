"""The APIs a leader's listener answers, through the gateway's handlers, in process.

The handlers of `gateway.handlers` translate between kio entities and the
coordinator's requests and send those through `ctx.client`. Here that
client is a `LocalClient`: a request for a group of this leader's
partition goes into the partition actor's runtime in the same process and
on the same event loop (`ListenerHost.handle`): no Ray call, no pickle. So
the handlers are the gateway's, unchanged, and a Kafka client sees the same
answers on both paths.

What a listener serves (`SUPPORTED`, a subset of the gateway's versions):
the requests Kafka sends to a group's coordinator: FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
OffsetDelete, DescribeGroups, DeleteGroups, ConsumerGroupHeartbeat and
ConsumerGroupDescribe, plus ApiVersions (and SASL) on every connection,
and what clients ask any broker, as Metadata lists the listener as one:
Metadata and DescribeCluster (the topics as its shard sees them, each
partition led by a gateway), ListGroups (its own partition's groups; the
gateways list the rest) and InitProducerId (an idempotent producer's id,
under this listener's node id, so it is unique). Produce, Fetch,
ListOffsets and the other topic APIs go to the partitions' leaders, the
gateways. Rules:
- A group of another offsets partition is answered NOT_COORDINATOR (per
  group where a request names several), as a Kafka broker answers for a
  group it does not coordinate; the client then asks FindCoordinator again.
- While this leader loads, is deposed or unloads, its runtime answers as
  it answers Ray callers (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR),
  also fenced by its leader epoch: a zombie leader cannot take commits.
- FindCoordinator: this listener for its own partition's groups while it
  leads; any other group's listener through the controller's routing
  (`routing.LeaderRouting`), as a gateway answers.
- Metadata names the topics of the registry, read through Ray as a gateway
  reads them (a topic just created is known at once); without Ray, the
  registry's last view this leader got.
- v10 OffsetCommit and OffsetFetch name topics by id: the ids are those the
  partition's shard knows (the topic registry's last view).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from actors.client.fanout import Plan, Through, one_round
from coordinator.errors import Errors
from coordinator.messages import JoinGroupRequest, Request, SyncGroupRequest
from coordinator.routing import Routing
from gateway import apis
from gateway.context import RequestContext
from gateway.direct.node_ids import is_listener
from gateway.handlers.calls import failed

# Answers that name the broker leading every topic partition (and the cluster's controller).
NAMES_LEADERS = (3, 60)  # Metadata, DescribeCluster
SERVED_KEYS = (3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 22, 42, 47, 60, 68, 69)
SUPPORTED: dict[int, tuple[int, int]] = {key: apis.SUPPORTED[key] for key in SERVED_KEYS}


class LocalClient:
    """What the gateway's handlers use of a `Client`, answered by the partition in process."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.configured = Routing(host.settings.num_partitions)

    @property
    def routing(self) -> Routing:
        """The routing the partition owns groups by, once the controller pushed one (a
        repartition ran), else Kafka's rule over the configured count."""
        owner: Routing | None = self.host.routing()
        return self.configured if owner is None else owner

    @property
    def num_partitions(self) -> int:
        return self.routing.partitions

    def partition_for(self, group_id: str) -> int:
        return self.routing.partition_for(group_id)

    async def fan_out_async(self, plan: Plan, through: Through | None = None) -> list[Any]:
        """An admin request of many groups or partitions (actors/client/fanout.py): this
        partition answers its part; the rest is NOT_COORDINATOR (`send_async`)."""
        return await one_round(plan, self, self.send_async, through)

    async def send_async(self, request: Request, partition: int | None = None) -> Any:
        if partition is None:
            partition = self.partition_for(request.group_id)  # type: ignore[union-attr]
        if partition != self.host.partition:
            return failed(request, Errors.NOT_COORDINATOR)
        return await self.host.handle(request)

    async def join_group_async(self, request: JoinGroupRequest) -> Any:
        return await self.send_async(request)

    async def sync_group_async(self, request: SyncGroupRequest) -> Any:
        return await self.send_async(request)

    async def topic_ids_async(self, names: Any) -> dict[str, UUID]:
        ids: dict[str, UUID] = self.host.topic_view()[1]
        return ids if names is None else {name: ids[name] for name in names if name in ids}

    async def describe_topics_async(self, names: Any) -> dict[str, int]:
        counts: dict[str, int] = self.host.topic_view()[0]
        return counts if names is None else {name: counts[name] for name in names if name in counts}


@dataclass(frozen=True, slots=True)
class ListenerInfo:
    """The listener as the handlers' `ctx.gateway`: this broker's id and address, and
    the gateway Metadata names as every topic partition's leader (-1: none known)."""

    node_id: int
    host: str
    port: int
    data_node_id: int = -1
    cluster_id: str = "raygroups"

    def all_brokers(self) -> tuple[tuple[int, str, int], ...]:
        return ((self.node_id, self.host, self.port),)


async def handle(ctx: RequestContext, request: Any) -> Any:
    """The kio response to a request of a `SUPPORTED` key and version."""
    api_key = int(request.__api_key__)
    if api_key in NAMES_LEADERS:
        # Topic partitions are led by a gateway (Fetch, ListOffsets): the first one listed.
        brokers = await ctx.direct.brokers(ctx.gateway)
        leader = next((node for node, _, _ in brokers if not is_listener(node)), -1)
        info: Any = ctx.gateway
        ctx = dataclasses.replace(ctx, gateway=dataclasses.replace(info, data_node_id=leader))
        # The topics as the gateways read them (the registry), not this shard's last view of it.
        registry = await ctx.direct.registry_client()
        if registry is not None:
            ctx = dataclasses.replace(ctx, client=registry)
    return await apis.HANDLERS[api_key](ctx, request)
