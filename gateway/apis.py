"""The Kafka APIs the gateway answers: the advertised versions and the dispatch to handlers.

`SUPPORTED` is what ApiVersions advertises (gateway.codec adds ApiVersions
itself, and gateway.security the SASL APIs when a listener uses SASL). The
ranges are those that Kafka's current clients negotiate and that kio can
parse (gateway-notes.md sections 2-4):
- minimums no higher than the oldest version a client speaks: JoinGroup
  from 0 and SyncGroup from 0 keep aiokafka (JoinGroup 0-2,5; SyncGroup
  0,1,3) in; and no lower than kio's first schema (OffsetCommit 2,
  OffsetFetch 1, ListOffsets 1, Fetch 4, Produce 3);
- Produce 3-11 is advertised although every write is refused
  (handlers.data): librdkafka sends no Fetch unless the broker has the
  MSGVER2 feature, Produce >= 3 with Fetch >= 4; InitProducerId 0-5 (the
  versions Kafka defines without KIP-939's two-phase commit) so that an
  idempotent producer reaches that refusal instead of failing as if the
  broker were too old;
- Fetch stops at 12: from 13 clients fetch by topic id, which the gateway
  does not map; Metadata stops at 12 with it;
- OffsetCommit and OffsetFetch up to 10: v9 carries the member id and
  epoch of a consumer-protocol member (KIP-848); v10 addresses topics by id
  (Kafka 4.2), which the gateway maps through the registry;
- ConsumerGroupHeartbeat 0-1 (KIP-848, handlers.consumer): librdkafka
  (`group.protocol=consumer`) speaks only v1 and needs OffsetCommit and
  OffsetFetch >= 9 beside it; clients that do not opt in stay on the
  classic protocol. ConsumerGroupDescribe 0-1 describes those groups (the
  Java admin falls back to DescribeGroups for a classic one).
- DescribeAcls, CreateAcls and DeleteAcls 1-3 (handlers.acls): the service's
  ACLs, Kafka's current versions (v0 was removed in Kafka 4).

`handle(ctx, request)` answers one parsed kio request of a supported key
and version with the kio response entity of the same version, or None
where Kafka sends no response (a Produce with acks=0). A handler's
exception propagates: the server logs it and closes that connection, as
Kafka does with a request it cannot process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.context import GatewayInfo, RequestContext
from gateway.handlers import acls, admin, consumer, data, membership, metadata, offsets

__all__ = ["HANDLERS", "SUPPORTED", "GatewayInfo", "RequestContext", "handle"]

# api key -> (min, max) version advertised.
SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 11),  # Produce (refused per partition)
    1: (4, 12),  # Fetch (no records)
    2: (1, 10),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 10),  # OffsetCommit
    9: (1, 10),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    22: (0, 5),  # InitProducerId (so idempotent producers reach Produce's refusal)
    23: (2, 4),  # OffsetForLeaderEpoch
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    42: (0, 2),  # DeleteGroups
    47: (0, 0),  # OffsetDelete
    60: (0, 1),  # DescribeCluster
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848)
    69: (0, 1),  # ConsumerGroupDescribe (KIP-848)
}


Handler = Callable[[RequestContext, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: data.handle_produce,
    1: data.handle_fetch,
    2: offsets.handle_list_offsets,
    3: metadata.handle_metadata,
    8: offsets.handle_offset_commit,
    9: offsets.handle_offset_fetch,
    10: metadata.handle_find_coordinator,
    11: membership.handle_join_group,
    12: membership.handle_heartbeat,
    13: membership.handle_leave_group,
    14: membership.handle_sync_group,
    15: admin.handle_describe_groups,
    16: admin.handle_list_groups,
    22: data.handle_init_producer_id,
    23: offsets.handle_offset_for_leader_epoch,
    29: acls.handle_describe_acls,
    30: acls.handle_create_acls,
    31: acls.handle_delete_acls,
    42: admin.handle_delete_groups,
    47: offsets.handle_offset_delete,
    60: metadata.handle_describe_cluster,
    68: consumer.handle_consumer_group_heartbeat,
    69: admin.handle_consumer_group_describe,
}


async def handle(ctx: RequestContext, request: Any) -> Any:
    """The kio response to `request` (module docstring)."""
    api_key = int(request.__api_key__)
    low, high = SUPPORTED[api_key]
    if not low <= request.__version__ <= high:
        raise ValueError(f"api key {api_key} version {request.__version__} is not served ({low}-{high})")
    return await HANDLERS[api_key](ctx, request)
