"""JoinGroup: new, pending, static and known members.

Kafka's handleJoinGroup / doNewMemberJoinGroup / doStaticMemberJoinGroup /
doCurrentMemberJoinGroup, in the same order of checks:
INVALID_SESSION_TIMEOUT, unknown group, group.max.size, then per kind of
member: COORDINATOR_NOT_AVAILABLE for a Dead group, INCONSISTENT_GROUP_PROTOCOL,
FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.classic import rebalance
from coordinator.classic.group import Group, Member, Token
from coordinator.classic.state import GroupState
from coordinator.errors import Errors
from coordinator.messages import UNKNOWN_MEMBER_ID, JoinGroupRequest, JoinGroupResponse

if TYPE_CHECKING:
    from coordinator.shard import Shard

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


def join_request_error(shard: Shard, request: JoinGroupRequest) -> Errors | None:
    """The checks of every JoinGroup, whatever the group's type (Kafka's GroupCoordinatorService)."""
    config = shard.config
    if not (
        config.group_min_session_timeout_ms
        <= request.session_timeout_ms
        <= config.group_max_session_timeout_ms
    ):
        return Errors.INVALID_SESSION_TIMEOUT
    if request.rebalance_timeout_ms < 0:
        # Kafka does not check this; a negative timeout would complete every
        # join phase at once, so it is refused as a malformed request.
        return Errors.INVALID_REQUEST
    return None


def handle_join_group(shard: Shard, request: JoinGroupRequest, token: Token) -> JoinGroupResponse | None:
    error = join_request_error(shard, request)
    if error is not None:
        return JoinGroupResponse(error, request.member_id)
    if token is None:
        raise ValueError("a JoinGroup that may park needs a token")
    is_new = request.member_id == UNKNOWN_MEMBER_ID
    group = shard.get_or_create_group(request.group_id) if is_new else shard.groups.get(request.group_id)
    if group is None:
        return JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID, request.member_id)
    try:
        if not _accept_joining_member(shard, group, request.member_id):
            # KIP-389: over-capacity groups shed the members that join last.
            kicked = group.remove(request.member_id)
            rebalance.cancel_heartbeat(shard, group, request.member_id)
            if kicked is not None:
                rebalance.answer_parked(shard, kicked, Errors.GROUP_MAX_SIZE_REACHED)
            return JoinGroupResponse(Errors.GROUP_MAX_SIZE_REACHED, request.member_id)
        if is_new:
            return _join_new_member(shard, group, request, token)
        return _join_current_member(shard, group, request, token)
    finally:
        rebalance.maybe_complete_join(shard, group)
        rebalance.discard_if_unused(shard, group)


def _accept_joining_member(shard: Shard, group: Group, member_id: str) -> bool:
    max_size = shard.config.group_max_size
    member = group.members.get(member_id)
    if group.state in (EMPTY, DEAD):
        return True
    if group.is_(PREPARING):
        return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
    return member is not None or group.size < max_size


def _join_new_member(
    shard: Shard, group: Group, request: JoinGroupRequest, token: Token
) -> JoinGroupResponse | None:
    if group.is_(DEAD):
        return JoinGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE, request.member_id)
    if not group.supports_protocols(request.protocol_type, [name for name, _ in request.protocols]):
        return JoinGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
    instance_id = request.group_instance_id
    new_member_id = shard.new_member_id(instance_id if instance_id is not None else request.client_id)
    if instance_id is not None:
        existing = group.static_member_id(instance_id)
        if existing is None:
            _add_member_and_rebalance(shard, group, request, new_member_id, token)
            return None
        return _update_static_member(shard, group, request, existing, new_member_id, token)
    if request.require_known_member_id:
        # KIP-394: hand out the id first; the member must come back with it.
        group.pending_members.add(new_member_id)
        shard.timers.schedule(
            ("pending", group.group_id, new_member_id), shard.now_ms + request.session_timeout_ms
        )
        return JoinGroupResponse(Errors.MEMBER_ID_REQUIRED, new_member_id)
    _add_member_and_rebalance(shard, group, request, new_member_id, token)
    return None


def _join_current_member(
    shard: Shard, group: Group, request: JoinGroupRequest, token: Token
) -> JoinGroupResponse | None:
    member_id = request.member_id
    if group.is_(DEAD):
        return JoinGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE, member_id)
    if not group.supports_protocols(request.protocol_type, [name for name, _ in request.protocols]):
        return JoinGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
    if group.is_pending_member(member_id):
        if request.group_instance_id is not None:
            # Pending ids are handed out to dynamic members only.
            return JoinGroupResponse(Errors.FENCED_INSTANCE_ID, member_id)
        shard.timers.cancel(("pending", group.group_id, member_id))
        _add_member_and_rebalance(shard, group, request, member_id, token)
        return None
    if group.is_static_member_fenced(request.group_instance_id, member_id):
        return JoinGroupResponse(Errors.FENCED_INSTANCE_ID, member_id)
    instance_unknown = request.group_instance_id is not None and (
        group.static_member_id(request.group_instance_id) is None
    )
    if member_id not in group.members or instance_unknown:
        return JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID, member_id)
    member = group.members[member_id]
    if group.is_(PREPARING):
        _update_member_and_rebalance(shard, group, member, request, token)
        return None
    if group.is_(COMPLETING):
        if member.matches(request.protocols):
            # The member missed its JoinGroup response: give it again.
            return rebalance.join_response(group, member)
        _update_member_and_rebalance(shard, group, member, request, token)
        return None
    if group.is_(STABLE):
        if group.is_leader(member_id) or not member.matches(request.protocols):
            # A leader's JoinGroup always rebalances: it may have seen a
            # metadata change that member metadata does not show.
            _update_member_and_rebalance(shard, group, member, request, token)
            return None
        return rebalance.join_response(group, member)
    return JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID, member_id)


def _add_member_and_rebalance(
    shard: Shard, group: Group, request: JoinGroupRequest, member_id: str, token: Token
) -> None:
    member = Member(
        member_id,
        request.group_instance_id,
        request.client_id,
        request.client_host,
        request.rebalance_timeout_ms,
        request.session_timeout_ms,
        request.protocol_type,
        request.protocols,
    )
    member.is_new = True
    if group.is_(PREPARING) and group.generation_id == 0:
        group.new_member_added = True
    group.add(member, token)
    # A new member cannot heartbeat before it knows its generation: it is
    # expired by the new-member join timeout instead (Kafka's KIP-394 note).
    rebalance.schedule_heartbeat(shard, group, member, shard.config.group_new_member_join_timeout_ms)
    rebalance.maybe_prepare_rebalance(shard, group)


def _update_member_and_rebalance(
    shard: Shard, group: Group, member: Member, request: JoinGroupRequest, token: Token
) -> None:
    if member.join_token is not None:
        shard.reply(member.join_token, JoinGroupResponse(Errors.REBALANCE_IN_PROGRESS, member.member_id))
    group.update_member(
        member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, token
    )
    rebalance.maybe_prepare_rebalance(shard, group)


def _update_static_member(
    shard: Shard,
    group: Group,
    request: JoinGroupRequest,
    old_member_id: str,
    new_member_id: str,
    token: Token,
) -> JoinGroupResponse | None:
    """KIP-345: a known instance rejoins with a new id; the old id is fenced."""
    old_leader = group.leader_id
    old_member = group.members[old_member_id]
    rebalance.answer_parked(shard, old_member, Errors.FENCED_INSTANCE_ID)
    group.set_join_token(old_member, None)
    rebalance.cancel_heartbeat(shard, group, old_member_id)
    assert request.group_instance_id is not None
    member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
    rebalance.schedule_heartbeat(shard, group, member)
    group.update_member(
        member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, token
    )
    if group.is_(STABLE):
        if group.protocol_name == group.select_protocol():
            return _static_rejoin_without_rebalance(shard, group, member, request, old_leader)
        rebalance.maybe_prepare_rebalance(shard, group)
    elif group.is_(COMPLETING):
        # The leader may already assign for the old id: rebalance again.
        rebalance.prepare_rebalance(shard, group)
    elif group.state in (EMPTY, DEAD):
        raise RuntimeError(f"static member {new_member_id} rejoined group {group.group_id} in {group.state}")
    return None


def _static_rejoin_without_rebalance(
    shard: Shard, group: Group, member: Member, request: JoinGroupRequest, old_leader: str | None
) -> JoinGroupResponse:
    shard.write_group(group)
    group.set_join_token(member, None)
    if request.support_skip_assignment:
        # JoinGroup v9 (KIP-814): the leader learns it leads but skips the assignor.
        is_leader = group.is_leader(member.member_id)
        return JoinGroupResponse(
            Errors.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            is_leader,
            group.current_member_metadata() if is_leader else (),
        )
    # Before v9 the old leader id is returned so the new member does not run
    # a useless assignment that a Stable group would ignore.
    return JoinGroupResponse(
        Errors.NONE,
        member.member_id,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        old_leader or "",
    )
