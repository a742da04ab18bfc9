"""ListGroups, DescribeGroups and DeleteGroups: admin requests fanned out to the groups' coordinators.

A Kafka broker answers for the offsets partitions it leads; the gateway
answers for all of them, so it sends one request per offsets partition
concerned, concurrently, and joins the answers. The requests are the Ray
client's plans (actors/client/fanout.py), driven by `ctx.client`
(`fan_out_async`): correct while the partition count changes. Each answer
names the routing it was given by, and the plan asks again until every group
is answered once, by its owner; a partition a shrink retired is not waited
for. A leader's listener (gateway.direct.local) answers its own partition's
part in one round and the rest NOT_COORDINATOR, as a Kafka broker does.
- ListGroups asks every partition (on the direct path, every partition
  whose leader's listener Metadata does not list: each listener lists its
  own partition's groups, as each Kafka broker lists the groups it
  coordinates, and clients ask every broker); the answer holds every group
  listed, each once. Not complete by the client's deadline: the groups of
  the partitions that answered, and the last error a partition answered
  (COORDINATOR_LOAD_IN_PROGRESS, as Kafka's loading coordinator), else
  COORDINATOR_NOT_AVAILABLE. The states filter (v4+) and types filter
  (v5+, "classic" / "consumer") go to the core, which filters as Kafka; v5+
  answers each group's type.
- DescribeGroups and DeleteGroups answer each group in the order asked, its
  owner's answer; a group no owner answered by the deadline gets the last
  error a partition answered for it (NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS), else COORDINATOR_NOT_AVAILABLE.
  DescribeGroups passes its version to the core (from v6 a group it cannot
  describe is GROUP_ID_NOT_FOUND with a message, KIP-1043).
- ConsumerGroupDescribe (KIP-848) is sent and answered as DescribeGroups.
  Assignments name topics by id and name, as the core gives them; v1 adds
  each member's type (classic or consumer).
- Authorized operations (DescribeGroups v3+ and ConsumerGroupDescribe when
  the request includes them), for each group described without error: the
  operations Kafka supports on a group (AclEntry.supportedOperations(GROUP):
  READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) that the
  connection's principal may do, as Kafka's AuthHelper.authorizedOperations
  answers; without an authorizer all of them, as Kafka's broker answers
  without one; otherwise Kafka's "not asked" value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from actors.client import fanout
from actors.client.fanout import ByGroup, EveryPartition
from coordinator.acl import Operation, ResourceType
from coordinator.errors import Errors
from coordinator.messages import (
    ConsumerGroupDescribeRequest,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribedTopicPartitions,
    DescribeGroupsRequest,
    ListGroupsRequest,
    Request,
)
from gateway.handlers.calls import UNAVAILABLE, failed, fan_out
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


async def _owners_answers(
    ctx: RequestContext, kind: Callable[[tuple[str, ...]], Request], group_ids: Iterable[str],
    answered: Callable[[Any, int, tuple[str, ...]], tuple[Any, Any]],
) -> dict[str, Any]:
    """Per group id, the answer of its owner (a `ByGroup` plan); for a group no owner
    answered in time, the last error a partition answered for it, else
    COORDINATOR_NOT_AVAILABLE (module docstring)."""
    last: dict[str, Any] = {}

    def seen(response: Any, partition: int, asked: tuple[str, ...]) -> tuple[Any, Any]:
        wanted = set(asked)
        last.update((g, item) for g, item in _items(response) if g in wanted)
        return answered(response, partition, asked)

    plan = ByGroup(kind, group_ids, seen)
    if not await fan_out(ctx.client, plan):
        missing = tuple(g for g in plan.order if g not in last)
        last.update(_items(failed(kind(missing), UNAVAILABLE)))
    return last


def _items(response: Any) -> Iterable[tuple[str, Any]]:
    """A per-group answer's items by group id."""
    if isinstance(response, DeleteGroupsResponse):
        return ((g, (g, error)) for g, error in response.results)
    return ((g.group_id, g) for g in response.groups)


async def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    listing = ListGroupsRequest(
        tuple(getattr(request, "states_filter", ())), tuple(getattr(request, "types_filter", ()))
    )
    lists = None if ctx.direct is None else await ctx.direct.listing(ctx.gateway)
    plan = EveryPartition(listing, lists)
    error = Errors.NONE
    if not await fan_out(ctx.client, plan):
        error = UNAVAILABLE if plan.error is Errors.NONE else plan.error
    listed = sorted((g for a in plan.result() for g in a.groups), key=lambda g: g.group_id)
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
    version = request.__version__
    described = await _owners_answers(
        ctx, lambda ids: DescribeGroupsRequest(ids, version), request.groups, fanout.described
    )
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
    deleted = await _owners_answers(ctx, DeleteGroupsRequest, request.groups_names, fanout.deleted)
    results = [{"group_id": g, "error_code": deleted[g][1]} for g in request.groups_names]
    return respond(request, {"results": results})


async def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    described = await _owners_answers(
        ctx, ConsumerGroupDescribeRequest, request.group_ids, fanout.described
    )
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
