"""Metadata, FindCoordinator and DescribeCluster: the gateways as Kafka's brokers.

- Brokers are the service's gateways (`GatewayInfo.all_brokers`) and,
  on the direct path, the partition leaders' Kafka listeners
  (gateway.direct.routing); the controller is the gateway asked, the topics those of the registry
  (handlers/topics.py, where partition leadership is explained).
  Metadata v0 asks for every topic with an empty list, v1+ with null (an
  empty list then asks for none). An unknown topic gets
  UNKNOWN_TOPIC_OR_PARTITION and no partitions: topics are never created
  on demand. v10+ answers each topic's id, the registry's (topics.py).
- Lookups by topic id, as KafkaApis.handleTopicMetadataRequest: v12+ may
  name topics by id (librdkafka does for KIP-848 assignments); once any
  non-zero id is asked, the names are ignored and each distinct id is
  answered, an unknown one with UNKNOWN_TOPIC_ID, a null name and its id.
  v10-11 with a null name or an id is Kafka's error response: every topic
  asked answered INVALID_REQUEST.
- FindCoordinator, direct (the default): the Kafka listener inside the
  actor leading the group's offsets partition (gateway.direct.routing), as
  Kafka answers the broker leading the group's `__consumer_offsets`
  partition; the gateway itself where that leader has no listener.
  Without direct (`--no-direct`): the gateway asked, for every group; every
  gateway reaches every offsets partition through Ray, and the one a
  client just reached is known to be up. Either way a group whose offsets
  partition has no leader (or whose leader cannot be reached) gets
  COORDINATOR_NOT_AVAILABLE and no node, as Kafka answers. v0-3 ask for
  one key, v4+ for several (KIP-699). Only group keys are served: there is
  no transaction coordinator (INVALID_REQUEST). With the authorizer on, a
  group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED (and
  Metadata answers a topic it may not DESCRIBE TOPIC_AUTHORIZATION_FAILED,
  or leaves it out of the list of every topic).
- DescribeCluster lists the same brokers as Metadata.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from actors.client.retry import CoordinatorUnavailableError
from coordinator.acl import Operation, ResourceType
from coordinator.errors import Errors
from gateway.authorize import undescribable_topics
from gateway.direct.routing import Coordinator
from gateway.handlers.entities import respond
from gateway.handlers.topics import LEADER_EPOCH, topics_with_ids

if TYPE_CHECKING:
    from gateway.context import RequestContext

GROUP_KEY_TYPE = 0
ZERO_UUID = uuid.UUID(int=0)
# The zero UUID as kio reads and writes it (the same 16 zero bytes): "no topic id".
NO_TOPIC_ID = None
# MetadataRequest.json: "Version 12 supports topic Id"; 10-11 have the field but Kafka refuses it.
TOPIC_ID_LOOKUP_VERSION = 12
NO_TRANSACTIONS = "raygroups coordinates consumer groups only: there is no transaction coordinator"


async def _brokers(ctx: RequestContext) -> list[dict[str, Any]]:
    known = {broker[0]: broker for broker in ctx.gateway.all_brokers()}
    if ctx.direct is not None:
        for broker in await ctx.direct.brokers(ctx.gateway):
            known.setdefault(broker[0], broker)
    return [
        {"node_id": n, "broker_id": n, "host": h, "port": p, "rack": None}
        for n, h, p in sorted(known.values())
    ]


# ----------------------------------------------------------------- Metadata


async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    asked = request.topics
    every = asked is None or (request.__version__ == 0 and not asked)
    if every:
        known = await topics_with_ids(ctx, None)
        topics = [_topic(ctx, name, *known[name]) for name in sorted(known)]
    elif request.__version__ < TOPIC_ID_LOOKUP_VERSION and any(
        t.name is None or _asked_id(t) != ZERO_UUID for t in asked
    ):
        topics = [_invalid(t) for t in asked]
    else:
        ids = list(dict.fromkeys(i for i in map(_asked_id, asked) if i != ZERO_UUID))
        # Kafka: once any topic is asked by id, the names asked are not looked at.
        known = await topics_with_ids(ctx, None if ids else [t.name for t in asked])
        if ids:
            names = {topic_id: name for name, (_, topic_id) in known.items()}
            topics = [_topic_by_id(ctx, i, names.get(i), known) for i in ids]
        else:
            topics = [_topic_by_name(ctx, t.name, known) for t in asked]
    topics = await _authorized(ctx, topics, every)
    return respond(
        request,
        {
            "brokers": await _brokers(ctx),
            "cluster_id": ctx.gateway.cluster_id,
            "controller_id": ctx.gateway.data_node_id,
            "topics": topics,
        },
    )


async def _authorized(ctx: RequestContext, topics: list[dict[str, Any]], every: bool) -> list[dict[str, Any]]:
    """With the authorizer on, the topics the principal may not DESCRIBE: left out of a list
    of every topic, else TOPIC_AUTHORIZATION_FAILED whether they exist or not (Kafka's
    answer, which tells nothing of them); while the ACLs are not read, LEADER_NOT_AVAILABLE."""
    try:
        hidden = await undescribable_topics(ctx.client, (t["name"] for t in topics if t["name"] is not None))
    except CoordinatorUnavailableError:
        return [{**t, "error_code": Errors.LEADER_NOT_AVAILABLE, "partitions": []} for t in topics]
    if not hidden:
        return topics
    if every:
        return [t for t in topics if t["name"] not in hidden]
    return [
        {**t, "error_code": Errors.TOPIC_AUTHORIZATION_FAILED, "topic_id": NO_TOPIC_ID, "partitions": []}
        if t["name"] in hidden else t
        for t in topics
    ]


def _asked_id(asked: Any) -> uuid.UUID:
    """The topic id a Metadata topic asks for (kio reads the zero UUID as None; v0-9 have none)."""
    return getattr(asked, "topic_id", None) or ZERO_UUID


def _invalid(asked: Any) -> dict[str, Any]:
    """Kafka's MetadataRequest.getErrorResponse entry for a v10-11 request with a null name or an id."""
    return {
        "error_code": Errors.INVALID_REQUEST,
        "name": asked.name or "",
        "topic_id": getattr(asked, "topic_id", NO_TOPIC_ID),
        "partitions": [],
    }


