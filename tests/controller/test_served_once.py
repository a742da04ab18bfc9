"""A partition served once is never served empty again (replication factor 1):
the controller persists that a partition was served (`known_end` >= 0, its log
required from then on) before any client can reach its leader, so a leader
that dies right after it started serving is never replaced by an empty log."""

from __future__ import annotations

import asyncio

from actors.controller.state import NEVER_LOADED

from tests.controller.fake import FakeCluster, MemoryStore
from tests.controller.helpers import leader_of, make_plane, run, watch


def test_a_leader_is_routed_only_after_the_partition_is_recorded_as_served() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        plane = make_plane(cluster, store, num_partitions=1)
        await plane.start()
        routed = plane.routing()[1][0]
        assert routed is not None and routed.state == "ACTIVE"
        assert store.data is not None and store.data["known_end"]["0"] >= 0, "routed before recorded"
        # The reproduction: commits, then the log directory moved away and the
        # leader killed before any probe of the controller's watch.
        routed.commit(5)
        del cluster.disk(routed.node)[0]
        cluster.crash(routed)
        await watch(plane)
        successor = leader_of(cluster, 0)
        assert successor.known_end == 0 and successor.refused and successor.state != "ACTIVE"
        await watch(plane)
        assert plane.routing()[1][0] is None and plane.refused == {0: successor.failure}

    run(scenario())


def test_a_leader_that_serves_before_the_controller_checks_it_is_not_routed() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(auto_load=False), MemoryStore()
        plane = make_plane(cluster, store, num_partitions=1, actor_start_timeout_s=0.0)
        await plane.start()
        first = leader_of(cluster, 0)
        assert first.state == "LOADING" and plane.routing()[1][0] is None
        cluster.finish_load(first)
        assert plane.routing()[1][0] is None, "ACTIVE, but not recorded as served yet"
        # It dies unrecorded: it answered no one, so its successor may start empty.
        cluster.crash(first)
        await watch(plane)
        second = leader_of(cluster, 0)
        assert second.known_end == NEVER_LOADED and plane.routing()[1][0] is None
        cluster.finish_load(second)
        await watch(plane)
        assert plane.routing()[1][0] is second
        assert store.data is not None and store.data["known_end"]["0"] == 0

    run(scenario())


def test_a_new_leader_is_routed_as_soon_as_it_serves_without_waiting_for_the_watch() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(auto_load=False), MemoryStore()
        plane = make_plane(cluster, store, num_partitions=1)
        await plane.start()
        leader = leader_of(cluster, 0)
        cluster.finish_load(leader)
        for _ in range(100):
            if plane.routing()[1][0] is not None:
                break
            await asyncio.sleep(0.01)
        assert plane.routing()[1][0] is leader
        assert store.data is not None and store.data["known_end"]["0"] == 0

    run(scenario())


def test_a_restarted_controller_routes_an_adopted_leader_once_its_metadata_says_served() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(auto_load=False), MemoryStore()
        plane = make_plane(cluster, store, num_partitions=1, actor_start_timeout_s=0.0)
        await plane.start()
        leader = leader_of(cluster, 0)
        cluster.finish_load(leader)
        # The controller dies before it checked the leader; its successor adopts it.
        restarted = make_plane(cluster, store, num_partitions=1)
        await restarted.start()
        assert restarted.routing()[1][0] is leader
        assert store.data is not None and store.data["known_end"]["0"] == 0

    run(scenario())
