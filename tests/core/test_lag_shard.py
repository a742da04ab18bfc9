"""The shard keeps live lag from the records it applies (coordinator/lag.py, lag_query.py):
commits, deletes and group removals feed the tracker on the write path and on replay alike,
end offsets come from the driver, and LagRequest answers from the tracker."""

from __future__ import annotations

import random

from coordinator import Errors
from coordinator.handoff import release_moved
from coordinator.lag import Health
from coordinator.lag_query import AHEAD, AT_LEAST, LagRequest, LagResponse, rows_to_groups
from coordinator.messages import DeleteGroupsRequest, OffsetDeleteRequest
from coordinator.routing import Routing
from coordinator.shard import Shard

from tests.core.harness import Harness
from tests.core.test_handoff import groups_on

MINUTE = 60_000


def lag_of(shard: Shard, now_ms: int, groups: tuple[str, ...] | None = None) -> LagResponse:
    result = shard.handle(LagRequest(groups), now_ms, "t")
    [(_, response)] = result.responses
    assert not result.records, "a lag question writes nothing"
    return response


def test_commits_and_end_offsets_give_lag_in_messages_and_seconds() -> None:
    h = Harness()
    h.shard.update_end_offsets([("t", 0, 1_000, 100), ("t", 0, 2_000, 200)], whole=False)
    h.commit("g", {("t", 0): 150, ("u", 0): 3})
    response = lag_of(h.shard, 3_000)
    assert response.error is Errors.NONE
    assert response.groups == (("g", 50, 1_490, int(Health.OK)),)
    [t0, u0] = rows_to_groups(response.groups, response.partitions)[0].partitions
    assert (t0.committed, t0.end, t0.lag, t0.lag_ms) == (150, 200, 50, 1_490)
    assert (u0.end, u0.lag, u0.lag_ms) == (None, None, None), "no end reported: unknown, not 0"


def test_a_group_without_any_end_has_unknown_lag_and_an_end_below_the_commit_is_flagged() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 150})
    assert lag_of(h.shard, h.now).groups == (("g", None, None, int(Health.OK)),)
    h.shard.update_end_offsets([("t", 0, 500, 100)], whole=False)
    response = lag_of(h.shard, h.now)
    assert response.groups[0][1] == 0
    assert response.partitions[0][5] == 0 and response.partitions[0][7] & AHEAD


def test_a_commit_older_than_every_sample_is_a_lower_bound_in_seconds() -> None:
    h = Harness()
    h.shard.update_end_offsets([("t", 0, 500, 100)], whole=False)
    h.commit("g", {("t", 0): 10})
    row = lag_of(h.shard, 2_500).partitions[0]
    assert row[6] == 2_000 and row[7] & AT_LEAST


def test_deleted_offsets_and_groups_leave_the_answer() -> None:
    h = Harness()
    h.shard.update_end_offsets([("t", 0, 0, 100), ("t", 1, 0, 100)], whole=False)
    h.commit("a", {("t", 0): 10, ("t", 1): 20})
    h.commit("b", {("t", 0): 60})
    assert h.call(OffsetDeleteRequest("a", (("t", 1),))).error is Errors.NONE
    assert [g[:2] for g in lag_of(h.shard, h.now).groups] == [("a", 90), ("b", 40)]
    h.call(DeleteGroupsRequest(("b",)))
    assert [g[0] for g in lag_of(h.shard, h.now).groups] == ["a"]
    assert lag_of(h.shard, h.now, ("b", "nope")).groups == ()


def test_a_replayed_shard_has_the_same_lag_as_the_live_one() -> None:
    """Loading, and a follower's replay, feed the tracker as the write path does."""
    rng = random.Random(5)
    h = Harness()
    ends = [("t", p, 0, 1_000) for p in range(4)]
    for _ in range(200):
        h.now += rng.randrange(1, 5_000)
        group = f"g{rng.randrange(6)}"
        if rng.random() < 0.9:
            h.commit(group, {("t", rng.randrange(4)): rng.randrange(1_200)})
        else:
            h.call(OffsetDeleteRequest(group, (("t", rng.randrange(4)),)))
    h.shard.update_end_offsets(ends, whole=True)
    replayed = h.replayed()
    replayed.update_end_offsets(ends, whole=True)
    assert lag_of(replayed, h.now) == lag_of(h.shard, h.now)
    assert lag_of(h.shard, h.now).groups


def test_health_follows_the_commit_times_of_the_records() -> None:
    h = Harness(lag_window_ms=5 * MINUTE)
    h.shard.update_end_offsets([("t", 0, 0, 100)], whole=False)
    for _ in range(3):
        h.commit("g", {("t", 0): 40})
        h.now += MINUTE
    assert lag_of(h.shard, h.now).groups[0][3] == Health.STALLED
    assert lag_of(h.shard, h.now + 10 * MINUTE).groups[0][3] == Health.STOPPED
    replayed = h.replayed()
    replayed.update_end_offsets([("t", 0, 0, 100)], whole=True)
    assert lag_of(replayed, h.now + 10 * MINUTE).groups[0][3] == Health.STOPPED


def test_a_whole_view_of_ends_replaces_the_old_one() -> None:
    h = Harness()
    h.shard.update_end_offsets([("t", 0, 0, 100), ("t", 1, 0, 100)], whole=False)
    h.commit("g", {("t", 0): 10, ("t", 1): 10})
    h.shard.update_end_offsets([("t", 0, 0, 50)], whole=True)
    assert lag_of(h.shard, h.now).groups[0][1] == 40


def test_groups_moved_away_or_unloaded_leave_the_tracker() -> None:
    h = Harness()
    stay, move = groups_on(0, 4, 1)[0], groups_on(2, 4, 1)[0]
    h.commit(stay, {("t", 0): 1})
    h.commit(move, {("t", 0): 1})
    grown = Routing(4, previous=2, switched=frozenset({0}))
    h.absorb(h.shard.begin_handoff(grown, h.now))
    assert [g[0] for g in lag_of(h.shard, h.now).groups] == [stay], "a frozen group is the target's"
    release_moved(h.shard)
    assert h.shard.lag.groups() == [stay]
    h.absorb(h.shard.unload(h.now))
    assert h.shard.lag.groups() == []
