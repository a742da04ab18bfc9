"""No replica directory ever holds a leader epoch that no state file records.

A full restart rebuilds the controller's metadata from the leaders' state files
(`actors/controller/forgotten_logs.py`) and refuses a partition one of whose
directories saw a newer leader epoch than its newest state file. So on every
path by which an epoch reaches a disk (a fresh leader that creates its
directory, a promoted follower, a deposed leader leading again, a serving
leader given a new epoch, followers told after the leader, as the controller
tells them), the new leader's state file must be durable first. Each write of
a leader epoch is checked against the state files on disk at that moment.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import log.epoch
import log.partition
from log.replica_state import read_replica_state

from tests.actors.replication_support import NAMES, Cluster
from tests.actors.support import WAIT_S, run, until


@pytest.fixture
def epoch_writes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[tuple[str, int, int]]]:
    """Every leader-epoch write as (directory, epoch, newest state file's epoch then)."""
    writes: list[tuple[str, int, int]] = []
    original = log.epoch.write_leader_epoch

    def checked(directory: str, leader_epoch: int, fsync: bool = True) -> None:
        partition_dirs = Path(directory).parent.parent.glob("*/offsets-0")
        states = [read_replica_state(str(d)) for d in partition_dirs]
        newest = max((s.leader_epoch for s in states if s is not None), default=-1)
        writes.append((directory, leader_epoch, newest))
        original(directory, leader_epoch, fsync)

    monkeypatch.setattr(log.epoch, "write_leader_epoch", checked)
    monkeypatch.setattr(log.partition, "write_leader_epoch", checked)
    yield writes


async def lead_then_follow(cluster: Cluster, leader: str, followers: tuple[str, ...]) -> None:
    """The controller's order: the new leader first, then its followers."""
    state = cluster.controller.state
    epoch, partition_epoch = state.leader_epoch + 1, state.partition_epoch + 1
    cluster.controller.state = state.__class__(NAMES, NAMES, leader, epoch, partition_epoch)
    others = {name: handle for name, handle in cluster.handles.items() if name != leader}
    await cluster.replicas[leader].become_leader(
        epoch, partition_epoch, NAMES, NAMES, others, cluster.controller_handle
    )
    assert await cluster.replicas[leader].wait_active(WAIT_S) == "ACTIVE"
    for name in followers:
        await cluster.replicas[name].become_follower(epoch, leader)


def test_every_leader_epoch_on_disk_follows_a_state_file_of_that_epoch(
    tmp_path: Path, epoch_writes: list[tuple[str, int, int]]
) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await lead_then_follow(cluster, "a", ("b", "c"))  # a fresh leader creates its directory
            cluster.handles["a"].stop()
            await lead_then_follow(cluster, "b", ("c",))  # a promoted follower
            await until(lambda: cluster.replicas["a"].leader is None, "a deposed by its followers' answers")
            cluster.handles["a"].resume()
            await lead_then_follow(cluster, "a", ("b", "c"))  # a deposed leader leads again
            await lead_then_follow(cluster, "a", ("b", "c"))  # a serving leader, a new epoch
        finally:
            await cluster.close()

    run(scenario())
    assert {epoch for _, epoch, _ in epoch_writes} == {1, 2, 3, 4}
    assert {Path(d).parent.name for d, _, _ in epoch_writes} == set(NAMES)
    late = [(d, epoch, newest) for d, epoch, newest in epoch_writes if newest < epoch]
    assert not late, f"a leader epoch reached a disk before any state file of it: {late}"
