"""A controller that dies in the middle of moving a partition: its restarted
successor finishes the saved move with exactly one leader and kills the rest."""

from __future__ import annotations

import pytest

from tests.controller.fake import ControllerCrash, FakeCluster, MemoryStore
from tests.controller.helpers import leader_of, make_plane, run, watch

CRASH_POINTS = {
    "before the old leader unloads": {"crash_before": ("unload", None)},
    "before the new leader is created": {"crash_before": ("create", None)},
    "before the new leader is activated": {"crash_before": ("activate", None)},
    "after the new leader is activated": {"crash_after": "activate"},
}


@pytest.mark.parametrize("point", CRASH_POINTS)
@pytest.mark.parametrize("standby", [False, True], ids=["new actor", "standby"])
def test_a_restarted_controller_finishes_a_move_its_predecessor_started(point: str, standby: bool) -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        plane = make_plane(cluster, store, standby_actors=int(standby))
        await plane.start()
        await plane.refill_standbys_once()
        old = leader_of(cluster, 1)
        crash = dict(CRASH_POINTS[point])
        if standby:  # a standby is not created but probed, then told to assume the partition
            [name] = plane.state.standbys
            renamed = {
                ("create", None): ("probe", name),
                ("activate", None): ("assume", None),
                "activate": "assume",
            }
            crash = {key: renamed.get(value, value) for key, value in crash.items()}
        for key, value in crash.items():
            setattr(cluster, key, value)
        with pytest.raises(ControllerCrash):
            await plane.reassign(1)
        assert store.data is not None and "1" in store.data["intents"], "the move was saved before acting"

        restarted = make_plane(cluster, store, standby_actors=int(standby))
        await restarted.start()
        await watch(restarted, 2)
        await restarted.reap_once()
        for p in range(3):
            assert [a.state for a in cluster.leaders_of(p)] == ["ACTIVE"], p
        new = leader_of(cluster, 1)
        assert new.epoch == old.epoch + 1 and old.killed
        assert store.data["intents"] == {} and store.data["epochs"]["1"] == new.epoch
        assert set(cluster.live) == restarted.state.owned_names()
        assert restarted.routing()[1][1] is new

    run(scenario())


def test_a_restart_adopts_live_leaders_without_moving_them() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        await make_plane(cluster, store).start()
        before = {p: leader_of(cluster, p) for p in range(3)}
        restarted = make_plane(cluster, store)
        await restarted.start()
        assert {p: leader_of(cluster, p) for p in range(3)} == before
        assert restarted.routing()[1] == [before[p] for p in range(3)]
        assert not restarted.metrics.failovers and len(cluster.created) == 3

    run(scenario())


def test_metadata_of_an_earlier_version_is_read_and_kept_conservative() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        store.data = {"num_partitions": 2, "epochs": {"0": 3, "1": 0}, "actors": {}, "standbys": []}
        plane = make_plane(cluster, store, num_partitions=2)
        await plane.start()
        # Partition 0 had leaders: its log must exist; partition 1 never had one.
        assert leader_of(cluster, 0).known_end == 0 and leader_of(cluster, 1).known_end == -1
        assert leader_of(cluster, 0).epoch == 4 and leader_of(cluster, 1).epoch == 1

    run(scenario())


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_reassign_retried_on_the_restarted_controller_moves_the_partition_once(point: str) -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        plane = make_plane(cluster, store)
        await plane.start()
        seen = leader_of(cluster, 1).epoch
        for key, value in CRASH_POINTS[point].items():
            setattr(cluster, key, value)
        with pytest.raises(ControllerCrash):
            await plane.reassign(1, None, seen)

        restarted = make_plane(cluster, store)
        await restarted.start()  # finishes the saved move
        moved = leader_of(cluster, 1)
        created = len(cluster.created)
        # Ray retries the call, same arguments, on the restarted controller.
        assert await restarted.reassign(1, None, seen) == moved.epoch == seen + 1
        assert leader_of(cluster, 1) is moved and len(cluster.created) == created
        assert store.data is not None and store.data["epochs"]["1"] == seen + 1

    run(scenario())
