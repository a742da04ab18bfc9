"""Three replicas of one offsets partition on one asyncio loop, without Ray.

Each replica is an `OffsetPartition` with its own log directory (its node
id names it). Replicas reach each other through `FakeHandle`s:
`handle.method.remote(*args)` returns an awaitable that calls the instance's
method, as a Ray actor handle does; a stopped handle's calls hang (a stalled
node) until it resumes, so the caller's timeout is what ends them. The
controller's side is `FakeController` (ISR changes validated by
`coordinator.replication.validate_isr_change`) and `Cluster.elect`.
"""

from __future__ import annotations

import asyncio
import glob
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from actors.core.settings import ServiceSettings
from actors.partition.actor import OffsetPartition
from coordinator import CoordinatorConfig, Errors
from coordinator.replication import IsrChange, PartitionState, validate_isr_change
from log import replica_dir

from tests.actors.support import WAIT_S, until

NAMES = ("a", "b", "c")


class FakeHandle:
    """A Ray actor handle stand-in for `target` (module docstring)."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.calls = 0
        self._running = asyncio.Event()
        self._running.set()

    def stop(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def __getattr__(self, name: str) -> Any:
        return _Method(self, name)

    async def call(self, name: str, args: tuple[Any, ...]) -> Any:
        self.calls += 1
        await self._running.wait()
        return await getattr(self.target, name)(*args)


class _Method:
    def __init__(self, handle: FakeHandle, name: str) -> None:
        self.handle, self.name = handle, name

    def remote(self, *args: Any) -> Any:
        return self.handle.call(self.name, args)


class FakeController:
    """Commits or rejects ISR changes as the controller would; records them."""

    def __init__(self, state: PartitionState) -> None:
        self.state = state
        self.alive = set(state.replicas)
        self.changes: list[tuple[IsrChange, Errors]] = []

    async def alter_isr(self, partition: int, change: IsrChange) -> tuple[Errors, tuple[str, ...], int, int]:
        assert partition == 0
        result = validate_isr_change(
            self.state, change.leader, change.leader_epoch, change.partition_epoch, change.isr, self.alive
        )
        self.changes.append((change, result.error))
        if result.error is Errors.NONE:
            self.state = result.state
        state = result.state
        return result.error, state.isr, state.leader_epoch, state.partition_epoch


def settings_for(tmp_path: Path, **overrides: Any) -> ServiceSettings:
    values: dict[str, Any] = {
        "data_dir": str(tmp_path),
        "num_partitions": 1,
        "coordinator": CoordinatorConfig(group_initial_rebalance_delay_ms=0),
        "maintenance_interval_s": 3600,
        "replication_factor": 3,
        "min_insync_replicas": 2,
        "replica_lag_time_max_ms": 300,
        "commit_timeout_ms": 60_000,
        # Pushes go through the FakeHandles (their stalls are these tests' faults);
        # the link itself is tested in test_replica_link.py and on Ray.
        "replication_link": False,
        **overrides,
    }
    return ServiceSettings(**values)


class Cluster:
    def __init__(self, tmp_path: Path, **overrides: Any) -> None:
        self.settings = settings_for(tmp_path, **overrides)
        self.replicas = {name: OffsetPartition(0, 0, self.settings, node_id=name) for name in NAMES}
        self.handles = {name: FakeHandle(replica) for name, replica in self.replicas.items()}
        self.controller = FakeController(PartitionState(NAMES, NAMES, None, 0, 0))
        self.controller_handle = FakeHandle(self.controller)

    async def elect(self, leader: str, isr: tuple[str, ...], followers: tuple[str, ...]) -> dict[str, Any]:
        """The controller's election: a new leader epoch, `followers` told first."""
        state = self.controller.state
        self.controller.state = replace(
            state, leader=leader, isr=isr, leader_epoch=state.leader_epoch + 1,
            partition_epoch=state.partition_epoch + 1,
        )
        state = self.controller.state
        for name in followers:
            await self.replicas[name].become_follower(state.leader_epoch, leader, False, NAMES)
        others = {name: handle for name, handle in self.handles.items() if name != leader}
        return await self.replicas[leader].become_leader(
            state.leader_epoch, state.partition_epoch, NAMES, isr, others, self.controller_handle
        )

    async def lead_then_follow(
        self, leader: str, isr: tuple[str, ...], followers: tuple[str, ...]
    ) -> OffsetPartition:
        """An election in the controller's order (`ReplicatedPlane._send_roles`): the new
        leader takes up its epoch first, its followers hear of it after."""
        state = self.controller.state
        self.controller.state = state = replace(
            state, leader=leader, isr=isr, leader_epoch=state.leader_epoch + 1,
            partition_epoch=state.partition_epoch + 1,
        )
        others = {name: handle for name, handle in self.handles.items() if name != leader}
        replica = self.replicas[leader]
        await replica.become_leader(
            state.leader_epoch, state.partition_epoch, NAMES, isr, others, self.controller_handle
        )
        assert await replica.wait_active(WAIT_S) == "ACTIVE"
        for name in followers:
            await self.replicas[name].become_follower(state.leader_epoch, leader, False, NAMES)
        return replica

    async def start(self) -> OffsetPartition:
        """`a` leads epoch 1 with `b` and `c` following, all in the ISR."""
        await self.elect("a", NAMES, ("b", "c"))
        leader = self.replicas["a"]
        assert await leader.wait_active(WAIT_S) == "ACTIVE"
        return leader

    def directory(self, name: str) -> str:
        return replica_dir(self.settings.data_dir, name, 0)

    def log_bytes(self, name: str) -> bytes:
        paths = sorted(glob.glob(os.path.join(self.directory(name), "*.log")))
        return b"".join(Path(path).read_bytes() for path in paths)

    def leader_isr(self, name: str) -> tuple[str, ...] | None:
        leader = self.replicas[name].leader
        return None if leader is None else leader.state.isr

    async def until_isr(self, name: str, isr: tuple[str, ...]) -> None:
        await until(lambda: self.leader_isr(name) == isr and self.controller.state.isr == isr, f"ISR {isr}")

    async def close(self) -> None:
        for handle in self.handles.values():
            handle.resume()
        for replica in self.replicas.values():
            await replica.unload(replica.epoch)
