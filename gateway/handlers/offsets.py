"""OffsetCommit, OffsetFetch, OffsetDelete, ListOffsets and OffsetForLeaderEpoch.

Group offsets go through the coordinator, by version:
- OffsetCommit v2-4 carry a retention time (-1: the broker's retention
  decides, KIP-211), v6+ a leader epoch per partition, v7+ the group
  instance id. A null commit metadata is stored as "".
- OffsetFetch v1 names its partitions and has no group error field: a
  group error goes to every partition, as Kafka's OffsetFetchResponse
  writes it; v2+ may ask for every partition (null topics) and answer a
  group error; v8+ asks for several groups at once, sent concurrently to
  their coordinators.
Topic offsets come from the registry (handlers/topics.py):
- ListOffsets: -2 (earliest) is the log start offset, -1 (latest) the end
  offset, -3 (max timestamp, v7+) no record (-1, as Kafka answers for an
  empty partition), a timestamp the end offset in effect then
  (coordinator.reset_plan.offset_at_time, the rule reset-offsets
  --to-datetime uses).
- OffsetForLeaderEpoch: every partition has had one leader epoch (0), so
  any epoch ends at the partition's end offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from actors import topics as registry
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
from coordinator.reset_plan import TopicView, offset_at_time
from gateway.handlers.calls import send
from gateway.handlers.entities import ms, respond
from gateway.handlers.topics import LEADER_EPOCH, offset_bounds, partition_error

if TYPE_CHECKING:
    from gateway.apis import RequestContext

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


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
    retention = getattr(request, "retention_time", None)
    commit = OffsetCommitRequest(
        group_id=request.group_id,
        partitions=tuple(
            OffsetCommitPartition(
                t.name,
                p.partition_index,
                p.committed_offset,
                p.committed_metadata or "",
                getattr(p, "committed_leader_epoch", -1),
            )
            for t in request.topics
            for p in t.partitions
        ),
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        # Only v2-4 have the field.
        retention_time_ms=ms(retention) if retention is not None else -1,
    )
    committed = await send(ctx.client, commit)
    return respond(request, {"topics": _results(committed.partitions)})


# -------------------------------------------------------------- OffsetFetch


def _wanted(topics: Any) -> tuple[tuple[str, int], ...] | None:
    if topics is None:
        return None
    return tuple((t.name, p) for t in topics for p in t.partition_indexes)


def _group_answer(fetched: OffsetFetchResponse, wanted: Any, error_per_partition: bool) -> dict[str, Any]:
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
    return {"topics": topics, "error_code": fetched.error}


def _unknown(topic: str, partition: int, error: Errors) -> FetchedOffset:
    return FetchedOffset(topic, partition, -1, -1, "", error)


async def _fetch_group(ctx: RequestContext, group_id: str, topics: Any, stable: bool) -> OffsetFetchResponse:
    return await send(ctx.client, OffsetFetchRequest(group_id, _wanted(topics), stable))  # type: ignore[no-any-return]


async def handle_offset_fetch(ctx: RequestContext, request: Any) -> Any:
    stable = getattr(request, "require_stable", False)
    if request.__version__ >= 8:
        fetched = await asyncio.gather(
            *(_fetch_group(ctx, g.group_id, g.topics, stable) for g in request.groups)
        )
        groups = [
            {"group_id": g.group_id, **_group_answer(f, _wanted(g.topics), False)}
            for g, f in zip(request.groups, fetched)
        ]
        return respond(request, {"groups": groups})
    one = await _fetch_group(ctx, request.group_id, request.topics, stable)
    return respond(request, _group_answer(one, _wanted(request.topics), request.__version__ < 2))


# ------------------------------------------------------------- OffsetDelete


async def handle_offset_delete(ctx: RequestContext, request: Any) -> Any:
    wanted = tuple((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    deleted = await send(ctx.client, OffsetDeleteRequest(request.group_id, wanted))
    return respond(request, {"error_code": deleted.error, "topics": _results(deleted.partitions)})


# -------------------------------------------------------------- ListOffsets


async def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    names = [t.name for t in request.topics]
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
        error = partition_error(end, topic, partition)
        offset = -1
        if error is Errors.NONE:
            offset = _offset_for(view, (topic, partition), timestamp)
        return {
            "partition_index": partition,
            "error_code": error,
            "timestamp": -1,
            "offset": offset,
            "leader_epoch": LEADER_EPOCH if error is Errors.NONE else -1,
        }

    rows = [(t.name, p.partition_index, p.timestamp) for t in request.topics for p in t.partitions]
    return respond(request, {"topics": by_topic(rows, lambda r: r[0], entry)})


def _offset_for(view: TopicView, tp: tuple[str, int], timestamp: int) -> int:
    if timestamp == EARLIEST:
        return view.earliest(tp)
    if timestamp == LATEST:
        return view.latest(tp)
    if timestamp < 0:  # max timestamp (-3) or another special value: no record known
        return -1
    return offset_at_time(view, tp, timestamp)


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
