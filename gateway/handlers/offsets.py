"""OffsetCommit, OffsetFetch, OffsetDelete, ListOffsets and OffsetForLeaderEpoch.

Group offsets go through the coordinator, by version:
- OffsetCommit v2-4 carry a retention time (-1: the broker's retention
  decides, KIP-211), v6+ a leader epoch per partition, v7+ the group
  instance id. A null commit metadata is stored as "". The version goes to
  the core: a consumer group's member must commit with v9+ (KIP-848), and
  v9+ answers GROUP_ID_NOT_FOUND where older versions answer
  ILLEGAL_GENERATION (coordinator/consumer/offsets_check.py).
- OffsetFetch v1 names its partitions and has no group error field: a
  group error goes to every partition, as Kafka's OffsetFetchResponse
  writes it; v2+ may ask for every partition (null topics) and answer a
  group error; v8+ asks for several groups at once, sent concurrently to
  their coordinators; v9+ names, per group, the consumer-protocol member
  asking and its epoch, which the core checks (KIP-848).
- v10 of both names topics by id only (the registry's, handlers/topics.py);
  offsets stay stored by name. As Kafka's broker: an OffsetCommit topic id
  it does not know answers UNKNOWN_TOPIC_ID for each of its partitions
  (and a commit of unknown ids only never reaches the coordinator); an
  OffsetFetch id it does not know answers UNKNOWN_TOPIC_ID with offset -1;
  asked for every topic, a committed topic without an id is left out.
Topic offsets come from the registry (handlers/topics.py):
- ListOffsets, with the authorizer on (gateway.authorize): a topic the
  principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED on each
  partition, as Kafka answers, and is not read.
- ListOffsets: -2 (earliest) and -4 (earliest local, v8+: there is no
  tiered storage) are the log start offset, -1 (latest) the end offset,
  each with timestamp -1 as Kafka answers them. -3 (max timestamp, v7+) and
  -5 (latest tiered, v9+) find no record: offset and timestamp -1, Kafka's
  answer for an empty partition and for a topic without tiered storage.
- ListOffsets at a timestamp T: Kafka answers the earliest offset whose
  record's timestamp is at or after T, with that timestamp, and offset -1
  and timestamp -1 when no record is that recent. raygroups holds no
  records, only samples (at_ms, end) of each end offset, so it answers:
  - the offset reset-offsets --to-datetime picks
    (coordinator.reset_plan.offset_at_time): the end of the latest sample
    at or before T, never below the log start offset. Every record below
    it was written before T; none at or above it is known to be older.
  - the timestamp of the first sample whose end is above that offset: the
    record there was written by then, and that sample is after T (every
    sample at or before T ends at or below the offset). It is when the
    registry first saw the record, not the record's own timestamp, which
    raygroups never has; it is never before T, as Kafka's never is.
  - offset -1 and timestamp -1 when no sample is above the offset, i.e.
    the offset is the end: no record is known to be written after T.
    Kafka's clients then report no offset (Java's offsetsForTimes gives
    null) and kafka-consumer-groups.sh --to-datetime falls back to the end
    offset, where raygroups' own reset-offsets lands.
- OffsetForLeaderEpoch: every partition has had one leader epoch (0), so
  any epoch ends at the partition's end offset.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from actors.client import topics as registry
from actors.client.retry import CoordinatorUnavailableError
from coordinator.errors import Errors
from coordinator.messages import (
    FetchedOffset,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionResult,
)
from coordinator.reset_plan import TP, TopicView, offset_at_time
from gateway.authorize import undescribable_topics
from gateway.handlers.calls import send
from gateway.handlers.entities import RepeatedResponses, ms, respond
from gateway.handlers.topics import LEADER_EPOCH, TopicIds, offset_bounds, partition_error, topic_ids

if TYPE_CHECKING:
    from gateway.context import RequestContext

EARLIEST, LATEST, EARLIEST_LOCAL = -2, -1, -4
# OffsetCommit and OffsetFetch v10 (KIP-848, stable in Kafka 4.2) name topics by id only.
TOPIC_ID_VERSION = 10
ZERO_UUID = uuid.UUID(int=0)
UNKNOWN = -1  # Kafka's UNKNOWN_OFFSET, UNKNOWN_TIMESTAMP and no leader epoch
NO_RECORD = (UNKNOWN, UNKNOWN)
# Commit answers below v10 (topics by name), by their results.
_COMMIT_ANSWERS = RepeatedResponses()

# Kafka's special timestamps the registry can answer: (offset, timestamp).
# Any other negative one (-3 max timestamp, -5 latest tiered) finds no record.
SPECIAL_TIMESTAMPS: dict[int, Callable[[TopicView, TP], tuple[int, int]]] = {
    EARLIEST: lambda view, tp: (view.earliest(tp), UNKNOWN),
    EARLIEST_LOCAL: lambda view, tp: (view.earliest(tp), UNKNOWN),
    LATEST: lambda view, tp: (view.latest(tp), UNKNOWN),
}


def by_topic(rows: Iterable[Any], topic_of: Any, entry: Any) -> list[dict[str, Any]]:
    """Kafka's per-topic nesting: rows grouped by topic in first-seen order, each made an entry."""
    grouped: dict[str, list[Any]] = {}
    for row in rows:
        grouped.setdefault(topic_of(row), []).append(entry(row))
    return [{"name": name, "partitions": parts} for name, parts in grouped.items()]


