"""DescribeGroups, ListGroups and DeleteGroups."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator import offsets
from coordinator.classic.group import Group, Token
from coordinator.classic.state import STATES_BY_LOWER_NAME, GroupState
from coordinator.errors import Errors
from coordinator.group_types import delete_consumer_group
from coordinator.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from coordinator.status import is_valid_group_id

if TYPE_CHECKING:
    from coordinator.shard import Shard


def describe(group: Group | None, group_id: str) -> DescribedGroup:
    if group is None or group.is_(GroupState.DEAD):
        return DescribedGroup(Errors.NONE, group_id, GroupState.DEAD.value)
    stable = group.is_(GroupState.STABLE) and group.protocol_name is not None
    protocol = group.protocol_name if stable and group.protocol_name else ""
    members = tuple(
        DescribedMember(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.metadata(protocol) if stable else b"",
            m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        Errors.NONE, group_id, group.state.value, group.protocol_type or "", protocol, members
    )


def handle_describe_groups(
    shard: Shard, request: DescribeGroupsRequest, token: Token
) -> DescribeGroupsResponse:
    described = []
    for group_id in request.group_ids:
        if not is_valid_group_id(group_id, request):
            described.append(DescribedGroup(Errors.INVALID_GROUP_ID, group_id, ""))
        else:
            described.append(describe(shard.groups.get(group_id), group_id))
    return DescribeGroupsResponse(tuple(described))


def handle_list_groups(shard: Shard, request: ListGroupsRequest, token: Token) -> ListGroupsResponse:
    wanted = {STATES_BY_LOWER_NAME.get(s.lower()) for s in request.states_filter}
    listed = tuple(
        ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
        for g in shard.groups.values()
        if not g.is_(GroupState.DEAD) and (not wanted or g.state in wanted)
    )
    return ListGroupsResponse(Errors.NONE, listed)


def handle_delete_groups(shard: Shard, request: DeleteGroupsRequest, token: Token) -> DeleteGroupsResponse:
    results = []
    for group_id in request.group_ids:
        results.append((group_id, _delete_one(shard, request, group_id)))
    return DeleteGroupsResponse(tuple(results))


def _delete_one(shard: Shard, request: DeleteGroupsRequest, group_id: str) -> Errors:
    if not is_valid_group_id(group_id, request):
        return Errors.INVALID_GROUP_ID
    group = shard.groups.get(group_id)
    consumer_group = shard.consumer_groups.get(group_id)
    if consumer_group is not None:
        if consumer_group.members:
            return Errors.NON_EMPTY_GROUP
        if group is not None:
            offsets.delete_group(shard, group)
        return delete_consumer_group(shard, consumer_group)
    if group is None or group.is_(GroupState.DEAD):
        return Errors.GROUP_ID_NOT_FOUND
    if not group.is_(GroupState.EMPTY):
        return Errors.NON_EMPTY_GROUP
    offsets.delete_group(shard, group)
    return Errors.NONE
