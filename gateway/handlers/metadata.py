"""Metadata, FindCoordinator and DescribeCluster: the gateways as Kafka's brokers.

- Brokers are the service's gateways (`GatewayInfo.all_brokers`), the
  controller is the gateway asked, the topics those of the registry
  (handlers/topics.py, where partition leadership is explained).
  Metadata v0 asks for every topic with an empty list, v1+ with null (an
  empty list then asks for none); v10+ may name a topic by id. An unknown
  topic gets UNKNOWN_TOPIC_OR_PARTITION (unknown id: UNKNOWN_TOPIC_ID) and
  no partitions: topics are never created on demand.
- FindCoordinator names the gateway asked as every group's coordinator.
  Every gateway reaches every offsets partition through Ray, so any one
  can coordinate any group; the one a client just reached is known to be
  up, and pointing a group at the gateway on its leader's node would save
  one in-cluster hop but send clients elsewhere, and make them rediscover,
  whenever a partition's leadership moves. A group whose offsets partition
  has no leader gets COORDINATOR_NOT_AVAILABLE and no node, as Kafka
  answers. v0-3 ask for one key, v4+ for several (KIP-699). Only group
  keys are served: there is no transaction coordinator (INVALID_REQUEST).
- DescribeCluster lists the same brokers as Metadata.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from coordinator.errors import Errors
from gateway.handlers.entities import respond
from gateway.handlers.topics import LEADER_EPOCH, partition_counts, topic_id

if TYPE_CHECKING:
    from gateway.apis import RequestContext

GROUP_KEY_TYPE = 0
ZERO_UUID = uuid.UUID(int=0)
NO_TRANSACTIONS = "raygroups coordinates consumer groups only: there is no transaction coordinator"


def _brokers(ctx: RequestContext) -> list[dict[str, Any]]:
    return [
        {"node_id": n, "broker_id": n, "host": h, "port": p, "rack": None}
        for n, h, p in ctx.gateway.all_brokers()
    ]


# ----------------------------------------------------------------- Metadata


async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    asked = request.topics
    every = asked is None or (request.__version__ == 0 and not asked)
    counts = await partition_counts(
        ctx, None if every or any(t.name is None for t in asked) else [t.name for t in asked]
    )
    if every:
        topics = [_topic(ctx, name, counts[name]) for name in sorted(counts)]
    else:
        by_id = {topic_id(name): name for name in counts}
        topics = [_asked_topic(ctx, t, counts, by_id) for t in asked]
    node = ctx.gateway.node_id
    return respond(
        request,
        {
            "brokers": _brokers(ctx),
            "cluster_id": ctx.gateway.cluster_id,
            "controller_id": node,
            "topics": topics,
        },
    )


def _asked_topic(
    ctx: RequestContext, asked: Any, counts: dict[str, int], by_id: dict[uuid.UUID, str]
) -> dict[str, Any]:
    name = asked.name
    if name is None:
        name = by_id.get(getattr(asked, "topic_id", None) or ZERO_UUID)
        if name is None:
            return {
                "error_code": ErrorCode.unknown_topic_id,
                "name": None,
                "topic_id": asked.topic_id,
                "partitions": [],
            }
    if name not in counts:
        return {
            "error_code": Errors.UNKNOWN_TOPIC_OR_PARTITION,
            "name": name,
            "topic_id": ZERO_UUID,
            "partitions": [],
        }
    return _topic(ctx, name, counts[name])


def _topic(ctx: RequestContext, name: str, partitions: int) -> dict[str, Any]:
    node = ctx.gateway.node_id
    return {
        "error_code": Errors.NONE,
        "name": name,
        "topic_id": topic_id(name),
        "is_internal": False,
        "partitions": [
            {
                "error_code": Errors.NONE,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": (node,),
                "isr_nodes": (node,),
                "offline_replicas": (),
            }
            for p in range(partitions)
        ],
    }


# ---------------------------------------------------------- FindCoordinator


async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    if request.__version__ >= 4:
        found = [await _coordinator(ctx, request.key_type, key) for key in request.coordinator_keys]
        return respond(request, {"coordinators": found})
    return respond(
        request, await _coordinator(ctx, getattr(request, "key_type", GROUP_KEY_TYPE), request.key)
    )


async def _coordinator(ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
    if key_type != GROUP_KEY_TYPE:
        return _no_coordinator(key, Errors.INVALID_REQUEST, NO_TRANSACTIONS)
    client = ctx.client
    partition = client.partition_for(key)
    if client.leader(partition) is None:
        await client.refresh_async()  # the cached routing may predate the election
        if client.leader(partition) is None:
            return _no_coordinator(key, Errors.COORDINATOR_NOT_AVAILABLE, None)
    gateway = ctx.gateway
    return {
        "key": key,
        "node_id": gateway.node_id,
        "host": gateway.host,
        "port": gateway.port,
        "error_code": Errors.NONE,
        "error_message": None,
    }


def _no_coordinator(key: str, error: Errors, message: str | None) -> dict[str, Any]:
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": message}


# ---------------------------------------------------------- DescribeCluster


async def handle_describe_cluster(ctx: RequestContext, request: Any) -> Any:
    return respond(
        request,
        {
            "error_code": Errors.NONE,
            "cluster_id": ctx.gateway.cluster_id,
            "controller_id": ctx.gateway.node_id,
            "brokers": _brokers(ctx),
        },
    )
