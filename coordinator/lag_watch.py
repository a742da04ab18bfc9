"""Lag watches: a group's live lag pushed to whoever watches it (a consumer pool).

A `ConsumerPool` needs to learn when its group's lag crosses its target, not to
ask every 0.2 s whether it did (DESIGN section 10: signals are pushed). It
parks a `LagWatchRequest` at the partition leader that owns the group, routed
like every group request (a failover or a repartition answers it
NOT_COORDINATOR and the client sends the next one to the new owner). The
shard answers it from its LagTracker (coordinator/lag.py) as soon as the
group's lag, compared with what the watcher last saw (`seen_lag`,
`seen_lag_ms`, as the last answer gave them), `wakes` it:
- the lag became known or unknown ("known");
- it is on the other side of the watcher's target ("target"): `over_messages`
  against the group's summed lag, `over_ms` against its largest lag in ms;
- it moved by `step` or more ("step"), in messages, or in ms for an ms
  target (0: no step rule);
or at `timeout_ms` ("keep-alive": the watcher's own time-based decisions, a
cooldown that ends, are due then). The answer carries the group's rows, as a
LagRequest's do (coordinator/lag_query.py), and its reason; the watcher
decides and parks the next watch with the lag it saw.

When a watch is checked: after every request that names its group (its
commits, its offset deletes) and after every end-offset update the driver
gives, for every watched group (watches are few, one per pool; a check
costs the group's sum, or its rows for an ms target). A lag in ms also grows
with time alone, a millisecond a millisecond while the committed offset stays
behind: a watch on `over_ms` under its target has its timer at the moment the
lag would cross it (then checked, and answered or set again), or at its
keep-alive if that comes first.

A watcher (`watcher_id`) has one watch per group: a new one answers the one
it replaces ("replaced"). Watches are volatile, as parked requests are: an
unload answers them NOT_COORDINATOR, a handoff those of the groups it moves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from coordinator.checks import Checked, register_requests
from coordinator.errors import Errors
from coordinator.lag import LagTracker
from coordinator.lag_query import GroupRow, PartitionRow, group_rows
from coordinator.timers import TimerQueue

LAG_WATCH_TIMER = "lag-watch"
MAX_LAG_WATCH_MS = 60_000


@dataclass(frozen=True, slots=True)
class LagWatchRequest(Checked):
    group_id: str
    watcher_id: str
    seen_lag: int | None  # the group's summed lag the watcher last saw (None: unknown)
    seen_lag_ms: int | None  # its largest lag in ms
    over_messages: int | None  # the target: exactly one of the two
    over_ms: int | None
    step: int  # in messages, or ms for an ms target; 0: no step rule
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class LagWatchResponse:
    error: Errors
    reason: str = ""  # known, target, step, keep-alive, replaced
    groups: tuple[GroupRow, ...] = ()  # the group's row, absent while it has no committed offset
    partitions: tuple[PartitionRow, ...] = ()


register_requests((LagWatchRequest,))

ERROR_RESPONSES: dict[type, Callable[..., object]] = {
    LagWatchRequest: lambda _request, error: LagWatchResponse(error),
}


def wakes(request: LagWatchRequest, lag: int | None, lag_ms: int | None) -> str | None:
    """Why the group's lag now (`lag`, `lag_ms`) answers the watch; None: it stays parked."""
    by_ms = request.over_ms is not None
    seen = request.seen_lag_ms if by_ms else request.seen_lag
    now = lag_ms if by_ms else lag
    if (seen is None) != (now is None):
        return "known"
    if seen is None or now is None:
        return None
    target = request.over_ms if by_ms else request.over_messages
    assert target is not None
    if (seen > target) != (now > target):
        return "target"
    if request.step and abs(now - seen) >= request.step:
        return "step"
    return None


def invalid(request: LagWatchRequest) -> bool:
    targets = (request.over_messages, request.over_ms)
    return (
        not request.watcher_id
        or (targets[0] is None) == (targets[1] is None)
        or any(t is not None and t < 0 for t in targets)
        or request.step < 0
        or not 0 <= request.timeout_ms <= MAX_LAG_WATCH_MS
    )


class LagWatchHost(Protocol):
    """What lag watches need of the shard."""

    lag: LagTracker
    # group -> watcher -> (token, request, keep-alive deadline)
    lag_watches: dict[str, dict[str, tuple[Any, LagWatchRequest, int]]]
    timers: TimerQueue
    now_ms: int

    def reply(self, token: Any, response: Any) -> None: ...


