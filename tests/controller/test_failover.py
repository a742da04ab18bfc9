"""Failover decisions on the fake cluster: once per fault, concurrent, no
waiting on the dead, successors only after predecessors are gone."""

from __future__ import annotations

import asyncio

import pytest

from tests.controller.fake import FakeCluster, MemoryStore
from tests.controller.helpers import leader_of, make_plane, run, watch


def test_dead_leader_is_replaced_once_when_a_client_report_races_the_probe() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        plane = make_plane(cluster, store)
        await plane.start()
        old = leader_of(cluster, 1)
        cluster.crash(old)
        # Two clients' requests and the watch round see the same dead epoch at once.
        first, _, second = await asyncio.gather(
            plane.routing_after(1, old.epoch, 5.0), plane.watch_once(), plane.routing_after(1, old.epoch, 5.0)
        )
        new = leader_of(cluster, 1)
        # The clients' answer is the new leader's routing, without a poll of their own.
        assert first[1][1] is new and first[2][1] == new.epoch and second == first
        await plane.settle()
        await watch(plane, 2)
        assert leader_of(cluster, 1) is new
        assert new.epoch == old.epoch + 1 and new.state == "ACTIVE"
        assert [a.name for a in cluster.created if a.partition == 1] == [old.name, new.name]
        assert sum(plane.metrics.failovers.values()) == 1
        assert plane.routing()[1][1] is new and plane.routing()[2][1] == new.epoch

    run(scenario())


def test_a_report_for_an_older_epoch_changes_nothing() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        leader = leader_of(cluster, 0)
        routing = await plane.routing_after(0, leader.epoch - 1, 5.0)
        assert routing[1][0] is leader, "answered at once with the current leader"
        await plane.settle()
        assert leader_of(cluster, 0) is leader and not plane.metrics.failovers

    run(scenario())


def test_every_partition_of_a_lost_node_is_replaced_concurrently() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore(), num_partitions=9)
        await plane.start()
        lost = [p for p in range(9) if leader_of(cluster, p).node == "n1"]
        assert len(lost) == 3
        cluster.max_loads_in_flight = 0
        cluster.remove_node("n1")
        await watch(plane)
        assert cluster.max_loads_in_flight == len(lost), "the replacements' loads overlapped"
        for p in lost:
            assert leader_of(cluster, p).node != "n1" and leader_of(cluster, p).state == "ACTIVE"
        assert plane.metrics.failovers == {"dead": 3}

    run(scenario())


def test_no_unload_is_asked_of_a_leader_ray_reports_dead_or_that_did_not_answer() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        dead, hung, reported = leader_of(cluster, 0), leader_of(cluster, 1), leader_of(cluster, 2)
        cluster.crash(dead)
        hung.hangs = True
        await watch(plane)
        # Reassigned before any probe noticed: Ray already reports it dead.
        reported.dead = True
        await plane.reassign(2)
        for old in (dead, hung, reported):
            assert not cluster.called(old.name, "unload"), old.name
            assert old.killed or old.dead
        assert {leader_of(cluster, p).epoch for p in range(3)} == {2}
        assert plane.metrics.failovers == {"dead": 1, "unreachable": 1, "reassign": 1}

    run(scenario())


def test_a_live_leader_is_unloaded_then_killed_before_its_successor_starts() -> None:
    async def scenario() -> None:
        cluster = FakeCluster(kill_delay_polls=3)
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        old = leader_of(cluster, 0)
        epoch = await plane.reassign(0)
        new = leader_of(cluster, 0)
        assert epoch == new.epoch == old.epoch + 1
        assert cluster.called(old.name, "unload")
        events = cluster.events
        # The old leader may hold the directory lock: its death is reported before the new one exists.
        assert events.index(("dead", old.name)) < events.index(("create", new.name))

    run(scenario())


def test_reassign_to_a_node_puts_the_leader_there_and_refuses_an_unknown_node() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        epoch = await plane.reassign(1, "n3")
        assert leader_of(cluster, 1).node == "n3" and leader_of(cluster, 1).epoch == epoch
        with pytest.raises(ValueError, match="no live Ray node"):
            await plane.reassign(1, "n9")
        with pytest.raises(ValueError, match="partition must be"):
            await plane.reassign(7)
        assert leader_of(cluster, 1).epoch == epoch

    run(scenario())


