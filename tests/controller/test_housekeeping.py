"""Orphan reaping, loops that survive their errors, standby refill without leaks."""

from __future__ import annotations

import asyncio

from actors.controller.cluster_view import PARTITION_ACTOR_PREFIX

from tests.controller.fake import FakeCluster, ManualClock, MemoryStore
from tests.controller.helpers import make_plane, run


def test_partition_actors_nobody_owns_are_reaped_and_nothing_else() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore(), standby_actors=1)
        await plane.start()
        await plane.refill_standbys_once()
        owned = set(cluster.live)
        orphan = cluster.create(f"{PARTITION_ACTOR_PREFIX}orphan", 1, 9, "n1", False)
        other = cluster.create("raygroups-topics", 0, 0, "n1", False)
        assert await plane.reap_once() == 1
        assert orphan.killed and not other.killed
        assert set(cluster.live) == owned | {other.name}
        assert plane.metrics.reaped == 1 and plane.stats()["orphans_reaped"] == 1

    run(scenario())


def test_a_loop_goes_on_after_an_iteration_raises_and_counts_it() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        calls = []

        async def step() -> None:
            calls.append(len(calls))
            if len(calls) <= 2:
                raise RuntimeError("one bad iteration")

        loop = asyncio.create_task(plane.supervise("watch", step, 0))
        while len(calls) < 4:
            await asyncio.sleep(0)
        assert not loop.done()
        loop.cancel()
        assert plane.metrics.loop_errors == {"watch": 2}
        # The real reaper step, failing once in the cluster call, then reaping.
        cluster.names_error = RuntimeError("GCS unavailable")
        cluster.create(f"{PARTITION_ACTOR_PREFIX}orphan", 0, 5, "n2", False)
        reaper = asyncio.create_task(plane.supervise("reaper", plane.reap_once, 0))
        while plane.metrics.reaped == 0:
            await asyncio.sleep(0)
        reaper.cancel()
        assert plane.metrics.loop_errors == {"watch": 2, "reaper": 1}

    run(scenario())


def test_a_standby_that_does_not_answer_is_killed_and_refill_backs_off() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        cluster = FakeCluster(fail_next_pings=1)
        plane = make_plane(cluster, MemoryStore(), clock, standby_actors=1, probe_interval_s=1.0)
        await plane.start()
        created = len(cluster.created)
        await plane.refill_standbys_once()
        [failed] = cluster.created[created:]
        assert failed.killed and plane.state.standbys == []
        await plane.refill_standbys_once()  # within the backoff: no new attempt
        assert len(cluster.created) == created + 1
        clock.advance(5)
        await plane.refill_standbys_once()
        [standby] = cluster.created[created + 1 :]
        assert plane.state.standbys == [standby.name] and not standby.killed
        assert {a.name for a in cluster.created if a.killed} == {failed.name}

    run(scenario())


def test_a_standby_that_died_is_dropped_and_replaced() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        plane = make_plane(cluster, store, standby_actors=1)
        await plane.start()
        await plane.refill_standbys_once()
        [first] = plane.state.standbys
        cluster.crash(cluster.live[first])
        await plane.refill_standbys_once()
        [second] = plane.state.standbys
        assert second != first and store.data is not None and store.data["standbys"] == [second]

    run(scenario())
