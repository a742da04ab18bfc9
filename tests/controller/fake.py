"""A fake cluster for the controller's unit tests: partition actors as plain
objects following the partition actor contract, nodes with their own disks,
and a record of every call, creation and kill."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

from actors.controller.cluster_view import ActorGone, CallFailed, NameTaken, Unreachable
from actors.controller.state import NEVER_LOADED


class ControllerCrash(BaseException):
    """The controller process dies here (not an error the controller handles)."""


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class MemoryStore:
    def __init__(self) -> None:
        self.data: dict[str, Any] | None = None

    def load(self) -> dict[str, Any] | None:
        return copy.deepcopy(self.data)

    def save(self, data: dict[str, Any]) -> None:
        self.data = copy.deepcopy(data)


@dataclass(eq=False)
class FakeActor:
    cluster: FakeCluster
    name: str
    partition: int
    epoch: int
    node: str
    state: str = "INITIAL"
    durable_end: int = 0
    progress: int = 0
    failure: str | None = None
    refused: bool = False
    known_end: int | None = None
    dead: bool = False
    # Calls time out (a hung process, or a node cut off but not yet reported dead).
    hangs: bool = False
    kill_polls_left: int = 0
    killed: bool = False
    # The replica role contract (actors/partition/roles.py), for the replicated plane.
    role: str = "none"
    partition_epoch: int = 0
    isr: tuple[str, ...] = ()
    followers: dict[str, Any] = field(default_factory=dict)
    leader_node: str | None = None
    # The probe's `disk` entry (actors/partition/recovery.py): a failed disk when `failed`.
    disk: dict[str, Any] = field(default_factory=lambda: {"failed": False})
    # The runtime_env and settings it was created with (`FakeCluster.configure_actors`).
    runtime_env: Any = None
    settings: Any = None

    def fail_disk(self, error: str = "append: [Errno 28] No space left on device") -> None:
        """The replica's disk failed: it steps aside as the real one does (no role, no log)."""
        self.disk = {"failed": True, "error": error, "since_ms": 0, "next_retry_ms": 100}
        self.role, self.state = "failed", "CLOSED"

    def heal_disk(self) -> None:
        """The disk works again: the replica reopened its log and waits for a role."""
        self.disk = {"failed": False}
        self.role = "deposed"

    async def activate(self, known_end: int = NEVER_LOADED) -> str:
        if self.state == "INITIAL" and self.partition >= 0:
            self.known_end = known_end
            self.state = "LOADING"
            await self.cluster.load(self)
        return self.state

    async def assume(self, partition: int, epoch: int, known_end: int = NEVER_LOADED) -> str:
        if self.partition >= 0:
            raise RuntimeError("already a leader")
        self.partition, self.epoch = partition, epoch
        return await self.activate(known_end)

    async def wait_active(self, timeout_s: float = 60.0) -> str:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.state in ("INITIAL", "LOADING") and loop.time() < deadline:
            await asyncio.sleep(0.001)
        return self.state

    async def unload(self, epoch: int) -> str:
        if epoch >= self.epoch:
            self.state = "CLOSED"
        return self.state

    async def probe(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "epoch": self.epoch,
            "state": self.state,
            "durable_end": self.durable_end,
            "progress": self.progress,
            "failure": self.failure,
            "refused": self.refused,
            "role": self.role,
            "leader_epoch": self.epoch,
            "partition_epoch": self.partition_epoch,
            "high_watermark": self.durable_end if self.role == "leader" else None,
            "disk": dict(self.disk),
        }

    async def become_leader(
        self,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[str],
        isr: list[str],
        followers: dict[str, Any],
        controller: Any = None,
        known_end: int = NEVER_LOADED,
    ) -> dict[str, Any]:
        if set(followers) != set(replicas) - {self.node} or self.node not in isr:
            raise RuntimeError(f"bad leadership {replicas} {isr} {sorted(followers)}")
        self.cluster.check_lock(self)
        if self.role == "none" and leader_epoch >= self.epoch and self.state != "FAILED":
            # Not a hot follower: it loads its log, refused when missing or behind known_end.
            self.epoch, self.known_end = leader_epoch, known_end
            self.cluster.finish_load(self)
            if self.refused:
                return await self.probe()
        if leader_epoch >= self.epoch:
            self.role, self.epoch, self.partition_epoch = "leader", leader_epoch, partition_epoch
            self.isr, self.followers, self.state = tuple(isr), dict(followers), "ACTIVE"
            self.leader_node = self.node
        return await self.probe()

    async def become_follower(
        self, leader_epoch: int, leader: str, must_exist: bool = False, replicas: Any = ()
    ) -> dict[str, Any]:
        if must_exist and self.role == "none" and self.partition not in self.cluster.disk(self.node):
            raise RuntimeError(f"offsets-{self.partition} on {self.node}: no log to follow with")
        self.cluster.check_lock(self)
        if leader_epoch >= self.epoch:
            self.role, self.epoch, self.state, self.leader_node = "follower", leader_epoch, "CLOSED", leader
        return await self.probe()

    async def isr_committed(self, leader_epoch: int, partition_epoch: int, isr: list[str]) -> bool:
        if self.role != "leader" or leader_epoch != self.epoch:
            return False
        self.partition_epoch, self.isr = partition_epoch, tuple(isr)
        return True

    async def set_follower(self, leader_epoch: int, replica: str, handle: Any) -> bool:
        if self.role != "leader" or leader_epoch != self.epoch:
            return False
        self.followers[replica] = handle
        return True

    async def info(self) -> dict[str, Any]:
        return {**await self.probe(), "groups": 0, "members": 0, "node_id": self.node}

    async def ping(self) -> int:
        return self.epoch

    def commit(self, records: int) -> None:
        """Records acknowledged (durable) by this leader."""
        self.durable_end += records
        self.cluster.disk(self.node)[self.partition] = self.durable_end


