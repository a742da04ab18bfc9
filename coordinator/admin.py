"""DescribeGroups, ListGroups, DeleteGroups and ConsumerGroupDescribe, for both group types.

As Kafka's GroupMetadataManager (`describeGroups`, `listGroups`,
`consumerGroupDescribe`, the 4.x line):
- DescribeGroups describes classic groups only. A consumer group, like an
  unknown id, is "Dead" without error before v6, and GROUP_ID_NOT_FOUND
  ("Group G is not a classic group." / "Group G not found.") from v6.
- ConsumerGroupDescribe describes consumer groups only: GROUP_ID_NOT_FOUND
  for an unknown id ("Group G not found.") or a classic one ("Group G is not
  a consumer group."), INVALID_GROUP_ID for the empty id.
- ListGroups lists every group with its type ("classic", "consumer") and
  state, filtered by states (case-insensitive, trimmed) and types
  (case-insensitive); an unknown state or type matches nothing.
A consumer group's offsets live in a classic `Group` of the same id (the
offsets store both types share, `consumer/offsets_check.py`): that holder is
never shown as a classic group of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator import offsets
from coordinator.classic.group import Group, Token
from coordinator.classic.state import GroupState
from coordinator.consumer.describe import describe_consumer_group, group_not_found, not_a_consumer_group
from coordinator.errors import Errors
from coordinator.group_types import delete_consumer_group
from coordinator.handoff import owns
from coordinator.messages import (
    GROUP_TYPE_CLASSIC,
    GROUP_TYPE_CONSUMER,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedConsumerGroup,
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

# DescribeGroups v6 (KIP-1043) reports a group it cannot describe as GROUP_ID_NOT_FOUND.
DESCRIBE_GROUPS_NOT_FOUND_VERSION = 6


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
        elif not owns(shard, group_id):
            described.append(DescribedGroup(Errors.NOT_COORDINATOR, group_id, ""))
        elif group_id in shard.consumer_groups:
            described.append(_not_described(request, group_id, f"Group {group_id} is not a classic group."))
        else:
            group = shard.groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                described.append(_not_described(request, group_id, f"Group {group_id} not found."))
            else:
                described.append(describe(group, group_id))
    return DescribeGroupsResponse(tuple(described))


def _not_described(request: DescribeGroupsRequest, group_id: str, message: str) -> DescribedGroup:
    """Kafka's answer for a group DescribeGroups cannot describe, by the request's version."""
    if request.version >= DESCRIBE_GROUPS_NOT_FOUND_VERSION:
        return DescribedGroup(
            Errors.GROUP_ID_NOT_FOUND, group_id, GroupState.DEAD.value, error_message=message
        )
    return DescribedGroup(Errors.NONE, group_id, GroupState.DEAD.value)


def handle_consumer_group_describe(
    shard: Shard, request: ConsumerGroupDescribeRequest, token: Token
) -> ConsumerGroupDescribeResponse:
    topic_names = {topic.topic_id: name for name, topic in shard.topics.items()}
    described = []
    for group_id in request.group_ids:
        consumer_group = shard.consumer_groups.get(group_id)
        if not is_valid_group_id(group_id, request):
            described.append(DescribedConsumerGroup(Errors.INVALID_GROUP_ID, group_id))
        elif not owns(shard, group_id):
            described.append(DescribedConsumerGroup(Errors.NOT_COORDINATOR, group_id))
        elif consumer_group is not None:
            described.append(describe_consumer_group(consumer_group, topic_names))
        elif group_id in shard.groups and not shard.groups[group_id].is_(GroupState.DEAD):
            described.append(not_a_consumer_group(group_id))
        else:
            described.append(group_not_found(group_id))
    return ConsumerGroupDescribeResponse(tuple(described))


def handle_list_groups(shard: Shard, request: ListGroupsRequest, token: Token) -> ListGroupsResponse:
    states = {s.strip().lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    listed: list[ListedGroup] = []
    if not types or GROUP_TYPE_CLASSIC in types:
        listed += (
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value, GROUP_TYPE_CLASSIC)
            for g in shard.groups.values()
            if not g.is_(GroupState.DEAD)
            and g.group_id not in shard.consumer_groups
            and (not states or g.state.value.lower() in states)
            and owns(shard, g.group_id)
        )
    if not types or GROUP_TYPE_CONSUMER in types:
        # Kafka's ConsumerGroup.asListedGroup: protocol type "consumer", whatever its members speak.
        listed += (
            ListedGroup(g.group_id, GROUP_TYPE_CONSUMER, g.state.value, GROUP_TYPE_CONSUMER)
            for g in shard.consumer_groups.values()
            if (not states or g.state.value.lower() in states) and owns(shard, g.group_id)
        )
    return ListGroupsResponse(Errors.NONE, tuple(listed), shard.owner)


def handle_delete_groups(shard: Shard, request: DeleteGroupsRequest, token: Token) -> DeleteGroupsResponse:
    results = []
    for group_id in request.group_ids:
        results.append((group_id, _delete_one(shard, request, group_id)))
    return DeleteGroupsResponse(tuple(results))


def _delete_one(shard: Shard, request: DeleteGroupsRequest, group_id: str) -> Errors:
    if not is_valid_group_id(group_id, request):
        return Errors.INVALID_GROUP_ID
    if not owns(shard, group_id):
        return Errors.NOT_COORDINATOR
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
