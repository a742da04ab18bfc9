"""The rebalance machinery: join-phase completion, SyncGroup, Heartbeat,
LeaveGroup and the timers that replace Kafka's purgatories.

Follows Kafka's classic GroupCoordinator (prepareRebalance, onCompleteJoin,
doSyncGroup, handleHeartbeat, handleLeaveGroup, onExpireHeartbeat,
onExpirePendingSync) with two deliberate additions: a request superseded by a
newer one from the same member, and a parked request of a member that is
removed, are answered (REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID) instead of
being left dangling (KAFKA-20938).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.classic.group import Group, Member, Token
from coordinator.classic.state import GroupState, can_rebalance
from coordinator.errors import Errors
from coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberLeaveResult,
    SyncGroupRequest,
    SyncGroupResponse,
)

if TYPE_CHECKING:
    from coordinator.shard import Shard

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


# ------------------------------------------------------------------ timers


def heartbeat_key(group: Group, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group.group_id, member_id)


def schedule_heartbeat(shard: Shard, group: Group, member: Member, timeout_ms: int | None = None) -> None:
    """Kafka's completeAndScheduleNextExpiration: any sign of life resets the deadline.

    The deadline lives on the member; the timer is moved only when the new
    deadline is earlier. A timer that fires before the member's deadline
    re-arms itself, so a heartbeat costs no timer-heap work.
    """
    timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
    deadline = shard.now_ms + timeout
    member.heartbeat_deadline_ms = deadline
    key = heartbeat_key(group, member.member_id)
    timer = shard.timers.get(key)
    if timer is None or timer.deadline_ms > deadline:
        shard.timers.schedule(key, deadline)


def cancel_heartbeat(shard: Shard, group: Group, member_id: str) -> None:
    shard.timers.cancel(heartbeat_key(group, member_id))


def on_heartbeat_expired(shard: Shard, group_id: str, member_id: str, payload: Any = None) -> None:
    group = shard.groups.get(group_id)
    if group is None or group.is_(DEAD) or member_id not in group.members:
        return
    member = group.members[member_id]
    if member.heartbeat_deadline_ms > shard.now_ms:
        shard.timers.schedule(heartbeat_key(group, member_id), member.heartbeat_deadline_ms)
        return
    if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
        # A parked member is kept alive by the rebalance; its heartbeat is
        # rescheduled when its parked request is answered.
        return
    remove_member_and_update_group(shard, group, member)


def on_pending_member_expired(shard: Shard, group_id: str, member_id: str, payload: Any = None) -> None:
    group = shard.groups.get(group_id)
    if group is None or not group.is_pending_member(member_id):
        return
    remove_pending_member(shard, group, member_id)


def on_join_timer(shard: Shard, group_id: str, payload: Any = None) -> None:
    group = shard.groups.get(group_id)
    if group is None or not group.is_(PREPARING):
        return
    if payload is not None:
        delay_ms, remaining_ms = payload
        if group.new_member_added and remaining_ms != 0:
            # Kafka's InitialDelayedJoin: new members arrived, wait once more.
            group.new_member_added = False
            new_delay = min(shard.config.group_initial_rebalance_delay_ms, remaining_ms)
            new_remaining = max(remaining_ms - delay_ms, 0)
            shard.timers.schedule(("join", group_id), shard.now_ms + new_delay, (new_delay, new_remaining))
            return
    complete_join(shard, group)


def on_sync_expired(shard: Shard, group_id: str, payload: Any = None) -> None:
    group = shard.groups.get(group_id)
    if group is None or group.generation_id != payload or group.state not in (COMPLETING, STABLE):
        return
    for member_id in list(group.pending_sync_members):
        member = group.remove(member_id)
        cancel_heartbeat(shard, group, member_id)
        if member is not None:
            answer_parked(shard, member, Errors.UNKNOWN_MEMBER_ID)
    prepare_rebalance(shard, group)


# --------------------------------------------------------- rebalance flow


def maybe_prepare_rebalance(shard: Shard, group: Group) -> None:
    if can_rebalance(group.state):
        prepare_rebalance(shard, group)


def prepare_rebalance(shard: Shard, group: Group) -> None:
    if group.is_(COMPLETING):
        reset_and_propagate_assignment_error(shard, group, Errors.REBALANCE_IN_PROGRESS)
    shard.timers.cancel(("sync", group.group_id))
    delay_ms = shard.config.group_initial_rebalance_delay_ms
    initial = group.is_(EMPTY) and delay_ms > 0
    group.transition_to(PREPARING, shard.now_ms)
    group.initial_join_delay = initial
    if initial:
        remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
        shard.timers.schedule(("join", group.group_id), shard.now_ms + delay_ms, (delay_ms, remaining_ms))
    else:
        shard.timers.schedule(("join", group.group_id), shard.now_ms + group.rebalance_timeout_ms())
        maybe_complete_join(shard, group)


def maybe_complete_join(shard: Shard, group: Group) -> None:
    """Kafka's DelayedJoin.tryComplete: done once every known member rejoined."""
    if group.is_(PREPARING) and not group.initial_join_delay and group.has_all_members_joined():
        complete_join(shard, group)


