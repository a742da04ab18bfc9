"""Replication factor 1 on node-local disks: a partition's leader restarts only
on the node holding its log, the partition offline while that node is gone
(Kafka's behaviour for replication factor 1), unless the operator declared
the data directory shared. One node: nothing changes."""

from __future__ import annotations

import argparse

import pytest

from actors.cli.admin import cmd_status

from tests.controller.fake import FakeCluster, ManualClock, MemoryStore
from tests.controller.helpers import leader_of, make_plane, run, watch


def test_the_node_a_partition_served_from_is_recorded_and_a_crashed_leader_restarts_there() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(shared_disk=False), MemoryStore()
        plane = make_plane(cluster, store)
        await plane.start()
        first = leader_of(cluster, 1)
        first.commit(9)
        assert store.data is not None and store.data["log_nodes"]["1"] == first.node
        cluster.crash(first)  # its process, not its node
        await watch(plane)
        second = leader_of(cluster, 1)
        assert second.node == first.node and second.state == "ACTIVE" and second.durable_end == 9
        assert cluster.calls_with("create", second.name)[-1] == (second.node, True), "pinned"

    run(scenario())


def test_a_partition_whose_node_is_gone_waits_offline_and_serves_again_when_it_is_back() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        cluster, store = FakeCluster(shared_disk=False), MemoryStore()
        plane = make_plane(cluster, store, clock)
        await plane.start()
        lost = leader_of(cluster, 0)
        lost.commit(7)
        others = {p: leader_of(cluster, p) for p in (1, 2)}
        created = len(cluster.created)
        cluster.remove_node(lost.node)
        await watch(plane, 10, clock)
        assert len(cluster.created) == created, "no leader started where its log is not"
        assert plane.routing()[1][0] is None and plane.stats()["offline"] == [0]
        assert plane.state.partitions[0].epoch == lost.epoch, "no epoch per round while waiting"
        [row] = [r for r in await plane.status() if r["partition"] == 0]
        assert (row["state"], row["offline"], row["awaited_node"]) == ("OFFLINE", True, lost.node)
        assert {p: leader_of(cluster, p) for p in (1, 2)} == others
        # A restarted controller waits for the same node.
        plane = make_plane(cluster, store, clock)
        await plane.start()
        assert not cluster.leaders_of(0) and plane.stats()["offline"] == [0]
        cluster.nodes.append(lost.node)  # back, with its disk
        await watch(plane, 1, clock)
        back = leader_of(cluster, 0)
        assert back.node == lost.node and back.state == "ACTIVE" and back.durable_end == 7
        assert plane.routing()[1][0] is back and plane.stats()["offline"] == []

    run(scenario())


def test_on_a_shared_data_directory_a_lost_node_s_partitions_move_to_live_nodes() -> None:
    async def scenario() -> None:
        cluster = FakeCluster(shared_disk=True)
        plane = make_plane(cluster, MemoryStore(), shared_data_dir=True)
        await plane.start()
        lost = leader_of(cluster, 0)
        lost.commit(7)
        cluster.remove_node(lost.node)
        await watch(plane)
        moved = leader_of(cluster, 0)
        assert moved.node != lost.node and moved.state == "ACTIVE" and moved.durable_end == 7

    run(scenario())


def test_the_operator_moves_a_waiting_partition_only_to_a_named_node() -> None:
    async def scenario() -> None:
        cluster = FakeCluster(shared_disk=False)
        plane = make_plane(cluster, MemoryStore())
        await plane.start()
        lost = leader_of(cluster, 2)
        lost.commit(4)
        cluster.remove_node(lost.node)
        await watch(plane)
        with pytest.raises(ValueError, match=f"log is on node '{lost.node}', which is not live"):
            await plane.reassign(2)
        # The operator copied the log to another node's disk.
        target = next(n for n in cluster.nodes if n != lost.node)
        cluster.disk(target)[2] = 4
        await plane.reassign(2, target)
        moved = leader_of(cluster, 2)
        assert moved.node == target and moved.state == "ACTIVE" and moved.durable_end == 4
        assert plane.stats()["offline"] == [] and plane.state.partitions[2].log_node == target

    run(scenario())


def test_a_standby_takes_over_only_on_the_node_holding_the_log() -> None:
    async def scenario() -> None:
        cluster = FakeCluster(shared_disk=False)
        plane = make_plane(cluster, MemoryStore(), standby_actors=1)
        await plane.start()
        await plane.refill_standbys_once()
        [standby] = plane.state.standbys
        assert cluster.live[standby].node == "n1"
        elsewhere = next(p for p in range(3) if leader_of(cluster, p).node != "n1")
        old = leader_of(cluster, elsewhere)
        cluster.crash(old)
        await watch(plane)
        assert leader_of(cluster, elsewhere).name != standby and plane.state.standbys == [standby]
        here = next(p for p in range(3) if leader_of(cluster, p).node == "n1")
        cluster.crash(leader_of(cluster, here))
        await watch(plane)
        assert leader_of(cluster, here).name == standby and leader_of(cluster, here).state == "ACTIVE"

    run(scenario())


def test_one_node_serves_as_before() -> None:
    async def scenario() -> None:
        cluster = FakeCluster(nodes=["solo"], shared_disk=False)
        plane = make_plane(cluster, MemoryStore(), standby_actors=1)
        await plane.start()
        await plane.refill_standbys_once()
        old = leader_of(cluster, 0)
        old.commit(3)
        cluster.crash(old)
        await watch(plane)
        new = leader_of(cluster, 0)
        assert new.name in {a.name for a in cluster.created if a.partition == 0}
        assert new.state == "ACTIVE" and new.durable_end == 3 and plane.routing()[1][0] is new

    run(scenario())


def test_status_says_the_partition_waits_for_its_node(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"partition": 0, "epoch": 2, "state": "OFFLINE", "offline": True, "awaited_node": "broker-2",
         "node_id": "broker-2", "refused": False, "failure": "waiting for node broker-2"},
    ]

    class Client:
        def status(self) -> list[dict[str, object]]:
            return rows

    assert cmd_status(Client(), argparse.Namespace(json=False)) == 1  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert "OFFLINE" in out and "broker-2" in out
    assert "partitions [0] are offline until their node" in err and "elect-leader" not in err
