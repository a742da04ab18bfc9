"""Checks that come before a request reaches its group, in Kafka's order.

Kafka's `validateGroupStatus`: first the group id (INVALID_GROUP_ID), then the
coordinator's own status (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR). The partition actor knows its status; this module decides
what each request gets for it, including Kafka's two special cases: a
Heartbeat during loading is answered NONE, a SyncGroup REBALANCE_IN_PROGRESS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from operator import attrgetter, itemgetter
from typing import Any

from coordinator import lag_query, lag_watch, service_state
from coordinator.errors import Errors
from coordinator.messages import (
    AssignmentWatchRequest,
    AssignmentWatchResponse,
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
    FetchedOffset,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Request,
    SyncGroupRequest,
    SyncGroupResponse,
    commit_error_response,
)

# Kafka's STRING is int16-length-prefixed: longer ids cannot exist on the wire.
MAX_GROUP_ID_BYTES = 32_767


class CoordinatorStatus(Enum):
    ACTIVE = "active"
    LOADING = "loading"
    NOT_COORDINATOR = "not-coordinator"
    NOT_AVAILABLE = "not-available"


STATUS_ERRORS = {
    CoordinatorStatus.NOT_AVAILABLE: Errors.COORDINATOR_NOT_AVAILABLE,
    CoordinatorStatus.LOADING: Errors.COORDINATOR_LOAD_IN_PROGRESS,
    CoordinatorStatus.NOT_COORDINATOR: Errors.NOT_COORDINATOR,
}

# Requests that accept the empty group id, as Kafka's isValidGroupId allows
# for offset storage without group management and for admin calls.
# ConsumerGroupHeartbeat answers an empty group id INVALID_REQUEST itself, as Kafka's
# throwIfConsumerGroupHeartbeatRequestIsInvalid does.
EMPTY_GROUP_ID_ALLOWED = (
    OffsetCommitRequest, OffsetFetchRequest, DescribeGroupsRequest, DeleteGroupsRequest,
    ConsumerGroupHeartbeatRequest,
)


def is_valid_group_id(group_id: str, request: Request) -> bool:
    if len(group_id) * 4 > MAX_GROUP_ID_BYTES and len(group_id.encode("utf-8")) > MAX_GROUP_ID_BYTES:
        return False
    return bool(group_id) or isinstance(request, EMPTY_GROUP_ID_ALLOWED)


def _fetch_error(r: OffsetFetchRequest, e: Errors) -> OffsetFetchResponse:
    # Kafka reports the error at the top and in every requested partition.
    parts = tuple(FetchedOffset(t, p, -1, -1, "", e) for t, p in (r.partitions or ()))
    return OffsetFetchResponse(e, parts)


def _describe_error(r: DescribeGroupsRequest, e: Errors) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(tuple(DescribedGroup(e, g, "") for g in r.group_ids))


def _consumer_describe_error(r: ConsumerGroupDescribeRequest, e: Errors) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(tuple(DescribedConsumerGroup(e, g) for g in r.group_ids))


def _offset_delete_error(r: OffsetDeleteRequest, e: Errors) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(e)


ERROR_RESPONSES: dict[type, Callable[..., object]] = {
    JoinGroupRequest: lambda r, e: JoinGroupResponse(e, r.member_id),
    SyncGroupRequest: lambda r, e: SyncGroupResponse(e),
    HeartbeatRequest: lambda r, e: HeartbeatResponse(e),
    LeaveGroupRequest: lambda r, e: LeaveGroupResponse(e),
    OffsetCommitRequest: commit_error_response,
    OffsetFetchRequest: _fetch_error,
    DescribeGroupsRequest: _describe_error,
    ListGroupsRequest: lambda r, e: ListGroupsResponse(e),
    DeleteGroupsRequest: lambda r, e: DeleteGroupsResponse(tuple((g, e) for g in r.group_ids)),
    OffsetDeleteRequest: _offset_delete_error,
    ConsumerGroupHeartbeatRequest: lambda r, e: ConsumerGroupHeartbeatResponse(e),
    ConsumerGroupDescribeRequest: _consumer_describe_error,
    AssignmentWatchRequest: lambda r, e: AssignmentWatchResponse(e),
    **service_state.ERROR_RESPONSES,
    **lag_query.ERROR_RESPONSES,
    **lag_watch.ERROR_RESPONSES,
}


def error_response(request: Request, error: Errors) -> object:
    """The response a request gets when it fails as a whole with `error`."""
    return ERROR_RESPONSES[type(request)](request, error)


def status_error(request: Request, status: CoordinatorStatus) -> Errors | None:
    """The error Kafka gives before looking at the group, or None to go on."""
    group_id = getattr(request, "group_id", None)
    if group_id is not None and not is_valid_group_id(group_id, request):
        return Errors.INVALID_GROUP_ID
    error = STATUS_ERRORS.get(status)
    if error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
        if isinstance(request, HeartbeatRequest):
            return Errors.NONE  # Kafka answers heartbeats blindly while loading.
        if isinstance(request, SyncGroupRequest):
            # The rebalance state is lost on load: make the member rejoin
            # without rediscovering the coordinator (Kafka PR #4788).
            return Errors.REBALANCE_IN_PROGRESS
    return error


def precheck(request: Request, status: CoordinatorStatus) -> object | None:
    """The response to send without touching the shard, or None to handle it."""
    error = status_error(request, status)
    if error is None:
        return None
    return error_response(request, error)


_item_error = attrgetter("error")
_ITEM_ERRORS: dict[type, Callable[[Any], Iterable[Errors]]] = {
    OffsetCommitResponse: lambda r: map(_item_error, r.partitions),
    DescribeGroupsResponse: lambda r: map(_item_error, r.groups),
    DeleteGroupsResponse: lambda r: map(itemgetter(1), r.results),
    ConsumerGroupDescribeResponse: lambda r: map(_item_error, r.groups),
}


def item_errors(response: object) -> Iterable[Errors] | None:
    """The per-item errors of a response that reports errors per partition
    or per group (OffsetCommit, DescribeGroups, DeleteGroups, ConsumerGroupDescribe), else None."""
    errors = _ITEM_ERRORS.get(type(response))
    return None if errors is None else errors(response)


def response_error(response: object) -> Errors:
    """The error a response reports, for metrics: its own error if it has
    one that is not NONE, else the first error among its items (an
    OffsetCommit answer has per-partition errors only)."""
    error = getattr(response, "error", None)
    if error is not None and error is not Errors.NONE:
        return error  # type: ignore[no-any-return]
    items = item_errors(response)
    if items is None:
        return Errors.NONE
    return next(filter(Errors.NONE.__ne__, items), Errors.NONE)
