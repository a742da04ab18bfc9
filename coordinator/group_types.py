"""One group id, one group type: classic requests meeting a consumer group.

Kafka's `classicGroupJoin`, `classicGroupSync`, `classicGroupHeartbeat`,
`classicGroupLeave` and `maybeDeleteEmptyConsumerGroup`
(GroupMetadataManager.java, apache/kafka 1eb7644349cb): a JoinGroup for the
id of an empty consumer group deletes that group (its tombstones, in replay's
order) and creates the classic group; a JoinGroup, SyncGroup, Heartbeat or
LeaveGroup for a consumer group with members is served as a classic member
inside it (`coordinator/consumer/classic_members.py`); SyncGroup answers
UNKNOWN_MEMBER_ID for an empty consumer group. The heartbeat's side of the
rule (upgrading a classic group, or GROUP_ID_NOT_FOUND) is in
`coordinator/consumer/heartbeat.py`. DeleteGroups deletes an empty consumer
group (its offsets, then its tombstones) and answers NON_EMPTY_GROUP for one
with members, as Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.classic import join
from coordinator.consumer import classic_members
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.records import group_tombstone_records
from coordinator.errors import Errors
from coordinator.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
)

if TYPE_CHECKING:
    from coordinator.shard import Response, Shard, Token

CLASSIC_REQUEST_TYPES: frozenset[type] = frozenset(
    {JoinGroupRequest, SyncGroupRequest, HeartbeatRequest, LeaveGroupRequest}
)


def classic_request_to_consumer_group(shard: Shard, request: Any, token: Token) -> Response | None:
    """A classic group request for a consumer group's id."""
    group = shard.consumer_groups[request.group_id]
    kind = type(request)
    if kind is JoinGroupRequest:
        return classic_join(shard, group, request, token)
    if kind is SyncGroupRequest:
        return classic_members.handle_sync_group(shard, group, request)
    if kind is HeartbeatRequest:
        return classic_members.handle_heartbeat(shard, group, request)
    return classic_members.handle_leave_group(shard, group, request)


def classic_join(
    shard: Shard, group: ConsumerGroup, request: JoinGroupRequest, token: Token
) -> Response | None:
    """A JoinGroup for a consumer group's id: delete the group if empty and join, else join it."""
    error = join.join_request_error(shard, request)
    if error is not None:
        # Kafka's GroupCoordinatorService checks these before the group is looked at.
        return JoinGroupResponse(error, request.member_id)
    if not group.members:
        for record in group_tombstone_records(group):
            shard.write(record)
        return join.handle_join_group(shard, request, token)
    return classic_members.handle_join_group(shard, group, request)


def delete_consumer_group(shard: Shard, group: ConsumerGroup) -> Errors:
    """DeleteGroups for a consumer group (Kafka's `deleteGroups`): only an empty one.

    The caller tombstones the group's offsets first, as Kafka writes them.
    """
    if group.members:
        return Errors.NON_EMPTY_GROUP
    for record in group_tombstone_records(group):
        shard.write(record)
    return Errors.NONE