def test_a_standby_takes_over_a_failed_partition() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore(), standby_actors=1)
        await plane.start()
        await plane.refill_standbys_once()
        [standby] = plane.state.standbys
        old = leader_of(cluster, 2)
        cluster.crash(old)
        await watch(plane)
        new = leader_of(cluster, 2)
        assert new.name == standby and new.epoch == old.epoch + 1 and new.state == "ACTIVE"
        assert plane.state.standbys == []

    run(scenario())


def test_a_failed_start_is_killed_and_retried_under_a_new_name_and_epoch() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        old = leader_of(cluster, 0)
        cluster.crash(old)
        original_create = cluster.create

        def create_hung(*args: object) -> object:
            actor = original_create(*args)  # type: ignore[arg-type]
            actor.hangs = True
            cluster.create = original_create  # type: ignore[method-assign]
            return actor

        cluster.create = create_hung  # type: ignore[method-assign]
        await watch(plane)
        assert plane.state.partitions[0].intent is not None, "the move stays saved until it succeeds"
        await watch(plane)
        first, second = [a for a in cluster.created if a.partition == 0][1:]
        assert first.killed and second.state == "ACTIVE"
        assert second.epoch == old.epoch + 2 and leader_of(cluster, 0) is second
        assert plane.state.partitions[0].intent is None

    run(scenario())


def test_a_check_that_saw_the_old_leader_fail_does_not_move_a_partition_reassigned_meanwhile() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        old = leader_of(cluster, 1)
        cluster.crash(old)
        await plane.watch_once()
        await asyncio.sleep(0)  # the checks are probing: partition 1's will find it dead
        epoch = await plane.reassign(1)
        await plane.settle()
        assert epoch == old.epoch + 1 and leader_of(cluster, 1).epoch == epoch
        assert plane.metrics.failovers == {"reassign": 1}

    run(scenario())


def test_a_reassign_retried_with_the_epoch_it_saw_moves_the_partition_once() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        seen = leader_of(cluster, 1).epoch
        epoch = await plane.reassign(1, "n2", seen)
        moved = leader_of(cluster, 1)
        assert epoch == moved.epoch == seen + 1 and moved.node == "n2"
        created = len(cluster.created)
        # Ray's retry of the same call: the move already happened.
        assert await plane.reassign(1, "n2", seen) == epoch
        assert leader_of(cluster, 1) is moved and not moved.killed and len(cluster.created) == created
        assert plane.metrics.failovers == {"reassign": 1}
        # Naming the current epoch (or none) moves it again.
        assert await plane.reassign(1, None, epoch) == epoch + 1
        assert await plane.reassign(1) == epoch + 2

    run(scenario())


def test_a_reassign_naming_an_epoch_the_partition_never_had_is_refused() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        leader = leader_of(cluster, 0)
        with pytest.raises(ValueError, match="at epoch 1, not 2"):
            await plane.reassign(0, None, leader.epoch + 1)
        assert leader_of(cluster, 0) is leader and not plane.metrics.failovers

    run(scenario())


def test_routing_after_refuses_malformed_arguments_and_keeps_serving() -> None:
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        leader = leader_of(cluster, 0)
        for bad in [("0", leader.epoch, 1.0), (-1, leader.epoch, 1.0), (10**6, leader.epoch, 1.0),
                    (0, None, 1.0), (0, leader.epoch, -1),
                    (0, leader.epoch, 3600.0), (0, leader.epoch, "1")]:
            with pytest.raises(ValueError):
                await plane.routing_after(*bad)  # type: ignore[arg-type]
        routing = await plane.routing_after(0, leader.epoch, 5.0)
        assert routing[1][0] is leader, "a sound leader: answered once the check found it so"
        assert not plane.metrics.failovers

    run(scenario())


def test_a_partition_a_shrink_retired_is_answered_the_routing_at_once() -> None:
    """A client whose call met a partition past the count (retired by a shrink that ended
    after the client last refreshed) gets the routing that sends it to the group's new
    owner, at once: not an error its caller would see, nor a wait for a check."""
    async def scenario() -> None:
        cluster = FakeCluster()
        plane = make_plane(cluster, MemoryStore(), num_partitions=2)
        await plane.start()
        routing = await plane.routing_after(3, 1, 30.0)
        assert routing == plane.routing() and routing[0] == 2
        assert not plane.metrics.failovers

    run(scenario())