def handle_lag_watch(shard: LagWatchHost, request: LagWatchRequest, token: Any) -> LagWatchResponse | None:
    if invalid(request):
        return LagWatchResponse(Errors.INVALID_REQUEST)
    watches = shard.lag_watches.setdefault(request.group_id, {})
    replaced = watches.pop(request.watcher_id, None)
    if replaced is not None:
        shard.reply(replaced[0], _answer(shard, request.group_id, "replaced"))
    answer = _check(shard, request)
    if answer is not None:
        _forget_if_empty(shard, request.group_id)
        return answer
    deadline = shard.now_ms + request.timeout_ms
    watches[request.watcher_id] = (token, request, deadline)
    _schedule(shard, request, deadline)
    return None


def check_group(shard: LagWatchHost, group_id: str) -> None:
    """After a change to the group's lag: answer the watches it wakes."""
    watches = shard.lag_watches.get(group_id)
    if not watches:
        return
    for watcher_id, (token, request, deadline) in list(watches.items()):
        answer = _check(shard, request)
        if answer is not None:
            del watches[watcher_id]
            shard.timers.cancel(_key(group_id, watcher_id))
            shard.reply(token, answer)
        elif request.over_ms is not None:
            _schedule(shard, request, deadline)  # a commit moved the moment it would cross


def check_all(shard: LagWatchHost) -> None:
    """After new end offsets: every watched group (watches are few)."""
    for group_id in list(shard.lag_watches):
        check_group(shard, group_id)


    _forget_if_empty(shard, group_id)


def on_lag_watch_timeout(shard: LagWatchHost, group_id: str, watcher_id: str, payload: object = None) -> None:
    """Its keep-alive, or (an ms target) the moment its lag would cross the target."""
    watches = shard.lag_watches.get(group_id, {})
    parked = watches.get(watcher_id)
    if parked is None:
        return
    token, request, deadline = parked
    answer = _check(shard, request)
    if answer is None and shard.now_ms < deadline:
        _schedule(shard, request, deadline)
        return
    del watches[watcher_id]
    shard.reply(token, answer or _answer(shard, group_id, "keep-alive"))
    _forget_if_empty(shard, group_id)


def answer_group(shard: LagWatchHost, group_id: str, error: Errors) -> None:
    """Answer every watch of the group with `error` (it leaves this shard)."""
    for watcher_id, (token, _, _) in shard.lag_watches.pop(group_id, {}).items():
        shard.timers.cancel(_key(group_id, watcher_id))
        shard.reply(token, LagWatchResponse(error))


def answer_all(shard: LagWatchHost, error: Errors) -> None:
    for group_id in list(shard.lag_watches):
        answer_group(shard, group_id, error)


def _check(shard: LagWatchHost, request: LagWatchRequest) -> LagWatchResponse | None:
    tracker, group_id = shard.lag, request.group_id
    if request.over_ms is None:  # the sum alone: no rows (seconds, health) unless answered
        reason = wakes(request, tracker.lag_sum(group_id), None)
    else:
        rows = tracker.rows(group_id, shard.now_ms)
        summary = None if rows is None else tracker.summary(group_id, rows)
        reason = wakes(request, None if summary is None else summary.lag,
                       None if summary is None else summary.lag_ms)
    return None if reason is None else _answer(shard, group_id, reason)


def _schedule(shard: LagWatchHost, request: LagWatchRequest, deadline: int) -> None:
    """The watch's timer: its keep-alive, or sooner the moment an ms target would be crossed."""
    due = deadline
    if request.over_ms is not None:
        rows = shard.lag.rows(request.group_id, shard.now_ms)
        summary = None if rows is None else shard.lag.summary(request.group_id, rows)
        if summary is not None and summary.lag and summary.lag_ms is not None:
            due = min(due, shard.now_ms + max(1, request.over_ms - summary.lag_ms + 1))
    shard.timers.schedule(_key(request.group_id, request.watcher_id), due)


def _answer(shard: LagWatchHost, group_id: str, reason: str) -> LagWatchResponse:
    groups, partitions = group_rows(shard.lag, group_id, shard.now_ms)
    return LagWatchResponse(Errors.NONE, reason, groups, partitions)


def _forget_if_empty(shard: LagWatchHost, group_id: str) -> None:
    if not shard.lag_watches.get(group_id, True):
        del shard.lag_watches[group_id]


def _key(group_id: str, watcher_id: str) -> tuple[str, str, str]:
    return (LAG_WATCH_TIMER, group_id, watcher_id)


HANDLERS: dict[type, Callable[..., Any]] = {LagWatchRequest: handle_lag_watch}
