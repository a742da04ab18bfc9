"""A stand-in for `gateway.apis` in the transport's tests: the same interface
(SUPPORTED, handle, and the real RequestContext and GatewayInfo), two APIs.

Metadata answers the gateway as the only broker and no topics (enough for a
Kafka client to bootstrap). Heartbeat answers NONE, except group "raise"
(the handler raises), "slow" (answered after `SLOW_S`), "parked" (answered
when the test resolves its future in `parked`) and "silent" (no answer, as
Kafka gives none to a Produce with acks=0). Every context
handled is kept in `seen`, so tests can check what the server passed.
"""

from __future__ import annotations

import asyncio
from dataclasses import fields
from datetime import timedelta
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from gateway.apis import GatewayInfo, RequestContext

__all__ = ["SUPPORTED", "GatewayInfo", "RequestContext", "handle", "parked", "seen"]

METADATA = 3
HEARTBEAT = 12
SUPPORTED = {METADATA: (0, 12), HEARTBEAT: (0, 4)}
SLOW_S = 0.3


seen: list[tuple[RequestContext, Any]] = []
# The futures "parked" heartbeats wait on, in arrival order.
parked: list[asyncio.Future[None]] = []


async def handle(ctx: RequestContext, request: Any) -> Any:
    seen.append((ctx, request))
    module = load_payload_module(request.__api_key__, ctx.api_version, EntityType.response)
    if request.__api_key__ == METADATA:
        brokers = tuple(
            module.MetadataResponseBroker(node_id=node, host=host, port=port)
            for node, host, port in ctx.gateway.brokers
        )
        return _build(module.MetadataResponse, brokers=brokers, topics=(), controller_id=ctx.gateway.node_id)
    if request.group_id == "raise":
        raise RuntimeError("handler failure on purpose")
    if request.group_id == "silent":
        return None
    if request.group_id == "slow":
        await asyncio.sleep(SLOW_S)
    if request.group_id == "parked":
        future = asyncio.get_running_loop().create_future()
        parked.append(future)
        await future
    return _build(module.HeartbeatResponse, error_code=ErrorCode.none)


def _build(schema: type, **values: Any) -> Any:
    """`schema` from the values it has fields for, throttle time 0 when it has one."""
    names = {field.name for field in fields(schema)}
    values["throttle_time"] = timedelta(0)
    return schema(**{name: value for name, value in values.items() if name in names})