def _results(results: Iterable[PartitionResult]) -> list[dict[str, Any]]:
    return by_topic(
        results, lambda r: r.topic, lambda r: {"partition_index": r.partition, "error_code": r.error}
    )


# ------------------------------------------------------------- OffsetCommit


async def handle_offset_commit(ctx: RequestContext, request: Any) -> Any:
    ids = await topic_ids(ctx) if request.__version__ >= TOPIC_ID_VERSION else None
    named = [(t, _topic_name(t, ids)) for t in request.topics]
    unknown = [t for t, name in named if name is None]
    # Built unchecked (`_make`): the partition's runtime validates the whole request where it
    # enters (`validate_request`, one pass over the column), so checking each of a wide
    # commit's partitions here too cost the leader's thread a second validation (~1 us each).
    make = OffsetCommitPartition._make
    partitions = tuple(
        make((
            name,
            p.partition_index,
            p.committed_offset,
            p.committed_metadata or "",
            getattr(p, "committed_leader_epoch", -1),
        ))
        for t, name in named
        if name is not None
        for p in t.partitions
    )
    results: tuple[PartitionResult, ...] = ()
    # As Kafka: a v10 commit whose every topic id is unknown never reaches the coordinator.
    if partitions or not unknown:
        retention = getattr(request, "retention_time", None)
        commit = OffsetCommitRequest(
            group_id=request.group_id,
            partitions=partitions,
            generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            # Only v2-4 have the field.
            retention_time_ms=ms(retention) if retention is not None else -1,
            version=request.__version__,
        )
        results = (await send(ctx.client, commit)).partitions
    if ids is None:  # the answer is the results' alone: a consumer gets the same one each time
        return _COMMIT_ANSWERS.respond(request, results, lambda: {"topics": _results(results)})
    if not unknown:  # v10: the results' and their topics' ids alone
        key = (results, tuple(t.topic_id for t in request.topics))
        return _COMMIT_ANSWERS.respond(request, key, lambda: {"topics": _with_ids(results, ids)})
    topics = _with_ids(results, ids) + [
        {
            "topic_id": t.topic_id,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": ErrorCode.unknown_topic_id}
                for p in t.partitions
            ],
        }
        for t in unknown
    ]
    return respond(request, {"topics": topics})


