"""A partition's lag rows as JSON text (coordinator/lag_json.py) are `LagTracker.rows`, the
one definition of lag, lag in seconds and health, whatever state the tracker is in; and a
LagRequest for them answers the same groups as one for the rows."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from coordinator.lag import LagTracker
from coordinator.lag_json import json_lines
from coordinator.lag_query import LagRequest, LagResponse
from coordinator.routing import Routing
from coordinator.shard import Shard

from tests.core.harness import Harness
from tests.core.test_handoff import groups_on

MINUTE = 60_000
TOPICS = ("orders", 'qu"o\u00e9te\n', "no-end")  # the last never has an end reported


def random_tracker(rng: random.Random) -> tuple[LagTracker, int]:
    """Commits of several groups (some ids to escape) on a few partitions: going back now
    and then (REWIND), repeating (STALLED), falling behind (WARN), stopping (STOPPED), ahead
    of the end, older than every sample (seconds at least); ends reported over time. Returns
    it and the time of its last input."""
    tracker = LagTracker(window_ms=5 * MINUTE)
    groups = [f"g{i}" for i in range(6)] + ['we"ird\\', "caf\u00e9"]
    ends = {(topic, p): 0 for topic in TOPICS[:2] for p in range(3)}
    now = 0
    for _ in range(rng.randrange(50, 400)):
        now += rng.randrange(30_000)
        roll = rng.random()
        if roll < 0.25:
            tp = rng.choice(sorted(ends))
            ends[tp] += rng.randrange(200)
            tracker.on_end(tp, ends[tp], now)
        elif roll < 0.3:  # a consumer repeating one offset behind the end (STALLED)
            group_id, tp = rng.choice(groups), rng.choice(sorted(ends))
            for _ in range(3):
                now += 1_000
                tracker.on_commit(group_id, tp, max(ends[tp] - 30, 0), now)
        elif roll < 0.35:  # one falling behind at every commit (WARN)
            group_id, tp = rng.choice(groups), rng.choice(sorted(ends))
            offset = ends[tp]
            for _ in range(4):
                now += 1_000
                ends[tp] += 50
                tracker.on_end(tp, ends[tp], now)
                offset += 5
                tracker.on_commit(group_id, tp, offset, now)
        else:
            tp = (rng.choice(TOPICS), rng.randrange(3))
            base = ends.get(tp, 100)
            offset = max(base + rng.randrange(-150, 40), 0)  # behind, caught up or ahead
            tracker.on_commit(rng.choice(groups), tp, offset, now)
    return tracker, now


def expected(tracker: LagTracker, group_id: str, now_ms: int) -> list[dict[str, Any]]:
    """`raygroups lag --live --json`'s objects for the group, from `LagTracker.rows`."""
    rows = tracker.rows(group_id, now_ms) or []
    return [
        {"group": group_id, "topic": topic, "partition": partition, "current_offset": committed,
         "log_end_offset": end, "lag": lag, "lag_seconds": None if lag_ms is None else lag_ms / 1000,
         "health": health.name, "ahead": ahead}
        for topic, partition, committed, end, lag, lag_ms, ahead, _, health in rows
    ]


def parsed(text: str) -> list[dict[str, Any]]:
    lines = text.split("\n")
    assert lines[-1] == "" and all(line.endswith(",") for line in lines[:-1]), "each row: an object, ',\\n'"
    return [json.loads(line[:-1]) for line in lines[:-1]]


@pytest.mark.parametrize("seed", range(30))
def test_the_json_rows_are_the_trackers_rows(seed: int) -> None:
    rng = random.Random(seed)
    tracker, last = random_tracker(rng)
    wanted = [*sorted(tracker.committed), "no-such-group"]
    for now in (last, last + 2 * MINUTE, last + 10 * MINUTE):  # within, past a window
        texts = json_lines(tracker, wanted, now)
        assert [group_id for group_id, _ in texts] == sorted(tracker.committed), f"seed {seed}"
        for group_id, text in texts:
            assert text.isascii(), "escaped as json.dumps does"
            assert parsed(text) == expected(tracker, group_id, now), f"seed {seed}, {group_id!r} at {now}"