def complete_join(shard: Shard, group: Group) -> None:
    """Kafka's onCompleteJoin: drop absent dynamic members, start a generation."""
    shard.timers.cancel(("join", group.group_id))
    group.initial_join_delay = False
    for member in group.not_yet_rejoined():
        if not member.is_static:
            group.remove(member.member_id)
            cancel_heartbeat(shard, group, member.member_id)
    if group.is_(DEAD):
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Nobody rejoined: wait another rebalance timeout for session expiry
        # to clear the unresponsive members.
        shard.timers.schedule(("join", group.group_id), shard.now_ms + group.rebalance_timeout_ms())
        return
    join_phase_ms = shard.now_ms - group.state_timestamp_ms  # time in PreparingRebalance
    group.init_next_generation(shard.now_ms)
    if group.is_(EMPTY):
        shard.write_group(group)
        return
    # Kafka counts these as the classic group's completed rebalances.
    shard.note_rebalance(join_phase_ms)
    leader_view = group.current_member_metadata()
    for member in group.members.values():
        if member.join_token is not None:
            shard.reply(member.join_token, join_response(group, member, leader_view))
            group.set_join_token(member, None)
        schedule_heartbeat(shard, group, member)
        member.is_new = False
        group.pending_sync_members.add(member.member_id)
    shard.timers.schedule(
        ("sync", group.group_id), shard.now_ms + group.rebalance_timeout_ms(), group.generation_id
    )


def join_response(
    group: Group, member: Member, leader_view: tuple[Any, ...] | None = None
) -> JoinGroupResponse:
    is_leader = group.is_leader(member.member_id)
    if is_leader and leader_view is None:
        leader_view = group.current_member_metadata()
    return JoinGroupResponse(
        Errors.NONE,
        member.member_id,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        group.leader_id or "",
        False,
        leader_view if is_leader and leader_view is not None else (),
    )


def reset_and_propagate_assignment_error(shard: Shard, group: Group, error: Errors) -> None:
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(shard, group, error)


def propagate_assignment(shard: Shard, group: Group, error: Errors) -> None:
    ok = error is Errors.NONE
    for member in group.members.values():
        if member.sync_token is None:
            continue
        response = SyncGroupResponse(
            error,
            member.assignment,
            group.protocol_type if ok else None,
            group.protocol_name if ok else None,
        )
        shard.reply(member.sync_token, response)
        member.sync_token = None
        # Expiry was ignored while the member waited: start its clock again.
        schedule_heartbeat(shard, group, member)


# ------------------------------------------------------------- membership


