"""Sending translated requests through the service client, with Kafka's answer when it cannot.

The client retries a coordinator that moves or reloads until its deadline
(actors/client/client.py); past it, the Kafka client gets COORDINATOR_NOT_AVAILABLE
in the request's own response, as a broker answers for a group whose
offsets partition has no leader, and rediscovers its coordinator. Any other
exception (a request the coordinator refuses as malformed) propagates, and
the connection closes as Kafka closes it on a request it cannot process.
A request to many partitions (gateway/handlers/admin.py) is a plan of
actors/client/fanout.py, driven by the client: `fan_out`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from actors.client.fanout import Plan
from actors.client.retry import CoordinatorUnavailableError
from coordinator.errors import Errors
from coordinator.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Request,
    SyncGroupRequest,
    SyncGroupResponse,
    commit_error_response,
)

UNAVAILABLE = Errors.COORDINATOR_NOT_AVAILABLE

_FAILED: dict[type, Callable[[Any, Errors], Any]] = {
    JoinGroupRequest: lambda r, e: JoinGroupResponse(e, r.member_id),
    SyncGroupRequest: lambda r, e: SyncGroupResponse(e),
    HeartbeatRequest: lambda r, e: HeartbeatResponse(e),
    LeaveGroupRequest: lambda r, e: LeaveGroupResponse(e),
    OffsetCommitRequest: commit_error_response,
    OffsetFetchRequest: lambda r, e: OffsetFetchResponse(e),
    OffsetDeleteRequest: lambda r, e: OffsetDeleteResponse(e),
    # Kafka's answer for a group it cannot describe: its error and an empty state.
    DescribeGroupsRequest: lambda r, e: DescribeGroupsResponse(
        tuple(DescribedGroup(e, g, "") for g in r.group_ids)
    ),
    ListGroupsRequest: lambda r, e: ListGroupsResponse(e),
    DeleteGroupsRequest: lambda r, e: DeleteGroupsResponse(tuple((g, e) for g in r.group_ids)),
    ConsumerGroupHeartbeatRequest: lambda r, e: ConsumerGroupHeartbeatResponse(e),
    ConsumerGroupDescribeRequest: lambda r, e: ConsumerGroupDescribeResponse(
        tuple(DescribedConsumerGroup(e, g) for g in r.group_ids)
    ),
}


def failed(request: Request, error: Errors) -> Any:
    """The coordinator's response to `request` when it fails as a whole with `error`."""
    return _FAILED[type(request)](request, error)


async def answer(request: Request, sent: Awaitable[Any]) -> Any:
    """The response `sent` gets for `request`, or COORDINATOR_NOT_AVAILABLE past the client's deadline."""
    try:
        return await sent
    except CoordinatorUnavailableError:
        return failed(request, UNAVAILABLE)


async def send(client: Any, request: Request) -> Any:
    """`request` through `client.send_async`, to its group's coordinator."""
    return await answer(request, client.send_async(request))


async def fan_out(client: Any, plan: Plan) -> bool:
    """`plan` (actors/client/fanout.py) through `client.fan_out_async`: whether it was
    complete before the client's deadline (a leader's listener: in its one round)."""
    try:
        await client.fan_out_async(plan)
    except CoordinatorUnavailableError:
        return False
    return True
