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
ConsumerGroupDescribe, plus ApiVersions (and SASL) on every connection.
Metadata, topic APIs and ListGroups stay on the gateways, the bootstrap
brokers. Rules:
- A group of another offsets partition is answered NOT_COORDINATOR (per
  group where a request names several), as a Kafka broker answers for a
  group it does not coordinate; the client then asks FindCoordinator again.
- While this leader loads, is deposed or unloads, its runtime answers as
  it answers Ray callers (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR),
  also fenced by its leader epoch: a zombie leader cannot take commits.
- FindCoordinator: this listener for its own partition's groups while it
  leads; any other group's listener through the controller's routing
  (`routing.LeaderRouting`), as a gateway answers.
- v10 OffsetCommit and OffsetFetch name topics by id: the ids are those the
  partition's shard knows (the topic registry's last view).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from actors.client.client import Client, controller_handle
from coordinator.errors import Errors
from coordinator.messages import JoinGroupRequest, Request, SyncGroupRequest
from coordinator.routing import partition_for
from gateway import apis
from gateway.direct.routing import Coordinator, LeaderRouting
from gateway.handlers.calls import failed
from gateway.handlers.entities import respond
from gateway.handlers.metadata import GROUP_KEY_TYPE, NO_TRANSACTIONS

FIND_COORDINATOR = 10
SERVED_KEYS = (8, 9, 10, 11, 12, 13, 14, 15, 42, 47, 68, 69)
SUPPORTED: dict[int, tuple[int, int]] = {key: apis.SUPPORTED[key] for key in SERVED_KEYS}


class LocalClient:
    """What the gateway's handlers use of a `Client`, answered by the partition in process."""

    def __init__(self, host: Any, listener: Any) -> None:
        self.host = host
        self.listener = listener
        self.num_partitions = host.settings.num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

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
        ids: dict[str, UUID] = self.host.topic_ids()
        return ids if names is None else {name: ids[name] for name in names if name in ids}


@dataclass(frozen=True, slots=True)
class ListenerInfo:
    """The listener as the handlers' `ctx.gateway`: this broker's id and address."""

    node_id: int
    host: str
    port: int
    cluster_id: str = "raygroups"

    def all_brokers(self) -> tuple[tuple[int, str, int], ...]:
        return ((self.node_id, self.host, self.port),)


class Routes:
    """FindCoordinator for groups of other partitions, through a `Client`'s routing, made
    on first use (its constructor reads the controller's routing with a blocking call)."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._routing: LeaderRouting | None = None
        self._making: asyncio.Lock = asyncio.Lock()

    async def coordinator(self, group_id: str) -> Coordinator:
        async with self._making:
            if self._routing is None:
                client = await asyncio.to_thread(lambda: Client(controller_handle(self._namespace)))
                self._routing = LeaderRouting(client)
        return await self._routing.coordinator(group_id, None)


async def handle_find_coordinator(ctx: apis.RequestContext, request: Any) -> Any:
    if request.__version__ >= 4:
        found = [await _coordinator(ctx, request.key_type, key) for key in request.coordinator_keys]
        return respond(request, {"coordinators": found})
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    return respond(request, await _coordinator(ctx, key_type, request.key))


async def _coordinator(ctx: apis.RequestContext, key_type: int, key: str) -> dict[str, Any]:
    if key_type != GROUP_KEY_TYPE:
        found, message = Coordinator(Errors.INVALID_REQUEST), NO_TRANSACTIONS
    else:
        listener: Any = ctx.client
        found, message = await listener.listener.coordinator(key), None
    return {
        "key": key,
        "node_id": found.node_id,
        "host": found.host,
        "port": found.port,
        "error_code": found.error,
        "error_message": message,
    }


async def handle(ctx: apis.RequestContext, request: Any) -> Any:
    """The kio response to a request of a `SUPPORTED` key and version."""
    api_key = int(request.__api_key__)
    if api_key == FIND_COORDINATOR:
        return await handle_find_coordinator(ctx, request)
    return await apis.HANDLERS[api_key](ctx, request)