def remove_member_and_update_group(shard: Shard, group: Group, member: Member) -> None:
    answer_parked(shard, member, Errors.UNKNOWN_MEMBER_ID)
    group.remove(member.member_id)
    cancel_heartbeat(shard, group, member.member_id)
    if group.state in (STABLE, COMPLETING):
        maybe_prepare_rebalance(shard, group)
    elif group.is_(PREPARING):
        maybe_complete_join(shard, group)


def remove_pending_member(shard: Shard, group: Group, member_id: str) -> None:
    group.remove(member_id)
    shard.timers.cancel(("pending", group.group_id, member_id))
    maybe_complete_join(shard, group)


def answer_parked(shard: Shard, member: Member, error: Errors) -> None:
    """Answer a member's parked JoinGroup/SyncGroup, if any, with `error`."""
    if member.join_token is not None:
        shard.reply(member.join_token, JoinGroupResponse(error, member.member_id))
    if member.sync_token is not None:
        shard.reply(member.sync_token, SyncGroupResponse(error))
        member.sync_token = None


def not_coordinator_response(request_type: type, member: Member) -> Any:
    if request_type is JoinGroupRequest:
        return JoinGroupResponse(Errors.NOT_COORDINATOR, member.member_id)
    return SyncGroupResponse(Errors.NOT_COORDINATOR)


def answer_parked_not_coordinator(shard: Shard, group: Group) -> None:
    """Answer every parked JoinGroup and SyncGroup of `group` NOT_COORDINATOR (it leaves this shard)."""
    for member, token in list(group.all_tokens()):
        request_type = JoinGroupRequest if token is member.join_token else SyncGroupRequest
        shard.reply(token, not_coordinator_response(request_type, member))
        member.join_token = member.sync_token = None


def forget_group(shard: Shard, group: Group) -> None:
    """Drop a group from the shard: its timers stop and nothing stays parked."""
    for member in group.members.values():
        answer_parked(shard, member, Errors.COORDINATOR_NOT_AVAILABLE)
        cancel_heartbeat(shard, group, member.member_id)
        group.set_join_token(member, None)
    for member_id in group.pending_members:
        shard.timers.cancel(("pending", group.group_id, member_id))
    shard.timers.cancel(("join", group.group_id))
    shard.timers.cancel(("sync", group.group_id))
    group.state = DEAD
    shard.groups.pop(group.group_id, None)


def discard_if_unused(shard: Shard, group: Group) -> None:
    """A group created by a refused join or commit holds nothing: do not keep it."""
    if (
        group.is_(EMPTY)
        and group.generation_id == 0
        and not group.members
        and not group.pending_members
        and not group.offsets
        and group.protocol_type is None
    ):
        shard.groups.pop(group.group_id, None)


def validate_current_member(group: Group, member_id: str, group_instance_id: str | None) -> Errors | None:
    """Kafka's validateCurrentMember: instance id first, then member id."""
    if group_instance_id is not None:
        current = group.static_members.get(group_instance_id)
        if current is None:
            return Errors.UNKNOWN_MEMBER_ID
        if current != member_id:
            return Errors.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return Errors.UNKNOWN_MEMBER_ID
    return None


# --------------------------------------------------------------- SyncGroup


def handle_sync_group(shard: Shard, request: SyncGroupRequest, token: Token) -> SyncGroupResponse | None:
    group = shard.groups.get(request.group_id)
    if group is None:
        return SyncGroupResponse(Errors.UNKNOWN_MEMBER_ID)
    error = _validate_sync(group, request)
    if error is not None:
        return SyncGroupResponse(error)
    if group.is_(EMPTY):
        return SyncGroupResponse(Errors.UNKNOWN_MEMBER_ID)
    if group.is_(PREPARING):
        return SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS)
    member = group.members[request.member_id]
    _mark_synced(shard, group, request.member_id)
    if group.is_(STABLE):
        schedule_heartbeat(shard, group, member)
        return SyncGroupResponse(Errors.NONE, member.assignment, group.protocol_type, group.protocol_name)
    if token is None:
        raise ValueError("a SyncGroup that may park needs a token")
    if member.sync_token is not None:
        shard.reply(member.sync_token, SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS))
    member.sync_token = token
    if group.is_leader(request.member_id):
        _complete_sync(shard, group, dict(request.assignments))
    return None


