"""Lag watches (coordinator/lag_watch.py): a parked request answered when the group's lag
crosses the watcher's target, moves by its step, becomes known, or at its keep-alive; one
per watcher; NOT_COORDINATOR when the group leaves the shard."""

from __future__ import annotations

import dataclasses

import pytest

from coordinator import Errors
from coordinator.lag_watch import LagWatchRequest, LagWatchResponse, wakes
from coordinator.routing import Routing

from tests.core.harness import Harness
from tests.core.test_handoff import groups_on
from tests.core.test_runtime import Driver, commit


def watch(group: str = "g", seen: int | None = None, seen_ms: int | None = None, *,
          over: int | None = 100, over_ms: int | None = None, step: int = 0, timeout_ms: int = 10_000,
          watcher: str = "pool") -> LagWatchRequest:
    return LagWatchRequest(group, watcher, seen, seen_ms, over, over_ms, step, timeout_ms)


def ends(h: Harness, **by_partition: int) -> None:
    h.absorb(h.shard.update_end_offsets(
        [("t", int(p[1:]), h.now, end) for p, end in by_partition.items()], whole=False, now_ms=h.now))


@pytest.mark.parametrize(("seen", "now", "reason"), [
    (None, 5, "known"), (5, None, "known"), (None, None, None),
    (50, 150, "target"), (150, 50, "target"), (100, 101, "target"),
    (150, 400, None), (50, 99, None),
])
def test_wakes_on_known_and_on_the_target_by_messages(
    seen: int | None, now: int | None, reason: str | None
) -> None:
    assert wakes(watch(seen=seen), now, None) == reason


def test_wakes_by_step_and_by_ms() -> None:
    assert wakes(watch(seen=150, step=100), 249, None) is None
    assert wakes(watch(seen=150, step=100), 250, None) == "step"
    assert wakes(watch(seen=250, step=100), 150, None) == "step"
    by_ms = watch(seen=10, seen_ms=500, over=None, over_ms=1_000)
    assert wakes(by_ms, 10_000, 900) is None, "an ms target looks at the lag in ms only"
    assert wakes(by_ms, 10, 1_001) == "target"


def test_a_parked_watch_is_answered_when_end_offsets_take_the_lag_over_the_target() -> None:
    h = Harness()
    ends(h, p0=30, p1=30)
    h.commit("g", {("t", 0): 0, ("t", 1): 0})
    token = h.send(watch(seen=60))
    assert not h.answered(token), "as seen: parked"
    ends(h, p0=60)
    assert not h.answered(token), "lag 90 is not over 100"
    ends(h, p1=50)
    answer = h.take(token)
    assert isinstance(answer, LagWatchResponse) and answer.error is Errors.NONE
    assert answer.reason == "target" and answer.groups[0][:2] == ("g", 110)
    assert [row[5] for row in answer.partitions] == [60, 50]


def test_a_commit_under_the_target_answers_and_writes_nothing_more() -> None:
    h = Harness()
    ends(h, p0=500)
    h.commit("g", {("t", 0): 0})
    token = h.send(watch(seen=500))
    written = len(h.log)
    h.commit("g", {("t", 0): 450})
    answer = h.take(token)
    assert answer.reason == "target" and answer.groups[0][1] == 50
    assert len(h.log) == written + 1, "only the commit's record"


def test_already_changed_is_answered_at_once_and_unknown_lag_is_parked() -> None:
    h = Harness()
    empty = h.send(watch(group="none", seen=None))
    assert not h.answered(empty), "no committed offset: lag unknown, as the watcher saw it"
    h.commit("g", {("t", 0): 0})
    token = h.send(watch(seen=None))
    assert not h.answered(token), "no end reported: lag unknown"
    ends(h, p0=3)
    assert h.take(token).reason == "known"
    assert h.call(watch(seen=500)).reason == "target", "the watcher saw other than what is"
    h.commit("none", {("t", 0): 1})
    answer = h.take(empty)
    assert answer.reason == "known" and answer.groups == (("none", 2, 0, 0),)