def _topic_by_id(
    ctx: RequestContext, topic_id: uuid.UUID, name: str | None, known: dict[str, tuple[int, uuid.UUID]]
) -> dict[str, Any]:
    if name is None:
        unknown = ErrorCode.unknown_topic_id
        return {"error_code": unknown, "name": None, "topic_id": topic_id, "partitions": []}
    return _topic(ctx, name, *known[name])


def _topic_by_name(ctx: RequestContext, name: str, known: dict[str, tuple[int, uuid.UUID]]) -> dict[str, Any]:
    if name not in known:
        return {
            "error_code": Errors.UNKNOWN_TOPIC_OR_PARTITION,
            "name": name,
            "topic_id": NO_TOPIC_ID,
            "partitions": [],
        }
    return _topic(ctx, name, *known[name])


def _topic(ctx: RequestContext, name: str, partitions: int, topic_id: uuid.UUID) -> dict[str, Any]:
    node = ctx.gateway.data_node_id
    return {
        "error_code": Errors.NONE,
        "name": name,
        "topic_id": topic_id,
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
    may = getattr(ctx.client, "may", None)  # the authorizer (gateway.authorize): DESCRIBE on the group
    try:
        if may is not None and not await may(Operation.DESCRIBE, ResourceType.GROUP, key):
            return _no_coordinator(key, Errors.GROUP_AUTHORIZATION_FAILED, None)
    except CoordinatorUnavailableError:  # the ACLs are not read yet: the client retries
        return _no_coordinator(key, Errors.COORDINATOR_NOT_AVAILABLE, None)
    gateway = ctx.gateway
    if ctx.direct is not None:
        itself = Coordinator(Errors.NONE, gateway.node_id, gateway.host, gateway.port)
        found = await ctx.direct.coordinator(key, itself)
        if found.error is not Errors.NONE:
            return _no_coordinator(key, found.error, None)
        return {"key": key, "node_id": found.node_id, "host": found.host, "port": found.port,
                "error_code": Errors.NONE, "error_message": None}
    client = ctx.client
    partition = client.partition_for(key)
    if client.leader(partition) is None:
        await client.refresh_async()  # the cached routing may predate the election
        if client.leader(partition) is None:
            return _no_coordinator(key, Errors.COORDINATOR_NOT_AVAILABLE, None)
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
            "controller_id": ctx.gateway.data_node_id,
            "brokers": await _brokers(ctx),
        },
    )