@dataclass
class FakeCluster:
    nodes: list[str] = field(default_factory=lambda: ["n1", "n2", "n3"])
    # One disk for all nodes (a shared data directory) or one per node.
    shared_disk: bool = True
    # False: loads stay LOADING until the test finishes them.
    auto_load: bool = True
    # Ray reports a killed actor dead after this many is_dead polls.
    kill_delay_polls: int = 0
    # (method, actor name or None for any) -> raise ControllerCrash before the call runs.
    crash_before: tuple[str, str | None] | None = None
    crash_after: str | None = None
    # Raise ControllerCrash at the n-th cluster operation (create, kill or call) from now,
    # and at every one after it until `crashed` is cleared (the controller is dead).
    crash_in: int | None = None
    crashed: bool = False
    # Two live actors of one partition on one node conflict as two writers of one log
    # directory do (LogLockedError): the newer one cannot take a role.
    locks: bool = False
    fail_next_pings: int = 0
    names_error: Exception | None = None
    live: dict[str, FakeActor] = field(default_factory=dict)
    created: list[FakeActor] = field(default_factory=list)
    calls: list[tuple[str, str, tuple[Any, ...]]] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    loads_in_flight: int = 0
    max_loads_in_flight: int = 0
    _disks: dict[str, dict[int, int]] = field(default_factory=dict)
    actor_settings: Any = None
    runtime_env: Any = None
    restarted: list[str] = field(default_factory=list)
    # Attached actors a rolling restart replaces (the gateways): name -> the runtime_env of
    # its current incarnation; `replaced` in order; `gateway_failures` [name] failures left;
    # `gone` names whose node left (replace answers False).
    attached: dict[str, Any] = field(default_factory=dict)
    replaced: list[str] = field(default_factory=list)
    gateway_failures: dict[str, int] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)

    # ---------------------------------------------------------- the Cluster interface

    def create(
        self, name: str, partition: int | None, epoch: int, node_id: str | None, required: bool
    ) -> Any:
        self._maybe_crash("create", name)
        if name in self.live:
            raise NameTaken(name)
        self.calls.append((name, "create", (node_id, required)))
        if required and node_id not in self.nodes:
            raise Unreachable(f"no live node {node_id!r}")
        node = node_id if node_id in self.nodes else self.nodes[0]
        actor = FakeActor(self, name, -1 if partition is None else partition, epoch, node,
                          runtime_env=self.runtime_env, settings=self.actor_settings)
        self.live[name] = actor
        self.created.append(actor)
        self.events.append(("create", name))
        return actor

    def configure_actors(self, settings: Any, runtime_env: Any) -> None:
        self.actor_settings, self.runtime_env = settings, runtime_env

    async def restart(self, handle: Any) -> None:
        self.restarted.append(getattr(handle, "name", str(handle)))

    def kill(self, handle: FakeActor) -> None:
        self._maybe_crash("kill", handle.name)
        handle.killed = True
        handle.kill_polls_left = self.kill_delay_polls
        self.live.pop(handle.name, None)
        self.events.append(("kill", handle.name))
        if self.kill_delay_polls == 0:
            self._die(handle)

    async def call(self, handle: FakeActor, method: str, *args: Any, timeout_s: float) -> Any:
        self.calls.append((handle.name, method, args))
        self._maybe_crash(method, handle.name)
        await asyncio.sleep(0)
        if (handle.dead or handle.killed) and not handle.hangs:
            raise ActorGone(f"{handle.name} is dead")
        if handle.hangs:  # dead too: Ray's error does not say so yet (is_dead does)
            raise Unreachable(f"{method}: no answer in {timeout_s} s")
        if method == "ping" and self.fail_next_pings:
            self.fail_next_pings -= 1
            raise Unreachable("ping: no answer")
        try:
            result = await getattr(handle, method)(*args)
        except RuntimeError as exc:
            raise CallFailed(str(exc)) from exc
        if self.crash_after == method:
            self.crash_after = None
            raise ControllerCrash(f"after {method}")
        return result

    async def is_dead(self, handle: FakeActor) -> bool:
        if handle.killed and not handle.dead:
            if handle.kill_polls_left <= 0:
                self._die(handle)
            handle.kill_polls_left -= 1
        return handle.dead

    async def find(self, name: str) -> Any:
        return self.live.get(name)

    async def actor_names(self) -> list[str]:
        if self.names_error is not None:
            error, self.names_error = self.names_error, None
            raise error
        return list(self.live)

    async def live_nodes(self) -> list[str]:
        return sorted(self.nodes)

    async def replaceable(self) -> list[str]:
        return sorted(self.attached)

    async def replace_attached(self, name: str, runtime_env: Any, timeout_s: float) -> bool:
        self.events.append(("replace", name))
        if name in self.gone:
            return False
        if self.gateway_failures.get(name, 0) > 0:
            self.gateway_failures[name] -= 1
            raise CallFailed(f"replacing {name}: port 9092 taken")
        self.attached[name] = runtime_env
        self.replaced.append(name)
        return True

    # ---------------------------------------------------------- test controls

    def disk(self, node: str) -> dict[int, int]:
        return self._disks.setdefault("shared" if self.shared_disk else node, {})

    async def load(self, actor: FakeActor) -> None:
        self.loads_in_flight += 1
        self.max_loads_in_flight = max(self.max_loads_in_flight, self.loads_in_flight)
        try:
            # A window in which concurrent loads overlap; serial ones never do.
            await asyncio.sleep(0.02)
        finally:
            self.loads_in_flight -= 1
        if self.auto_load:
            self.finish_load(actor)

    def finish_load(self, actor: FakeActor) -> None:
        """The partition side of the contract: refuse a log missing or behind known_end."""
        end = self.disk(actor.node).get(actor.partition)
        known = NEVER_LOADED if actor.known_end is None else actor.known_end
        if known >= 0 and (end is None or end < known):
            actor.state, actor.refused = "FAILED", True
            actor.failure = (
                f"offsets-{actor.partition} on node {actor.node}: log end {end}, known end {known}"
            )
            return
        actor.durable_end = end or 0
        self.disk(actor.node).setdefault(actor.partition, actor.durable_end)
        actor.state = "ACTIVE"

    def remove_node(self, node: str) -> None:
        self.nodes.remove(node)
        for actor in list(self.live.values()):
            if actor.node == node:
                self.live.pop(actor.name)
                self._die(actor)

    def crash(self, actor: FakeActor) -> None:
        """The actor's process dies; Ray reports it."""
        self.live.pop(actor.name, None)
        self._die(actor)

    def leaders_of(self, partition: int) -> list[FakeActor]:
        return [a for a in self.live.values() if a.partition == partition]

    def calls_with(self, method: str, name: str) -> list[tuple[Any, ...]]:
        return [args for n, m, args in self.calls if (n, m) == (name, method)]

    def called(self, name: str, method: str) -> bool:
        return any(n == name and m == method for n, m, _ in self.calls)

    def check_lock(self, actor: FakeActor) -> None:
        """With `locks`: another live actor holding the same log directory refuses `actor` a role."""
        holders = [
            other for other in self.live.values()
            if other is not actor and not other.dead and other.partition == actor.partition
            and other.node == actor.node and other.role != "none"
        ]
        if self.locks and holders:
            raise RuntimeError(
                f"LogLockedError: offsets-{actor.partition} on {actor.node} is held by {holders[0].name}"
            )

    def _die(self, actor: FakeActor) -> None:
        actor.dead = True
        self.events.append(("dead", actor.name))

    def _maybe_crash(self, method: str, name: str) -> None:
        if self.crash_in is not None:
            self.crash_in -= 1
            self.crashed = self.crashed or self.crash_in <= 0
        if self.crashed:
            self.crash_in = None
            raise ControllerCrash(f"at {method} of {name}")
        if self.crash_before is not None and self.crash_before[0] == method:
            if self.crash_before[1] in (None, name):
                self.crash_before = None
                raise ControllerCrash(f"before {method} of {name}")
