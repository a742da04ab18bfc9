"""Removing a consumer group member, and the two timers that do it.

Follows `GroupMetadataManager.java` at apache/kafka 1eb7644349cb (2024-10-25):
`consumerGroupFenceMember` (with the downgrade to a classic group of
`migration.py`), `removeMember`, `cancelTimers`,
`scheduleConsumerGroupSessionTimeout`, `scheduleConsumerGroupRebalanceTimeout`,
the classic members' `scheduleConsumerGroupJoinTimeoutIfAbsent` and
`scheduleConsumerGroupSyncTimeout`, and the timers `onLoaded` re-arms.

Rules, as Kafka:
- Fencing (a leave, a session expiry, a missed revocation) writes the
  member's CurrentMemberAssignment, TargetAssignmentMember and MemberMetadata
  tombstones, the subscription metadata if it changed without the member,
  and the group epoch + 1; the member's timers stop.
- The session timer (`group_consumer_session_timeout_ms`) is re-armed by
  every heartbeat; the rebalance timer (the member's rebalance timeout) is
  armed while the member is in UNREVOKED_PARTITIONS and fences it only if it
  is still at the epoch it was armed for.
- Fencing the last member that uses the consumer protocol, while members
  using the classic protocol remain, converts the group back to a classic
  group instead, when allowed (`migration.py`).
- A classic-protocol member's session timer is its own session timeout; it
  has no rebalance timer but a join timer (armed when it is told to rejoin,
  if not armed yet) and a sync timer (armed by its JoinGroup), both of its
  rebalance timeout, both fencing it.
- Timers are keyed ("consumer-session", group, member),
  ("consumer-rebalance", group, member), ("consumer-join", group, member) and
  ("consumer-sync", group, member); a timer of a member or group that is
  gone does nothing, nor does one whose fencing fails (Kafka's
  `consumerGroupFenceMemberOperation`).
Departure: after a load, a classic-protocol member's session timer is its own
session timeout (Kafka's `onLoaded` arms the consumer one for every member).
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
JOIN_TIMER = "consumer-join"
SYNC_TIMER = "consumer-sync"


class HeartbeatError(Exception):
    """A protocol error answered to the heartbeating member; nothing is written."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def fence_member(shard: Shard, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
    """Kafka's `consumerGroupFenceMember`: remove the member and bump the group epoch,
    or convert the group to a classic one when the member was the last using the consumer protocol.

    Raises HeartbeatError (GROUP_ID_NOT_FOUND) when that conversion fails; nothing is written then.
    """
    from coordinator.consumer import migration

    group_id, member_id = group.group_id, member.member_id
    if migration.validate_online_downgrade_with_fenced_member(shard, group, member_id):
        members = list(group.members.values())
        for record in migration.downgrade_records(shard, group, member_id, None):
            shard.write(record)
        migration.after_downgrade(shard, group_id, members, None)
        return
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
    cancel_member_timers(shard, group_id, member_id)


def cancel_member_timers(shard: Shard, group_id: str, member_id: str) -> None:
    """Kafka's `cancelTimers`: every timer of the member."""
    for kind in (SESSION_TIMER, REBALANCE_TIMER, JOIN_TIMER, SYNC_TIMER):
        shard.timers.cancel((kind, group_id, member_id))


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (SESSION_TIMER, group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (REBALANCE_TIMER, group_id, member_id)


def schedule_session_timeout(
    shard: Shard, group_id: str, member_id: str, timeout_ms: int | None = None
) -> None:
    """The session timer: `timeout_ms` (a classic member's own) or the consumer group default."""
    timeout = shard.config.group_consumer_session_timeout_ms if timeout_ms is None else timeout_ms
    shard.timers.schedule(session_key(group_id, member_id), shard.now_ms + timeout)


def schedule_join_timeout_if_absent(shard: Shard, group_id: str, member: ConsumerGroupMember) -> None:
    """A classic member told to rejoin must do so within its rebalance timeout."""
    key = (JOIN_TIMER, group_id, member.member_id)
    if shard.timers.get(key) is None:
        shard.timers.schedule(key, shard.now_ms + max(member.rebalance_timeout_ms, 0))


def cancel_join_timeout(shard: Shard, group_id: str, member_id: str) -> None:
    shard.timers.cancel((JOIN_TIMER, group_id, member_id))


def schedule_sync_timeout(shard: Shard, group_id: str, member_id: str, rebalance_timeout_ms: int) -> None:
    """A classic member that joined must send its SyncGroup within its rebalance timeout."""
    shard.timers.schedule((SYNC_TIMER, group_id, member_id), shard.now_ms + max(rebalance_timeout_ms, 0))


def cancel_sync_timeout(shard: Shard, group_id: str, member_id: str) -> None:
    shard.timers.cancel((SYNC_TIMER, group_id, member_id))


def schedule_rebalance_timeout(shard: Shard, group_id: str, member: ConsumerGroupMember) -> None:
    deadline_ms = shard.now_ms + max(member.rebalance_timeout_ms, 0)
    shard.timers.schedule(rebalance_key(group_id, member.member_id), deadline_ms, member.member_epoch)


def cancel_rebalance_timeout(shard: Shard, group_id: str, member_id: str) -> None:
    shard.timers.cancel(rebalance_key(group_id, member_id))


def _fence_operation(shard: Shard, group_id: str, member_id: str, epoch: int | None = None) -> None:
    """Kafka's `consumerGroupFenceMemberOperation`: fence the member if it (still) exists."""
    group = shard.consumer_groups.get(group_id)
    member = None if group is None else group.members.get(member_id)
    if group is None or member is None or (epoch is not None and member.member_epoch != epoch):
        return
    try:
        fence_member(shard, group, member)
    except HeartbeatError:
        pass  # Kafka logs it and writes nothing


def on_session_timeout(shard: Shard, group_id: str, member_id: str, payload: Any = None) -> None:
    """The member sent no heartbeat within the session timeout: fenced."""
    _fence_operation(shard, group_id, member_id)


def on_rebalance_timeout(shard: Shard, group_id: str, member_id: str, payload: Any = None) -> None:
    """The member did not revoke in time: fenced if still at the epoch the timer was armed for."""
    _fence_operation(shard, group_id, member_id, payload)


def on_join_timeout(shard: Shard, group_id: str, member_id: str, payload: Any = None) -> None:
    """A classic member did not rejoin within its rebalance timeout: fenced."""
    _fence_operation(shard, group_id, member_id)


def on_sync_timeout(shard: Shard, group_id: str, member_id: str, payload: Any = None) -> None:
    """A classic member did not sync within its rebalance timeout: fenced."""
    _fence_operation(shard, group_id, member_id)


def schedule_group_timers(shard: Shard, group: ConsumerGroup) -> None:
    """Kafka's `onLoaded` for one consumer group (loaded, or admitted from another partition):
    session timers for all members, rebalance timers for UNREVOKED ones."""
    for member in group.members.values():
        timeout_ms = member.classic_protocol_session_timeout_ms
        schedule_session_timeout(shard, group.group_id, member.member_id, timeout_ms)
        if member.state is MemberState.UNREVOKED_PARTITIONS and not member.use_classic_protocol:
            schedule_rebalance_timeout(shard, group.group_id, member)
