"""The state file a replicated leader keeps beside its log (`partition-state.json`), in the
actor layer without Ray: written before the leader serves, kept a subset of the ISR it
acknowledges with at every committed change, and a fresh replica told to lead a partition
whose committed end is known refuses a missing log instead of serving it empty (nor follows
from one, as an ISR member)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from coordinator import Errors
from coordinator.routing import Routing
from log.epoch import read_leader_epoch
from log.errors import LogError
from log.replica_state import ReplicaState, read_epoch_replicas, read_replica_state

from tests.actors.replication_support import NAMES, Cluster
from tests.actors.support import Answers, commit, run, until
from tests.core.test_handoff import groups_on


def file_state(cluster: Cluster, name: str) -> ReplicaState | None:
    return read_replica_state(cluster.directory(name))


def watch_isr_commits(cluster: Cluster, leader: Any) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Record, at every ISR the leader applies, (the ISR on disk then, the applied ISR)."""
    state = leader.leader.state
    applied: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    original = state.on_isr_committed

    def on_isr_committed(isr: Any, leader_epoch: int, partition_epoch: int, now_ms: int) -> bool:
        changed: bool = original(isr, leader_epoch, partition_epoch, now_ms)
        on_disk = file_state(cluster, "a")
        assert on_disk is not None
        if changed:
            applied.append((on_disk.isr, tuple(state.isr)))
        return changed

    state.on_isr_committed = on_isr_committed
    return applied


