"""Liveness is serving or making progress, never just answering: adopted
INITIAL leaders are activated, stalled loads replaced, refusing leaders kept
and shown, and the durable end each leader reports becomes the next one's
known end."""

from __future__ import annotations

from tests.controller.fake import FakeCluster, ManualClock, MemoryStore
from tests.controller.helpers import leader_of, make_plane, run, watch


def test_an_adopted_leader_still_initial_is_activated() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        await make_plane(cluster, store).start()
        # A controller died between starting a leader and activating it.
        cluster.crash(leader_of(cluster, 0))
        stuck = cluster.create("raygroups-offsets-stuck", 0, 7, "n2", False)
        data = store.data
        assert data is not None
        data["epochs"]["0"], data["actors"]["0"] = 7, stuck.name
        created = len(cluster.created)
        plane = make_plane(cluster, store)
        await plane.start()
        assert stuck.state == "ACTIVE" and len(cluster.created) == created
        assert plane.routing()[1][0] is stuck and plane.routing()[2][0] == 7
        assert not plane.metrics.failovers

    run(scenario())


def test_a_loading_leader_is_alive_while_it_progresses_and_replaced_once_stalled() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        cluster = FakeCluster(auto_load=False)
        plane = make_plane(cluster, MemoryStore(), clock, num_partitions=1, load_stall_timeout_s=10.0)
        await plane.start()
        loading = leader_of(cluster, 0)
        assert loading.state == "LOADING"
        for _ in range(25):  # 25 s of a slow load that keeps replaying records
            loading.progress += 100
            await watch(plane, 1, clock)
        assert leader_of(cluster, 0) is loading and not plane.metrics.failovers
        await watch(plane, 12, clock)  # no progress for longer than the stall timeout
        replacement = leader_of(cluster, 0)
        assert replacement is not loading and replacement.epoch == loading.epoch + 1
        assert loading.killed and plane.metrics.failovers == {"stalled": 1}

    run(scenario())


def test_a_leader_that_reloads_by_itself_without_progress_is_replaced_after_the_stall_timeout() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore(), clock, load_stall_timeout_s=10.0)
        await plane.start()
        leader = leader_of(cluster, 1)
        leader.state, leader.failure = "FAILED", "LogLockedError: offsets-1 is locked"
        await watch(plane, 5, clock)
        assert leader_of(cluster, 1) is leader
        await watch(plane, 8, clock)
        assert leader.killed and leader_of(cluster, 1).state == "ACTIVE"

    run(scenario())


def test_the_durable_end_a_leader_reports_is_persisted_and_passed_to_its_successor() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        plane = make_plane(cluster, store)
        await plane.start()
        first = leader_of(cluster, 2)
        assert first.known_end == -1, "a partition never loaded may start from an empty log"
        first.commit(40)
        await watch(plane)
        assert store.data is not None and store.data["known_end"]["2"] == 40
        cluster.crash(first)
        await watch(plane)
        second = leader_of(cluster, 2)
        assert second.known_end == 40 and second.state == "ACTIVE" and second.durable_end == 40

    run(scenario())


def test_a_refusing_leader_is_shown_counted_and_not_replaced_until_reassigned() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        # Every node has its own data directory, though the operator declared it shared.
        cluster = FakeCluster(shared_disk=False)
        plane = make_plane(cluster, MemoryStore(), clock, load_stall_timeout_s=5.0, shared_data_dir=True)
        await plane.start()
        first = leader_of(cluster, 0)
        first.commit(12)
        await watch(plane, 1, clock)
        cluster.remove_node(first.node)
        await watch(plane, 1, clock)
        refusing = leader_of(cluster, 0)
        assert refusing.node != first.node and refusing.refused
        created = len(cluster.created)
        await watch(plane, 20, clock)  # well past the stall timeout
        assert len(cluster.created) == created and leader_of(cluster, 0) is refusing
        assert plane.metrics.refused == 1
        [row] = [r for r in await plane.status() if r["partition"] == 0]
        assert row["refused"] is True and f"node {refusing.node}" in row["failure"]
        assert "offsets-0" in row["failure"]
        # The node comes back with its disk; the operator moves the partition there.
        cluster.nodes.append(first.node)
        await plane.reassign(0, first.node)
        await watch(plane, 1, clock)
        served = leader_of(cluster, 0)
        assert served.state == "ACTIVE" and served.durable_end == 12
        assert plane.metrics.refused == 0 and not (await plane.status())[0]["refused"]

    run(scenario())