def _with_ids(results: Iterable[PartitionResult], ids: TopicIds) -> list[dict[str, Any]]:
    return [{**t, "topic_id": ids.ids[t["name"]]} for t in _results(results)]


def _topic_name(topic: Any, ids: TopicIds | None) -> str | None:
    """A request topic's name: its own below v10, its id's from v10 (None: unknown id)."""
    if ids is None:
        return topic.name  # type: ignore[no-any-return]
    return ids.names.get(topic.topic_id or ZERO_UUID)


# -------------------------------------------------------------- OffsetFetch


def _wanted(topics: Any, ids: TopicIds | None = None) -> tuple[tuple[str, int], ...] | None:
    if topics is None:
        return None
    named = ((_topic_name(t, ids), t) for t in topics)
    return tuple((name, p) for name, t in named if name is not None for p in t.partition_indexes)


def _group_answer(
    fetched: OffsetFetchResponse,
    wanted: Any,
    error_per_partition: bool,
    ids: TopicIds | None = None,
    asked: Any = None,
) -> dict[str, Any]:
    partitions = list(fetched.partitions)
    if error_per_partition and fetched.error is not Errors.NONE:
        partitions = [_unknown(t, p, fetched.error) for t, p in wanted or ()]
    topics = by_topic(
        partitions,
        lambda f: f.topic,
        lambda f: {
            "partition_index": f.partition,
            "committed_offset": f.offset,
            "committed_leader_epoch": f.leader_epoch,
            "metadata": f.metadata,
            "error_code": f.error,
        },
    )
    if ids is not None:
        topics = _by_id(topics, ids, asked if fetched.error is Errors.NONE else None)
    return {"topics": topics, "error_code": fetched.error}


def _by_id(topics: list[dict[str, Any]], ids: TopicIds, asked: Any) -> list[dict[str, Any]]:
    """v10's topics by id: a committed topic the registry has no id for (asked for every
    topic) is left out, an unknown id asked for is answered UNKNOWN_TOPIC_ID."""
    known = [{**t, "topic_id": ids.ids[t["name"]]} for t in topics if t["name"] in ids.ids]
    unknown = [
        {
            "topic_id": t.topic_id,
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.unknown_topic_id,
                }
                for p in t.partition_indexes
            ],
        }
        for t in asked or ()
        if _topic_name(t, ids) is None
    ]
    return known + unknown


def _unknown(topic: str, partition: int, error: Errors) -> FetchedOffset:
    return FetchedOffset(topic, partition, -1, -1, "", error)


async def _fetch_group(
    ctx: RequestContext, group_id: str, wanted: Any, stable: bool, member: Any = None
) -> OffsetFetchResponse:
    fetch = OffsetFetchRequest(
        group_id,
        wanted,
        stable,
        # v9+: a consumer-protocol member's id and epoch (null and -1 from anyone else).
        member_id=getattr(member, "member_id", None),
        member_epoch=getattr(member, "member_epoch", -1),
    )
    return await send(ctx.client, fetch)  # type: ignore[no-any-return]


async def handle_offset_fetch(ctx: RequestContext, request: Any) -> Any:
    stable = getattr(request, "require_stable", False)
    if request.__version__ >= 8:
        ids = await topic_ids(ctx) if request.__version__ >= TOPIC_ID_VERSION else None
        wanted = [_wanted(g.topics, ids) for g in request.groups]
        fetched = await asyncio.gather(
            *(_fetch_group(ctx, g.group_id, w, stable, g) for g, w in zip(request.groups, wanted))
        )
        groups = [
            {"group_id": g.group_id, **_group_answer(f, w, False, ids, g.topics)}
            for g, w, f in zip(request.groups, wanted, fetched)
        ]
        return respond(request, {"groups": groups})
    wanted_one = _wanted(request.topics)
    one = await _fetch_group(ctx, request.group_id, wanted_one, stable)
    return respond(request, _group_answer(one, wanted_one, request.__version__ < 2))


