"""ConsumerGroupHeartbeat (KIP-848): the consumer group protocol's one request, to the coordinator's and back.

As Kafka's broker (KafkaApis.handleConsumerGroupHeartbeat and
GroupCoordinatorService.consumerGroupHeartbeat), the gateway only
translates; the core checks the request (coordinator/consumer/validation.py)
and decides. By version:
- v0 has no SubscribedTopicRegex; v1 adds it and makes the client generate
  its member id (KIP-1082). The core takes the version and applies both.
- Every nullable field keeps its null ("unchanged since the last
  heartbeat"); RebalanceTimeoutMs -1 means the same.
- Partitions are named by topic id on the wire and in the core, so they pass
  through unchanged; a null topic id (kio's reading of the zero UUID) is
  the zero UUID, which no topic has.
- An error answers the error code and message with no member id, epoch 0
  and interval 0, as Kafka's error response (also for a coordinator past the
  client's deadline: COORDINATOR_NOT_AVAILABLE).
- The assignment is written only when the core gives one (a full request or
  a changed assignment); null otherwise, as Kafka.
Client id and host come from the connection, as Kafka's request context.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from coordinator.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupTopicPartitions
from gateway.handlers.calls import send
from gateway.handlers.entities import ms, respond

if TYPE_CHECKING:
    from gateway.context import RequestContext

ZERO_UUID = uuid.UUID(int=0)


def heartbeat_request(ctx: RequestContext, request: Any) -> ConsumerGroupHeartbeatRequest:
    """The core's ConsumerGroupHeartbeatRequest for kio `request` (module docstring)."""
    owned = request.topic_partitions
    return ConsumerGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=ms(request.rebalance_timeout),
        subscribed_topic_names=_names(request.subscribed_topic_names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        topic_partitions=None if owned is None else tuple(_topic_partitions(t) for t in owned),
        version=request.__version__,
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
    )


def _names(names: Any) -> tuple[str, ...] | None:
    return None if names is None else tuple(names)


def _topic_partitions(topic: Any) -> ConsumerGroupTopicPartitions:
    return ConsumerGroupTopicPartitions(topic.topic_id or ZERO_UUID, tuple(topic.partitions))


async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    beat = await send(ctx.client, heartbeat_request(ctx, request))
    assignment = None
    if beat.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": t.topic_id, "partitions": t.partitions} for t in beat.assignment
            ]
        }
    return respond(
        request,
        {
            "error_code": beat.error,
            "error_message": beat.error_message,
            "member_id": beat.member_id,
            "member_epoch": beat.member_epoch,
            "heartbeat_interval": beat.heartbeat_interval_ms,
            "assignment": assignment,
        },
    )