def test_keep_alive_replacement_and_a_second_watcher() -> None:
    h = Harness()
    ends(h, p0=10)
    h.commit("g", {("t", 0): 0})
    first = h.send(watch(seen=10, timeout_ms=5_000))
    other = h.send(watch(seen=10, timeout_ms=60_000, watcher="other"))
    h.advance(4_999)
    assert not h.answered(first)
    h.advance(1)
    assert h.take(first).reason == "keep-alive"
    again = h.send(watch(seen=10, watcher="other"))
    assert h.take(other).reason == "replaced" and not h.answered(again)
    h.advance(60_000)
    assert h.take(again).reason == "keep-alive"
    assert h.shard.lag_watches == {} and not h.open


@pytest.mark.parametrize("change", [
    {"watcher_id": ""}, {"over_messages": None}, {"over_ms": 5}, {"over_messages": -1},
    {"step": -1}, {"timeout_ms": 60_001}, {"timeout_ms": -1},
])
def test_bad_watches_are_refused(change: dict[str, object]) -> None:
    bad = dataclasses.replace(watch(), **change)  # type: ignore[arg-type]
    assert h_call(bad).error is Errors.INVALID_REQUEST


def h_call(request: LagWatchRequest) -> LagWatchResponse:
    h = Harness()
    answer: LagWatchResponse = h.call(request)
    assert h.shard.lag_watches == {}
    return answer


def test_unload_and_a_handoff_answer_not_coordinator() -> None:
    h = Harness()
    stay, move = groups_on(0, 4, 1)[0], groups_on(2, 4, 1)[0]
    stayed, moved = h.send(watch(group=stay)), h.send(watch(group=move))
    h.absorb(h.shard.begin_handoff(Routing(4, previous=2, switched=frozenset({0})), h.now))
    assert h.take(moved).error is Errors.NOT_COORDINATOR and not h.answered(stayed)
    assert h.call(watch(group=move)).error is Errors.NOT_COORDINATOR, "a frozen group is the target's"
    h.absorb(h.shard.unload(h.now))
    assert h.take(stayed).error is Errors.NOT_COORDINATOR and not h.open


def test_the_runtime_releases_a_watch_woken_by_end_offsets_once_what_it_saw_is_durable() -> None:
    d = Driver()
    d.send(commit("g", 0))
    d.flush()
    token = d.send(watch(seen=None))
    assert token not in d.answers, "no end yet: unknown, as seen"
    committed = d.send(commit("g", 5))  # applied, not yet durable
    released = d.runtime.update_end_offsets([("t", 0, d.now, 500)], False, d.now)
    assert released == [], "the answer shows a commit that is not durable yet: held"
    d.flush()
    assert d.answer(committed).errors() == {("t", 0): Errors.NONE}
    d.take(released)
    assert d.answer(token).reason == "known" and d.answer(token).groups[0][1] == 495
    parked = d.send(watch(seen=495))
    d.take(d.runtime.unload(d.now))
    assert d.answer(parked).error is Errors.NOT_COORDINATOR, "the client re-routes the next watch"
    assert d.runtime.update_end_offsets([("t", 0, d.now, 600)], False, d.now) is None, "not serving"


def test_an_ms_target_is_answered_when_time_alone_takes_the_lag_over_it() -> None:
    h = Harness()
    ends(h, p0=100)  # the end is 100 from now on
    h.commit("g", {("t", 0): 40})
    h.advance(300)
    token = h.send(watch(seen=60, seen_ms=300, over=None, over_ms=1_000, timeout_ms=60_000))
    h.advance(699)
    assert not h.answered(token), "1 s behind the end's time: not over 1 s yet"
    h.commit("g", {("t", 0): 50})  # still behind the same end: the lag in ms keeps growing
    assert not h.answered(token)
    h.advance(2)
    answer = h.take(token)
    assert answer.reason == "target" and answer.groups[0][2] == 1_001
    caught_up = h.send(watch(seen=0, seen_ms=0, over=None, over_ms=1_000, timeout_ms=5_000))
    assert h.take(caught_up).reason == "target", "seen under, it is over"
    h.commit("g", {("t", 0): 100})
    idle = h.send(watch(seen=0, seen_ms=0, over=None, over_ms=1_000, timeout_ms=5_000))
    h.advance(4_999)
    assert not h.answered(idle), "no lag: the lag in ms does not grow"
    h.advance(1)
    assert h.take(idle).reason == "keep-alive"