def test_the_leader_records_its_state_before_serving_and_each_committed_isr(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        leader = await cluster.start()
        assert file_state(cluster, "a") == ReplicaState(NAMES, NAMES, "a", 1, 1, 1, 3)
        assert file_state(cluster, "b") is None and file_state(cluster, "c") is None  # followers write none
        applied = watch_isr_commits(cluster, leader)
        answers = Answers()
        cluster.handles["c"].stop()
        await cluster.until_isr("a", ("a", "b"))
        assert (await answers.wait(answers.send(leader, commit("g", 1)))).errors()[("t", 0)] is Errors.NONE
        assert file_state(cluster, "a") == ReplicaState(
            NAMES, ("a", "b"), "a", 1, cluster.controller.state.partition_epoch, 1, 3
        )
        cluster.handles["c"].resume()
        await cluster.until_isr("a", NAMES)
        await until(lambda: file_state(cluster, "a") == ReplicaState(
            NAMES, NAMES, "a", 1, cluster.controller.state.partition_epoch, 1, 3
        ), "the state file to show c back in the ISR")
        # The shrink was on disk before the leader acknowledged without c; the growth after.
        assert [isr for isr, _ in applied] == [("a", "b"), ("a", "b")]
        assert all(set(on_disk) <= set(isr) for on_disk, isr in applied)
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_a_promoted_follower_records_its_leadership_before_it_serves(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        await cluster.start()
        cluster.handles["a"].stop()
        probe = await cluster.elect("b", ("b", "c"), ("c",))
        assert probe["role"] == "leader" and probe["state"] == "ACTIVE"
        state = cluster.controller.state
        expected = ReplicaState(NAMES, ("b", "c"), "b", 2, state.partition_epoch, 1, 3)
        assert file_state(cluster, "b") == expected
        await cluster.close()

    run(scenario())


def test_a_fresh_replica_refuses_to_lead_from_a_missing_log_when_the_committed_end_is_known(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            others = {name: handle for name, handle in cluster.handles.items() if name != "a"}
            replica = cluster.replicas["a"]
            await replica.become_leader(1, 1, NAMES, NAMES, others, cluster.controller_handle, known_end=0)
            await replica.wait_active(5.0)
            probe = await replica.probe()
            assert probe["state"] == "FAILED" and probe["refused"], probe
            assert "missing" in probe["failure"] and file_state(cluster, "a") is None
            # Nor does an ISR member of such a partition follow from a new, empty log.
            with pytest.raises(LogError):
                await cluster.replicas["c"].become_follower(1, "b", must_exist=True)
            assert not os.path.exists(cluster.directory("c"))
            # A partition never served before (known end -1) starts with an empty log.
            fresh = cluster.replicas["b"]
            others = {name: handle for name, handle in cluster.handles.items() if name != "b"}
            await fresh.become_leader(1, 1, NAMES, NAMES, others, cluster.controller_handle)
            assert await fresh.wait_active(5.0) == "ACTIVE"
        finally:
            await cluster.close()

    run(scenario())


def test_each_follower_records_the_replica_set_of_the_epoch_it_follows(tmp_path: Path) -> None:
    """What a full restart's recovery reads when a leader's disk is gone (epoch-replicas.json)."""
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        await cluster.start()
        assert read_epoch_replicas(cluster.directory("b")) == (1, NAMES)
        assert read_epoch_replicas(cluster.directory("a")) is None, "a leader's state file holds its own"
        await cluster.elect("b", ("b", "c"), ("c", "a"))
        assert read_epoch_replicas(cluster.directory("c")) == (2, NAMES)
        assert read_epoch_replicas(cluster.directory("a")) == (2, NAMES)
        await cluster.close()

    run(scenario())


def test_a_push_of_an_epoch_the_controller_has_not_given_yet_waits_for_its_role(tmp_path: Path) -> None:
    """A new leader pushes before the controller's `become_follower` reaches its followers.
    Adopted from the push, the epoch would enter a follower's directory before the epoch's
    replica set is recorded beside it; a full restart that lost the leader's disk right
    then finds no record of who the replicas were and holds the partition for an operator.
    So the push is refused UNKNOWN_LEADER_EPOCH until the role comes, with its record."""
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            b = cluster.replicas["b"]
            pushed = await b.replicate(2, "c", None, b"", 0)
            assert pushed.error is Errors.UNKNOWN_LEADER_EPOCH
            assert read_leader_epoch(cluster.directory("b")) == 1 and b.follower.leader_epoch == 1
            await b.become_follower(2, "c", True, NAMES)
            assert read_leader_epoch(cluster.directory("b")) == 2
            assert read_epoch_replicas(cluster.directory("b")) == (2, NAMES)
            assert (await b.replicate(2, "c", None, b"", 0)).error is Errors.NONE
        finally:
            await cluster.close()

    run(scenario())


def test_a_frozen_export_is_never_recorded_as_its_sources_switch(tmp_path: Path) -> None:
    """A full restart resumes a repartition from the routing the state files record: a source
    whose groups are frozen by an export, but whose switch is not committed, must not record
    itself switched (its moving groups would be routed, after the restart, to a target that
    may never have admitted them: acknowledged commits lost). A push or an ISR change while
    frozen writes the state file; only the switch record marks the source switched."""
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            leader = await cluster.start()
            move = groups_on(1, 2, 1)[0]
            answers = Answers()
            committed = await answers.wait(answers.send(leader, commit(move, 5)))
            assert committed.errors()[("t", 0)] is Errors.NONE
            planned = Routing(2, previous=1, version=1)
            switched = planned.with_switched(0)
            assert await leader.set_routing(planned.encode()) == 1
            exported = await leader.handoff_export(switched.encode())
            assert exported["error"] == "NONE" and exported["groups"] == 1
            assert await leader.set_routing(planned.encode()) == 1  # a probe's push while frozen
            recorded = file_state(cluster, "a")
            assert recorded is not None and recorded.routing == planned.encode().decode("ascii")
            assert (await leader.probe())["routing"] == recorded.routing, "the controller sees no switch"
            assert (await leader.handoff_switch(switched.encode()))["error"] == "NONE"
            recorded = file_state(cluster, "a")
            assert recorded is not None and recorded.routing == switched.encode().decode("ascii")
            answers.all_once()
        finally:
            await cluster.close()

    run(scenario())


def test_a_routing_pushed_after_an_isr_change_is_recorded(tmp_path: Path) -> None:
    """A push's routing reaches the state file also once a committed ISR change moved the
    partition epoch past the leadership the leader was given (a full restart resumes a
    repartition from the routing the state files record)."""
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            leader = await cluster.start()
            cluster.handles["c"].stop()
            await cluster.until_isr("a", ("a", "b"))
            cluster.handles["c"].resume()
            await cluster.until_isr("a", NAMES)
            planned = Routing(2, previous=1, version=1)
            assert await leader.set_routing(planned.encode()) == 1
            recorded = file_state(cluster, "a")
            assert recorded is not None and recorded.routing == planned.encode().decode("ascii")
            epoch = cluster.controller.state.partition_epoch
            assert recorded.isr == NAMES and recorded.partition_epoch == epoch
        finally:
            await cluster.close()

    run(scenario())
