"""Fetch, Produce and InitProducerId: raygroups coordinates groups and holds no topic data.

- Fetch answers with no records. Like a broker with nothing new to send, it
  waits the request's MaxWaitMs first (clients send 500 ms), so a consumer
  polls at that pace instead of spinning, then answers per partition NONE,
  the registry's end offset as high watermark and last stable offset, its
  log start offset, and empty records (b"", never null: kafka-python
  3.0.12 fails on null). A partition the registry lacks gets
  UNKNOWN_TOPIC_OR_PARTITION. OFFSET_OUT_OF_RANGE is never answered: the
  registry's end offset is only what a producer last reported, and the
  client's reset on that error would move a real committed position
  backwards. No fetch session is created (session id 0): clients then send
  full fetches, each answered in full.
- Produce is advertised (librdkafka fetches only from a broker with
  Produce >= 3) but every partition is refused with POLICY_VIOLATION and a
  message saying why: Kafka's code for a request the broker's policy does
  not allow, and not retriable, so a producer fails at once instead of
  retrying writes that can never succeed (retriable codes such as
  NOT_LEADER_OR_FOLLOWER would do that; TOPIC_AUTHORIZATION_FAILED would
  send its user looking for an ACL). With acks=0 Kafka sends no response,
  and neither does the gateway (None).
- InitProducerId is answered so that idempotent producers (the default of
  Java's producer since Kafka 3.0 and of kafka-python's 3.x,
  `enable.idempotence=true` in librdkafka and aiokafka) get Produce's
  refusal, with its message, on their first write. Unanswered, each failed for a false reason:
  Java's with UnsupportedVersionException ("The node does not support
  INIT_PRODUCER_ID"), librdkafka's with a fatal "Idempotent producer not
  supported ... requires Apache Kafka broker version >= 0.11.0", aiokafka's
  and kafka-python's with IncompatibleBrokerVersion. An error answer would
  not do better: librdkafka retries every InitProducerId error but the
  authorization ones (rdkafka_idempotence.c), which would send its user
  looking for an ACL, and Java reports the others as "Unexpected error".
  So, as Kafka does for a producer without a transactional id
  (TransactionCoordinator.handleInitProducerId), it hands out a new
  producer id at epoch 0, whatever id and epoch the request carries: this
  gateway's node id above a count kept by the process, so gateways on
  different nodes never hand out the same id. Nothing is ever written under it. After a
  refused write Java's producer bumps its epoch itself and librdkafka's
  asks for a new id, and gets one. A transactional id gets INVALID_REQUEST,
  as FindCoordinator answers for a transaction coordinator
  (handlers.metadata): there is none.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from coordinator.errors import Errors
from gateway.handlers.entities import ms, respond
from gateway.handlers.offsets import by_topic
from gateway.handlers.topics import offset_bounds, partition_error

if TYPE_CHECKING:
    from gateway.context import RequestContext

NO_DATA = "raygroups holds no topic data: the Kafka gateway serves consumer groups and accepts no records"
NO_ACKS = 0
NO_PRODUCER = -1
_PRODUCER_COUNT_BITS = 32
# The count under each gateway's node id (module docstring).
_producer_counts = itertools.count()
# How a Fetch waits out its MaxWaitMs; a test puts a recorder in its place.
wait = asyncio.sleep


async def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    wait_ms = ms(request.max_wait)
    if wait_ms > 0:
        await wait(wait_ms / 1000)
    start, end = await offset_bounds(ctx, [t.topic for t in request.topics])

    def entry(row: tuple[str, int]) -> dict[str, Any]:
        error = partition_error(end, *row)
        return {
            "partition_index": row[1],
            "error_code": error,
            "high_watermark": end.get(row, -1),
            "last_stable_offset": end.get(row, -1),
            "log_start_offset": start.get(row, -1),
            "aborted_transactions": (),
            "preferred_read_replica": -1,
            "records": b"",
        }

    rows = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    responses = [
        {"topic": r["name"], "partitions": r["partitions"]} for r in by_topic(rows, lambda r: r[0], entry)
    ]
    return respond(request, {"error_code": Errors.NONE, "session_id": 0, "responses": responses})


async def handle_produce(ctx: RequestContext, request: Any) -> Any:
    if request.acks == NO_ACKS:
        return None
    refused = {
        "error_code": ErrorCode.policy_violation,
        "base_offset": -1,
        "log_start_offset": -1,
        "record_errors": (),
        "error_message": NO_DATA,
    }
    responses = [
        {"name": t.name, "partition_responses": [{"index": p.index, **refused} for p in t.partition_data]}
        for t in request.topic_data
    ]
    return respond(request, {"responses": responses})


async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return respond(
            request,
            {"error_code": Errors.INVALID_REQUEST, "producer_id": NO_PRODUCER, "producer_epoch": NO_PRODUCER},
        )
    count = next(_producer_counts) % (1 << _PRODUCER_COUNT_BITS)
    producer_id = (ctx.gateway.node_id << _PRODUCER_COUNT_BITS) | count
    return respond(request, {"error_code": Errors.NONE, "producer_id": producer_id, "producer_epoch": 0})
