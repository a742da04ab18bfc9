"""ListGroups, DescribeGroups and DeleteGroups: admin requests fanned out to the groups' coordinators.

A Kafka broker answers for the offsets partitions it leads; the gateway
answers for all of them, so it sends one request per offsets partition
concerned, concurrently, and joins the answers:
- ListGroups asks every partition (on the direct path, every partition
  whose leader's listener Metadata does not list: each listener lists its
  own partition's groups, as each Kafka broker lists the groups it
  coordinates, and clients ask every broker); the answer holds every group listed and
  the first error a partition answered (Kafka's coordinator answers
  COORDINATOR_LOAD_IN_PROGRESS beside the groups it could list). The
  states filter (v4+) and types filter (v5+, "classic" / "consumer") go to
  the core, which filters as Kafka; v5+ answers each group's type.
- DescribeGroups and DeleteGroups answer each group in the order asked;
  DescribeGroups passes its version to the core (from v6 a group it cannot
  describe is GROUP_ID_NOT_FOUND with a message, KIP-1043).
- ConsumerGroupDescribe (KIP-848) is sent, like DescribeGroups, once per
  offsets partition concerned and answered in the order asked; a
  coordinator out of reach answers COORDINATOR_NOT_AVAILABLE for its
  groups. Assignments name topics by id and name, as the core gives them;
  v1 adds each member's type (classic or consumer).
- Authorized operations (DescribeGroups v3+ and ConsumerGroupDescribe when
  the request includes them), for each group described without error: the
  operations Kafka supports on a group (AclEntry.supportedOperations(GROUP):
  READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) that the
  connection's principal may do, as Kafka's AuthHelper.authorizedOperations
  answers; without an authorizer all of them, as Kafka's broker answers
  without one; otherwise Kafka's "not asked" value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from coordinator.acl import Operation, ResourceType
from coordinator.errors import Errors
from coordinator.messages import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribedTopicPartitions,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from gateway.handlers.calls import send
from gateway.handlers.entities import respond

if TYPE_CHECKING:
    from gateway.context import RequestContext

# Kafka's AclOperation codes of the operations it supports on a group, as its 32-bit field.
GROUP_OPERATIONS = (3, 6, 8, 10, 11)  # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
GROUP_AUTHORIZED_OPERATIONS = sum(1 << code for code in GROUP_OPERATIONS)
NOT_ASKED = -(2**31)  # Kafka's default: authorized operations were not requested


def authorized_operations(asked: bool, error: Errors, allowed: int = GROUP_AUTHORIZED_OPERATIONS) -> int:
    """A described group's authorized operations field (module docstring)."""
    return allowed if asked and error is Errors.NONE else NOT_ASKED


async def _allowed_operations(ctx: RequestContext, group_ids: Iterable[str], asked: bool) -> dict[str, int]:
    """Per group, the bits of the group operations the connection's principal may do."""
    may = getattr(ctx.client, "may", None)  # the authorizer (gateway.authorize); None: off
    if not asked or may is None:
        return {}
    return {
        g: sum([1 << code for code in GROUP_OPERATIONS if await may(Operation(code), ResourceType.GROUP, g)])
        for g in group_ids
    }


def _by_partition(ctx: RequestContext, group_ids: Iterable[str]) -> dict[int, tuple[str, ...]]:
    grouped: dict[int, list[str]] = {}
    for group_id in dict.fromkeys(group_ids):
        grouped.setdefault(ctx.client.partition_for(group_id), []).append(group_id)
    return {p: tuple(ids) for p, ids in grouped.items()}


async def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    listing = ListGroupsRequest(
        tuple(getattr(request, "states_filter", ())), tuple(getattr(request, "types_filter", ()))
    )
    partitions = range(ctx.client.num_partitions)
    if ctx.direct is not None:
        partitions = await ctx.direct.listed_partitions(ctx.gateway)
    answers = await asyncio.gather(*(send(ctx.client, listing, p) for p in partitions))
    error = next((a.error for a in answers if a.error is not Errors.NONE), Errors.NONE)
    listed = sorted((g for a in answers for g in a.groups), key=lambda g: g.group_id)
    groups = [
        {
            "group_id": g.group_id,
            "protocol_type": g.protocol_type,
            "group_state": g.state,
            "group_type": g.group_type,
        }
        for g in listed
    ]
    return respond(request, {"error_code": error, "groups": groups})


async def handle_describe_groups(ctx: RequestContext, request: Any) -> Any:
    parts = _by_partition(ctx, request.groups)
    version = request.__version__
    answers = await asyncio.gather(
        *(send(ctx.client, DescribeGroupsRequest(ids, version), p) for p, ids in parts.items())
    )
    described: dict[str, DescribedGroup] = {g.group_id: g for a in answers for g in a.groups}
    asked = getattr(request, "include_authorized_operations", False)
    allowed = await _allowed_operations(ctx, request.groups, asked)
    return respond(request, {"groups": [_described(described[g], asked, allowed) for g in request.groups]})


def _described(group: DescribedGroup, asked: bool, allowed: dict[str, int]) -> dict[str, Any]:
    return {
        "authorized_operations": authorized_operations(
            asked, group.error, allowed.get(group.group_id, GROUP_AUTHORIZED_OPERATIONS)),
        "error_code": group.error,
        "error_message": group.error_message,
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type,
        "protocol_data": group.protocol,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in group.members
        ],
    }


async def handle_delete_groups(ctx: RequestContext, request: Any) -> Any:
    parts = _by_partition(ctx, request.groups_names)
    answers = await asyncio.gather(
        *(send(ctx.client, DeleteGroupsRequest(ids), p) for p, ids in parts.items())
    )
    errors = {g: e for a in answers for g, e in a.results}
    results = [{"group_id": g, "error_code": errors[g]} for g in request.groups_names]
    return respond(request, {"results": results})


async def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    parts = _by_partition(ctx, request.group_ids)
    answers = await asyncio.gather(
        *(send(ctx.client, ConsumerGroupDescribeRequest(ids), p) for p, ids in parts.items())
    )
    described = {g.group_id: g for a in answers for g in a.groups}
    asked = request.include_authorized_operations
    allowed = await _allowed_operations(ctx, request.group_ids, asked)
    groups = [_consumer_group(described[g], asked, allowed) for g in request.group_ids]
    return respond(request, {"groups": groups})


def _consumer_group(group: DescribedConsumerGroup, asked: bool, allowed: dict[str, int]) -> dict[str, Any]:
    return {
        "error_code": group.error,
        "error_message": group.error_message,
        "group_id": group.group_id,
        "group_state": group.group_state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor_name,
        "authorized_operations": authorized_operations(
            asked, group.error, allowed.get(group.group_id, GROUP_AUTHORIZED_OPERATIONS)),
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": m.subscribed_topic_names,
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": _assignment(m.assignment),
                "target_assignment": _assignment(m.target_assignment),
                "member_type": m.member_type,
            }
            for m in group.members
        ],
    }


def _assignment(topics: Iterable[DescribedTopicPartitions]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": t.topic_id, "topic_name": t.topic_name, "partitions": t.partitions} for t in topics
        ]
    }