def _validate_sync(group: Group, request: SyncGroupRequest) -> Errors | None:
    if group.is_(DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    error = validate_current_member(group, request.member_id, request.group_instance_id)
    if error is not None:
        return error
    if request.generation_id != group.generation_id:
        return Errors.ILLEGAL_GENERATION
    if request.protocol_type is not None and request.protocol_type != group.protocol_type:
        return Errors.INCONSISTENT_GROUP_PROTOCOL
    if request.protocol_name is not None and request.protocol_name != group.protocol_name:
        return Errors.INCONSISTENT_GROUP_PROTOCOL
    return None


def _mark_synced(shard: Shard, group: Group, member_id: str) -> None:
    group.pending_sync_members.discard(member_id)
    if not group.pending_sync_members:
        shard.timers.cancel(("sync", group.group_id))


def _complete_sync(shard: Shard, group: Group, assignments: dict[str, bytes]) -> None:
    """The leader's assignment: store it, then answer every parked member."""
    for member_id, member in group.members.items():
        member.assignment = bytes(assignments.get(member_id, b""))
    group.transition_to(STABLE, shard.now_ms)
    shard.write_group(group)
    propagate_assignment(shard, group, Errors.NONE)


# --------------------------------------------------------------- Heartbeat


def handle_heartbeat(shard: Shard, request: HeartbeatRequest, token: Token) -> HeartbeatResponse:
    group = shard.groups.get(request.group_id)
    if group is None:
        return HeartbeatResponse(Errors.UNKNOWN_MEMBER_ID)
    if group.is_(DEAD):
        return HeartbeatResponse(Errors.COORDINATOR_NOT_AVAILABLE)
    error = validate_current_member(group, request.member_id, request.group_instance_id)
    if error is not None:
        return HeartbeatResponse(error)
    if request.generation_id != group.generation_id:
        return HeartbeatResponse(Errors.ILLEGAL_GENERATION)
    if group.is_(EMPTY):
        return HeartbeatResponse(Errors.UNKNOWN_MEMBER_ID)
    schedule_heartbeat(shard, group, group.members[request.member_id])
    if group.is_(PREPARING):
        return HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS)
    return HeartbeatResponse(Errors.NONE)


# -------------------------------------------------------------- LeaveGroup


def handle_leave_group(shard: Shard, request: LeaveGroupRequest, token: Token) -> LeaveGroupResponse:
    group = shard.groups.get(request.group_id)
    if group is None:
        return LeaveGroupResponse(
            Errors.NONE,
            tuple(
                MemberLeaveResult(m.member_id, m.group_instance_id, Errors.UNKNOWN_MEMBER_ID)
                for m in request.members
            ),
        )
    if group.is_(DEAD):
        return LeaveGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE)
    results = []
    for identity in request.members:
        error = _leave_one(shard, group, identity.member_id, identity.group_instance_id)
        results.append(MemberLeaveResult(identity.member_id, identity.group_instance_id, error))
    return LeaveGroupResponse(Errors.NONE, tuple(results))


def _leave_one(shard: Shard, group: Group, member_id: str, group_instance_id: str | None) -> Errors:
    if member_id == UNKNOWN_MEMBER_ID:
        # KIP-345 administrative removal by group.instance.id.
        current = group.static_member_id(group_instance_id)
        if current is None:
            return Errors.UNKNOWN_MEMBER_ID
        remove_member_and_update_group(shard, group, group.members[current])
        return Errors.NONE
    if group.is_pending_member(member_id):
        remove_pending_member(shard, group, member_id)
        return Errors.NONE
    error = validate_current_member(group, member_id, group_instance_id)
    if error is not None:
        return error
    remove_member_and_update_group(shard, group, group.members[member_id])
    return Errors.NONE