def test_every_health_and_flag_appears_in_the_random_states() -> None:
    """The states above reach every rule (the comparison is not vacuous)."""
    seen: set[tuple[str, bool, bool]] = set()
    at_least = interpolated = 0
    for seed in range(30):
        tracker, last = random_tracker(random.Random(seed))
        for now in (last, last + 10 * MINUTE):
            for group_id in tracker.committed:
                for row in expected(tracker, group_id, now):
                    seen.add((row["health"], row["ahead"], row["lag"] is None))
                for row in tracker.rows(group_id, now) or []:
                    at_least += row[7]
                    interpolated += bool(row[4]) and not row[7]
    assert {health for health, _, _ in seen} == {"OK", "WARN", "REWIND", "STALLED", "STOPPED"}
    assert any(ahead for _, ahead, _ in seen) and any(unknown for _, _, unknown in seen)
    assert at_least and interpolated, "lag in seconds both older than every sample and between two"


def lag_of(shard: Shard, request: LagRequest, now_ms: int) -> LagResponse:
    [(_, response)] = shard.handle(request, now_ms, "t").responses
    return response  # type: ignore[no-any-return]


def test_a_lag_request_as_json_answers_the_groups_the_partition_owns_and_only_those_asked() -> None:
    h = Harness()
    for i in range(12):
        h.commit(f"g{i}", {("t", 0): i, ("t", 1): 2 * i})
    h.shard.update_end_offsets([("t", 0, 0, 20), ("t", 1, 0, 30)], whole=True)
    now = h.now
    rows = lag_of(h.shard, LagRequest(None), now)
    texts = lag_of(h.shard, LagRequest(None, as_json=True), now)
    assert texts.partitions == () and texts.groups == (), "only the text"
    assert [g for g, _ in texts.json_groups] == [row[0] for row in rows.groups]
    named = lag_of(h.shard, LagRequest(("g3", "g1", "g3", "none"), as_json=True), now)
    assert [g for g, _ in named.json_groups] == ["g1", "g3"]
    assert [row["current_offset"] for _, text in named.json_groups for row in parsed(text)] == [1, 2, 3, 6]
    # Under a routing that sends some of them elsewhere (a repartition), those are left out.
    stay, move = groups_on(0, 4, 1)[0], groups_on(2, 4, 1)[0]
    h.commit(stay, {("t", 0): 1})
    h.commit(move, {("t", 0): 1})
    h.absorb(h.shard.begin_handoff(Routing(4, previous=2, switched=frozenset({0})), h.now))
    owned = lag_of(h.shard, LagRequest(None, as_json=True), h.now)
    assert owned.routing == h.shard.owner is not None
    kept = [g for g, _ in owned.json_groups]
    assert kept == [row[0] for row in lag_of(h.shard, LagRequest(None), h.now).groups]
    assert stay in kept and move not in kept


def test_lag_in_seconds_is_written_as_json_writes_the_float() -> None:
    """Written from the integers below 10**15 ms, from the float past it: `repr(ms / 1000)`."""
    rng = random.Random(5)
    values = [0, 1, 10, 100, 999, 1_000, 1_001, 1_500, 60_000, 10**15 - 1, 10**15, 10**15 + 7, 2**62]
    values += [rng.randrange(10**e) for e in (4, 7, 10, 13, 15, 17) for _ in range(200)]
    for ms in values:
        tracker = LagTracker()
        tracker.on_end(("t", 0), 10, 0)
        tracker.on_commit("g", ("t", 0), 5, 0)  # older than every sample: now - the first one's time
        [(_, text)] = json_lines(tracker, ["g"], ms)
        assert f'"lag_seconds":{ms / 1000!r},' in text, ms
