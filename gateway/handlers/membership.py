"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: kio requests to the coordinator's and back.

The coordinator decides everything (MEMBER_ID_REQUIRED, generations,
rebalances); these functions only translate, by version:
- JoinGroup: v0 has no rebalance timeout, and Kafka takes the session
  timeout for it; v4+ asks for MEMBER_ID_REQUIRED (KIP-394), v9+ lets a
  static leader skip the assignor (KIP-814). Protocol metadata and
  assignment bytes pass through unchanged: Kafka clients and
  `actors.GroupMember` both write Kafka's ConsumerProtocol layout, so they
  read each other's subscriptions and assignments in one group.
- An old version's null protocol name is written as "" (entities.build).
- LeaveGroup v0-2 names one member and answers one error: the group's
  error, else that member's, as Kafka's LeaveGroupResponse does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.errors import Errors
from coordinator.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from gateway.handlers.calls import answer, send
from gateway.handlers.entities import RepeatedResponses, ms, respond

if TYPE_CHECKING:
    from gateway.context import RequestContext

# Heartbeat answers, by their error.
_HEARTBEAT_ANSWERS = RepeatedResponses()


async def handle_join_group(ctx: RequestContext, request: Any) -> Any:
    version = request.__version__
    session_ms = ms(request.session_timeout)
    join = JoinGroupRequest(
        group_id=request.group_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=ms(request.rebalance_timeout) if version >= 1 else session_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        require_known_member_id=version >= 4,
        support_skip_assignment=version >= 9,
        reason=getattr(request, "reason", None) or "",
    )
    joined = await answer(join, ctx.client.join_group_async(join))
    return respond(
        request,
        {
            "error_code": joined.error,
            "generation_id": joined.generation_id,
            "protocol_type": joined.protocol_type,
            "protocol_name": joined.protocol_name,
            "leader": joined.leader,
            "skip_assignment": joined.skip_assignment,
            "member_id": joined.member_id,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                for m in joined.members
            ],
        },
    )


async def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    sync = SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
    )
    synced = await answer(sync, ctx.client.sync_group_async(sync))
    return respond(
        request,
        {
            "error_code": synced.error,
            "protocol_type": synced.protocol_type,
            "protocol_name": synced.protocol_name,
            "assignment": synced.assignment,
        },
    )


async def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    beat = HeartbeatRequest(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    error = (await send(ctx.client, beat)).error
    return _HEARTBEAT_ANSWERS.respond(request, error, lambda: {"error_code": error})


async def handle_leave_group(ctx: RequestContext, request: Any) -> Any:
    if request.__version__ < 3:
        members: tuple[MemberIdentity, ...] = (MemberIdentity(request.member_id),)
    else:
        members = tuple(
            MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None) or "")
            for m in request.members
        )
    left = await send(ctx.client, LeaveGroupRequest(request.group_id, members))
    error = left.error
    if request.__version__ < 3 and error is Errors.NONE and left.members:
        error = left.members[0].error
    return respond(
        request,
        {
            "error_code": error,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": m.error}
                for m in left.members
            ],
        },
    )
