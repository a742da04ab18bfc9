"""One group id, one group type: a classic JoinGroup meeting a consumer group.

Kafka's `classicGroupJoin` and `maybeDeleteEmptyConsumerGroup`
(GroupMetadataManager.java, apache/kafka 1eb7644349cb): a JoinGroup for the
id of an empty consumer group deletes that group (its tombstones, in replay's
order) and creates the classic group; the heartbeat's side of the rule is in
`heartbeat.py` (GROUP_ID_NOT_FOUND for a classic group in use). DeleteGroups
deletes an empty consumer group (its offsets, then its tombstones) and answers
NON_EMPTY_GROUP for one with members, as Kafka.

Departure: Kafka serves a JoinGroup to a non-empty consumer group as a
classic member inside it (online migration); this answers
INCONSISTENT_GROUP_PROTOCOL until that is built. SyncGroup, Heartbeat and
LeaveGroup need no rule: the classic handlers find no such classic member
and answer UNKNOWN_MEMBER_ID, as Kafka does for a member it does not know.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.classic import join
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.records import group_tombstone_records
from coordinator.errors import Errors
from coordinator.messages import JoinGroupRequest, JoinGroupResponse

if TYPE_CHECKING:
    from coordinator.shard import Response, Shard, Token


def classic_join_conflict(shard: Shard, request: JoinGroupRequest, token: Token) -> Response | None:
    """A JoinGroup for a consumer group's id: delete it if empty and join, else refuse."""
    group = shard.consumer_groups[request.group_id]
    if group.members:
        return JoinGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
    for record in group_tombstone_records(group):
        shard.write(record)
    return join.handle_join_group(shard, request, token)


def delete_consumer_group(shard: Shard, group: ConsumerGroup) -> Errors:
    """DeleteGroups for a consumer group (Kafka's `deleteGroups`): only an empty one.

    The caller tombstones the group's offsets first, as Kafka writes them.
    """
    if group.members:
        return Errors.NON_EMPTY_GROUP
    for record in group_tombstone_records(group):
        shard.write(record)
    return Errors.NONE
