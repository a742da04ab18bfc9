"""Removing a consumer group member, and the two timers that do it.

Follows `GroupMetadataManager.java` at apache/kafka 1eb7644349cb (2024-10-25):
`consumerGroupFenceMember` (without the downgrade to a classic group),
`removeMember`, `scheduleConsumerGroupSessionTimeout`,
`scheduleConsumerGroupRebalanceTimeout` and the timers `onLoaded` re-arms.

Rules, as Kafka:
- Fencing (a leave, a session expiry, a missed revocation) writes the
  member's CurrentMemberAssignment, TargetAssignmentMember and MemberMetadata
  tombstones, the subscription metadata if it changed without the member,
  and the group epoch + 1; the member's timers stop.
- The session timer (`group_consumer_session_timeout_ms`) is re-armed by
  every heartbeat; the rebalance timer (the member's rebalance timeout) is
  armed while the member is in UNREVOKED_PARTITIONS and fences it only if it
  is still at the epoch it was armed for.
- Timers are keyed ("consumer-session", group, member) and
  ("consumer-rebalance", group, member); a timer of a member or group that
  is gone does nothing.
Also from later Kafka: a regex whose last subscriber leaves is tombstoned
(Kafka 4.0); the last member leaving writes the target epoch = the new group
epoch too (KAFKA-20442, apache/kafka#22045).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.consumer import records as helpers
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.reconciliation import MemberState
from coordinator.consumer.subscriptions import subscription_metadata
from coordinator.errors import Errors

if TYPE_CHECKING:
    from coordinator.shard import Shard

SESSION_TIMER = "consumer-session"
REBALANCE_TIMER = "consumer-rebalance"


class HeartbeatError(Exception):
    """A protocol error answered to the heartbeating member; nothing is written."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def fence_member(shard: Shard, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
    """Kafka's `consumerGroupFenceMember`: remove the member and bump the group epoch."""
    group_id, member_id = group.group_id, member.member_id
    records = [
        helpers.current_assignment_tombstone(group_id, member_id),
        helpers.target_assignment_tombstone(group_id, member_id),
        helpers.member_subscription_tombstone(group_id, member_id),
    ]
    regex = member.subscribed_topic_regex_or_none
    if (
        regex is not None
        and regex in group.resolved_regular_expressions
        and group.num_subscribed_members(regex) <= 1
    ):
        records.append(helpers.regular_expression_tombstone(group_id, regex))
    metadata = subscription_metadata(group.compute_subscribed_topic_names(member, None), shard.topics)
    if metadata != group.subscription_metadata:
        records.append(helpers.subscription_metadata_record(group_id, metadata))
    records.append(helpers.epoch_record(group_id, group.group_epoch + 1))
    if len(group.members) == 1:
        # KAFKA-20442: the last member gone, the target epoch catches up with the group's.
        records.append(helpers.target_assignment_epoch_record(group_id, group.group_epoch + 1))
    for record in records:
        shard.write(record)
    shard.timers.cancel(session_key(group_id, member_id))
    shard.timers.cancel(rebalance_key(group_id, member_id))


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (SESSION_TIMER, group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (REBALANCE_TIMER, group_id, member_id)


def schedule_session_timeout(shard: Shard, group_id: str, member_id: str) -> None:
    deadline_ms = shard.now_ms + shard.config.group_consumer_session_timeout_ms
    shard.timers.schedule(session_key(group_id, member_id), deadline_ms)


def schedule_rebalance_timeout(shard: Shard, group_id: str, member: ConsumerGroupMember) -> None:
    deadline_ms = shard.now_ms + max(member.rebalance_timeout_ms, 0)
    shard.timers.schedule(rebalance_key(group_id, member.member_id), deadline_ms, member.member_epoch)


def cancel_rebalance_timeout(shard: Shard, group_id: str, member_id: str) -> None:
    shard.timers.cancel(rebalance_key(group_id, member_id))


def on_session_timeout(shard: Shard, group_id: str, member_id: str, payload: Any = None) -> None:
    """The member sent no heartbeat within the session timeout: fenced."""
    group = shard.consumer_groups.get(group_id)
    member = None if group is None else group.members.get(member_id)
    if group is not None and member is not None:
        fence_member(shard, group, member)


def on_rebalance_timeout(shard: Shard, group_id: str, member_id: str, payload: Any = None) -> None:
    """The member did not revoke in time: fenced if still at the epoch the timer was armed for."""
    group = shard.consumer_groups.get(group_id)
    member = None if group is None else group.members.get(member_id)
    if group is not None and member is not None and member.member_epoch == payload:
        fence_member(shard, group, member)


def schedule_loaded_timers(shard: Shard) -> None:
    """Kafka's `onLoaded` for consumer groups: session timers for all, rebalance timers for UNREVOKED."""
    for group in shard.consumer_groups.values():
        for member in group.members.values():
            schedule_session_timeout(shard, group.group_id, member.member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                schedule_rebalance_timeout(shard, group.group_id, member)