# ------------------------------------------------------------- OffsetDelete


async def handle_offset_delete(ctx: RequestContext, request: Any) -> Any:
    wanted = tuple((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    deleted = await send(ctx.client, OffsetDeleteRequest(request.group_id, wanted))
    return respond(request, {"error_code": deleted.error, "topics": _results(deleted.partitions)})


# -------------------------------------------------------------- ListOffsets


async def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    refusal = Errors.TOPIC_AUTHORIZATION_FAILED  # the topics the principal may not DESCRIBE
    try:
        hidden = await undescribable_topics(ctx.client, (t.name for t in request.topics))
    except CoordinatorUnavailableError:  # the ACLs are not read yet: retriable
        refusal, hidden = Errors.LEADER_NOT_AVAILABLE, {t.name for t in request.topics}
    names = [t.name for t in request.topics if t.name not in hidden]
    start, end = await offset_bounds(ctx, names)
    timed = [
        (t.name, p.partition_index, p.timestamp)
        for t in request.topics
        for p in t.partitions
        if p.timestamp >= 0 and (t.name, p.partition_index) in end
    ]
    view = TopicView({}, start, end, await _history(ctx, timed))

    def entry(row: tuple[str, int, int]) -> dict[str, Any]:
        topic, partition, timestamp = row
        error = refusal if topic in hidden else partition_error(end, topic, partition)
        offset, found_at = NO_RECORD
        if error is Errors.NONE:
            offset, found_at = record_for(view, (topic, partition), timestamp)
        return {
            "partition_index": partition,
            "error_code": error,
            "timestamp": found_at,
            "offset": offset,
            "leader_epoch": LEADER_EPOCH if offset != UNKNOWN else UNKNOWN,
        }

    rows = [(t.name, p.partition_index, p.timestamp) for t in request.topics for p in t.partitions]
    return respond(request, {"topics": by_topic(rows, lambda r: r[0], entry)})


def record_for(view: TopicView, tp: TP, timestamp: int) -> tuple[int, int]:
    """ListOffsets' (offset, timestamp) for `timestamp`, special or a time (module docstring)."""
    if timestamp < 0:
        special = SPECIAL_TIMESTAMPS.get(timestamp)
        return special(view, tp) if special else NO_RECORD
    return record_at_time(view, tp, timestamp)


def record_at_time(view: TopicView, tp: TP, timestamp_ms: int) -> tuple[int, int]:
    """The --to-datetime offset for `timestamp_ms` and the time of the first sample
    above it; NO_RECORD when no sample is (module docstring)."""
    offset = offset_at_time(view, tp, timestamp_ms)
    for at_ms, end in view.history.get(tp, ()):
        if end > offset:
            return offset, at_ms
    return NO_RECORD


async def _history(
    ctx: RequestContext, timed: list[tuple[str, int, int]]
) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """End-offset samples of the partitions asked for at a timestamp, from the earliest one asked."""
    if not timed:
        return {}
    since = min(ts for _, _, ts in timed)
    rows = await registry.end_offset_history_async(ctx.client.controller, {t for t, _, _ in timed}, since)
    history: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for topic, partition, at_ms, offset in rows:
        history.setdefault((topic, partition), []).append((at_ms, offset))
    return history


# ----------------------------------------------------- OffsetForLeaderEpoch


async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    _, end = await offset_bounds(ctx, [t.topic for t in request.topics])

    def entry(topic: str, partition: int) -> dict[str, Any]:
        error = partition_error(end, topic, partition)
        known = error is Errors.NONE
        return {
            "error_code": error,
            "partition": partition,
            "leader_epoch": LEADER_EPOCH if known else -1,
            "end_offset": end[(topic, partition)] if known else -1,
        }

    topics = [
        {"topic": t.topic, "partitions": [entry(t.topic, p.partition) for p in t.partitions]}
        for t in request.topics
    ]
    return respond(request, {"topics": topics})
