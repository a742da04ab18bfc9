"""ControlPlane: the controller's decisions, in plain asyncio code.

It owns the cluster metadata (`ControlState`), which actor leads each
offsets partition at which epoch, and acts through a `Cluster` (Ray in
production, a fake in tests/controller/). Rules:

- One operation per partition at a time (a lock per partition); operations
  on different partitions run concurrently, so every partition of a lost
  node is replaced at once.
- A leadership move is resumable: its `Intent` (new epoch and actor name,
  old actor) is saved before anything is done, and cleared only once the new
  leader accepted its start. A restarted controller finishes every saved
  intent, re-using the named actor when it exists and creating it when not,
  so a partition ends with exactly one leader; the old one is killed.
- The successor starts only once its predecessor is unloaded or Ray reports
  it dead (bounded by `kill_wait_s`): the predecessor may hold the log
  directory's lock. An actor Ray reports dead, or that just failed to answer
  a probe, is not asked to unload.
- A replacement happens once per fault and a reassign once per call (Ray
  retries it on a restarted controller): the caller names the epoch it saw,
  and a partition already at a newer epoch is left alone.
- Liveness is judged by `actors.controller.health.judge`. Each new leader gets
  `known_end`, the largest durable end any leader of the partition reported
  (-1: never served, an empty log is fine), so it refuses to serve from a
  missing or shorter log; a refusing leader is shown and counted, and
  stays until an operator reassigns the partition.
- Served means recorded first: a new (or adopted) leader is published in the
  routing, the only way a client reaches it, only once a probe found it
  ACTIVE and the metadata saying the partition was served (`known_end` at
  least 0, so every later leader must find its log) is persisted. A leader
  that dies before that answered no one, and its successor may start empty
  (`actors.controller.publish`).
- Node-local disks (`shared_data_dir` False, the default): a partition's log
  is on the node its leader served from (`log_node`, recorded when it is
  published), so every later leader is started there, with a hard node
  affinity, and a standby serves only there. While that node is not live the
  partition is offline, waiting for it (Kafka keeps a partition of
  replication factor 1 offline until its broker returns); an operator may
  move it to a node given a copy of the log (`reassign` with a node). On a
  shared data directory any node can load the log: leaders go anywhere.
- Partition actors of the namespace that no metadata owns are killed
  (orphans of a controller that died mid-operation).
- A move takes a ready standby when there is one; `actors.controller.standbys`
  starts, adopts, checks and kills the standbys, the plane decides the moves.
- A loop iteration that raises is logged and counted; the loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from actors.controller.autogrow import AUTO_REPARTITION_CHECK_S, AutoGrow
from actors.controller.cluster_view import (
    PARTITION_ACTOR_PREFIX,
    ActorGone,
    Cluster,
    ClusterError,
    MetadataStore,
)
from actors.controller.health import Observation, Verdict, judge
from actors.controller.kafka_brokers import Broker, KafkaBrokers
from actors.controller.publish import Publication
from actors.controller.repartition import Repartitioner
from actors.controller.standbys import Standbys
from actors.controller.state import ControlState, PartitionMeta
from actors.controller.succession import Succession
from actors.core.metrics import ControllerMetrics
from actors.core.setting_keys import SettingError, describe
from actors.core.settings import TOPIC_REGISTRY_NAME, ServiceSettings
from actors.core.settings_watch import SettingsWatch
from coordinator.replication import disk_failed
from coordinator.replication.rolling import DONE as ROLL_DONE
from coordinator.routing import Routing as GroupRouting

logger = logging.getLogger(__name__)
# How often the controller asks the topic registry for settings changed online.
SETTINGS_POLL_S = 0.5
Interval = float | Callable[[], float]
# What clients route by: (number of partitions, leader handles, leader epochs, which
# partition serves each group: `coordinator.routing.Routing`, which changes in a repartition).
Routing = tuple[int, list[Any], list[int], GroupRouting]
# How often a client's `routing_after` looks whether the partition has a new
# leader: a local look, no call; the wait it adds to a failover.
ROUTING_POLL_S = 0.005
# The longest `routing_after` holds a client (its own deadline is shorter).
MAX_ROUTING_WAIT_S = 30.0


class ControlPlane(Succession, Publication):
    def __init__(
        self,
        settings: ServiceSettings,
        cluster: Cluster,
        store: MetadataStore,
        metrics: ControllerMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.start_settings = settings  # as the service was started (`settings` changes)
        self.cluster = cluster
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.state = ControlState.fresh(settings.num_partitions)
        self.state_loaded = False  # `state` read from the store (`start`)
        self.leaders: dict[int, Any] = {}
        # partition -> why its leader refuses to serve
        self.refused: dict[int, str] = {}
        self.awaiting: dict[int, str] = {}
        self._unpublished: set[int] = set()
        self._publishing: dict[int, asyncio.Task[None]] = {}
        self.standbys = Standbys(settings, cluster, lambda: self.state, self._persist, clock)
        self._observations: dict[int, Observation] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._checks: dict[int, asyncio.Task[None]] = {}
        self._loops: list[asyncio.Task[None]] = []
        self._persist_lock = asyncio.Lock()
        self._version = self._saved_version = 0
        # The gateways and the leaders' Kafka listeners, for Kafka's Metadata.
        self.kafka = KafkaBrokers()
        # Changes of the partition count (`actors.controller.repartition`), and the opt-in
        # policy that asks for them (`actors.controller.autogrow`).
        self.repartition = Repartitioner(self)
        self.autogrow = AutoGrow(settings.auto_repartition_after_s, settings.max_partitions)
        self.settings_watch = SettingsWatch(settings)  # changed online (`actors.core.settings_watch`)

    @property
    def num_partitions(self) -> int:
        return self.state.num_partitions

    # ------------------------------------------------------------ startup

    async def start(self) -> None:
        """Load the metadata, finish saved intents, adopt or start every leader."""
        data = await asyncio.to_thread(self.store.load)
        if data is None:
            self.state = ControlState.fresh(self.settings.num_partitions)
        else:
            self.state = ControlState.from_json(data, self.settings.num_partitions)
        # What this start runs with, recorded for the next (`actors.core.settings.ray_credentials_default`).
        self.state.ray_credentials = self.start_settings.ray_credentials
        self.state_loaded = True
        self._locks = {p: asyncio.Lock() for p in range(self.num_partitions)}
        await self.standbys.adopt()
        results = await asyncio.gather(
            *(self._recover(p) for p in range(self.num_partitions)), return_exceptions=True
        )
        for partition, result in enumerate(results):
            if isinstance(result, BaseException):
                logger.error("partition %d: not recovered yet (%r); the watch retries", partition, result)
        await self._persist()
        self.repartition.resume()

    def add_partitions(self, count: int) -> None:
        """Partitions `num_partitions`..`count`-1, with no leader yet: the checks create them."""
        for partition in range(self.state.num_partitions, count):
            self.state.partitions.setdefault(partition, PartitionMeta())
            self._locks.setdefault(partition, asyncio.Lock())
        self.state.num_partitions = count

    def partition_lock(self, partition: int) -> asyncio.Lock:
        """The lock a partition's checks and operations hold (the watch skips it meanwhile)."""
        return self._locks[partition]

    def replica_handles(self, partition: int) -> list[Any]:
        """Every actor holding the partition's log: here its leader."""
        handle = self.leaders.get(partition)
        return [] if handle is None else [handle]

    def forget_partitions(self, count: int) -> None:
        """A shrink retired partitions `count`.. : no metadata, leader or check of them stays."""
        for partition in [p for p in self.state.partitions if p >= count]:
            del self.state.partitions[partition]
            for table in (self.leaders, self.refused, self.awaiting, self._observations, self._checks):
                table.pop(partition, None)
            self._unpublished.discard(partition)

    def unfit_for_repartition(self) -> list[str]:
        """Why a partition cannot take part in a repartition now (empty: every one can)."""
        leaderless = [p for p in range(self.num_partitions) if self._routed(p) is None]
        return [f"partition {p} has no leader serving" for p in leaderless]

    async def autogrow_once(self) -> None:
        """Grow the partition count if the policy says so (`actors.controller.autogrow`)."""
        rows = await self.status()
        running, unfit = self.state.plan is not None, self.unfit_for_repartition()
        grown = self.autogrow.decide(self.clock(), self.num_partitions, rows, unfit, running)
        if grown is not None:
            logger.warning("auto-repartition: partitions past their planned load; growing to %d", grown)
            await self.repartition.start(grown)

    async def repartition_to(self, count: int) -> dict[str, Any]:
        return await self.repartition.start(count)

    async def _push_routing_if_stale(self, partition: int, probe: dict[str, Any]) -> None:
        if self._routed(partition) is not None and self.repartition.needs_push(partition, probe):
            await self.repartition.push_routing([partition])

    async def _recover(self, partition: int) -> None:
        meta = self.state.partitions[partition]
        if meta.intent is None and meta.actor is not None:
            handle = await self.cluster.find(meta.actor)
            if handle is not None:
                self._set_leader(partition, handle)
                await self.check(partition)
                return
        cause = "initial" if meta.actor is None else "missing"
        await self.replace(partition, meta.epoch, cause)

    def run_loops(self) -> None:
        """Start the watch, standby and reaper loops (kept referenced here)."""
        loop = asyncio.get_running_loop()
        def probe_interval() -> float:
            return self.settings.probe_interval_s

        loops: list[tuple[str, Callable[[], Awaitable[object]], Interval]] = [
            ("watch", self.watch_once, probe_interval),
            ("standbys", self.refill_standbys_once, probe_interval),
            ("reaper", self.reap_once, lambda: self.settings.reap_interval_s),
            ("settings", self.settings_once, SETTINGS_POLL_S),
        ]
        if self.settings.auto_repartition:
            loops.append(("autogrow", self.autogrow_once, AUTO_REPARTITION_CHECK_S))
        for name, step, interval_s in loops:
            self._loops.append(loop.create_task(self.supervise(name, step, interval_s)))

    async def supervise(self, name: str, step: Callable[[], Awaitable[object]], interval_s: Interval) -> None:
        """Run `step` every `interval_s` (a number, or a function: a setting changed online),
        forever: an exception ends one iteration, never the loop."""
        while True:
            await asyncio.sleep(interval_s() if callable(interval_s) else interval_s)
            try:
                await step()
            except Exception:
                logger.exception("controller %s loop: iteration failed", name)
                self.metrics.loop_error(name)

    async def settings_once(self) -> None:
        """Take the settings changed online (`raygroups config set`) from the topic registry."""
        changed = await self.settings_watch.poll(await self.cluster.find(TOPIC_REGISTRY_NAME))
        if changed is not None:
            self.settings = self.standbys.settings = changed
            logger.info("controller: settings changed online: %s", self.settings_watch.overrides)

    def roll_settings(self) -> dict[str, Any] | None:
        """The last rolling restart's settings (what `config get` shows in force over the start
        settings, whatever its phase); None until the metadata is loaded."""
        if not self.state_loaded:
            return None
        return {} if self.state.roll is None else dict(self.state.roll.settings)

    async def describe_settings(self, keys: list[str]) -> list[dict[str, Any]] | str:
        """`config get` (`actors.core.setting_keys.describe`): per key its value in force,
        start value and what set it, from the two places that hold them: the last rolling
        restart's settings in this controller's metadata, the online changes read from the
        registry now (its last answer if it does not answer). Or why not: an unknown key."""
        fresh = SettingsWatch(self.start_settings)
        await fresh.poll(await self.cluster.find(TOPIC_REGISTRY_NAME))
        online = fresh.overrides if fresh.token is not None else self.settings_watch.overrides
        roll = self.state.roll
        rolled, label = ({}, "") if roll is None else (roll.settings, f"rolling-restart {roll.version}")
        if roll is not None and roll.phase != ROLL_DONE:
            label += " (stopped)" if roll.stopped is not None else " (under way)"
        try:
            return describe(self.start_settings, rolled, online, keys, label)
        except SettingError as exc:
            return str(exc)

    # ------------------------------------------------------------ watching

    async def watch_once(self) -> None:
        """Start a check of every partition that has none under way and no operation."""
        self.repartition.resume()
        unstarted = self.repartition.unstarted
        for partition in range(self.num_partitions):
            if not self._locks[partition].locked() and partition not in unstarted:
                self._check_task(partition)
        self.metrics.set_refused(len(self.refused))

    def check_soon(self, partition: int) -> None:
        """Check `partition` now rather than at the next round (unless an operation holds it)."""
        if not self._locks[partition].locked():
            self._check_task(partition)

    def _check_task(self, partition: int) -> asyncio.Task[None]:
        task = self._checks.get(partition)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self.check(partition))
            task.add_done_callback(self._check_done)
            self._checks[partition] = task
        return task

    def _check_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("partition check failed", exc_info=task.exception())
            self.metrics.loop_error("check")

    async def settle(self) -> None:
        """Wait until no check (nor the operation it started) is under way."""
        while pending := [t for t in self._checks.values() if not t.done()]:
            await asyncio.gather(*pending, return_exceptions=True)

    async def check(self, partition: int) -> None:
        """Probe a partition's leader and act on the verdict."""
        meta = self.state.partitions[partition]
        if meta.intent is not None:
            await self.resume(partition)
            return
        epoch, handle = meta.epoch, self.leaders.get(partition)
        if handle is None:
            await self.replace(partition, epoch, "no leader")
            return
        try:
            probe = await self.cluster.call(handle, "probe", timeout_s=self.settings.probe_timeout_s)
        except ActorGone:
            await self.replace(partition, epoch, "dead", old_unreachable=True)
            return
        except ClusterError as exc:
            logger.warning(
                "partition %d: leader epoch %d did not answer its probe: %r", partition, epoch, exc
            )
            await self.replace(partition, epoch, "unreachable", old_unreachable=True)
            return
        await self._act(partition, epoch, handle, probe)

    async def _act(self, partition: int, epoch: int, handle: Any, probe: dict[str, Any]) -> None:
        self.kafka.on_probe(partition, epoch, probe)
        judgement = judge(
            probe,
            partition,
            epoch,
            self._observations.get(partition),
            self.clock(),
            self.settings.load_stall_timeout_s,
        )
        if judgement.observation is None:
            self._observations.pop(partition, None)
        else:
            self._observations[partition] = judgement.observation
        if judgement.verdict is Verdict.REFUSED:
            if partition not in self.refused:
                logger.error(
                    "partition %d: leader epoch %d refuses to serve: %s "
                    "(reassign it to a node that holds its log)",
                    partition,
                    epoch,
                    judgement.detail,
                )
            self.refused[partition] = judgement.detail
            return
        self.refused.pop(partition, None)
        if judgement.verdict is Verdict.SERVING:
            if partition in self._unpublished:
                await self._publish(partition, epoch, handle, probe)
            elif self.state.record_end(partition, int(probe.get("durable_end") or 0)):
                await self._persist()
            await self._push_routing_if_stale(partition, probe)
        elif judgement.verdict is Verdict.ACTIVATE:
            known_end = self.state.partitions[partition].known_end
            try:
                await self.cluster.call(
                    handle, "activate", known_end, timeout_s=self.settings.probe_timeout_s
                )
            except ClusterError as exc:
                logger.warning("partition %d: activating epoch %d failed: %r", partition, epoch, exc)
                return
            await self._publish_when_serving(partition, epoch, handle)
        elif judgement.verdict is Verdict.REPLACE:
            logger.warning("partition %d: replacing leader epoch %d: %s", partition, epoch, judgement.detail)
            await self.replace(partition, epoch, judgement.cause)

    # ------------------------------------------------------------ standbys

    async def refill_standbys_once(self) -> None:
        """Keep `standby_actors` started (see actors.controller.standbys)."""
        await self.standbys.refill_once()

    # ------------------------------------------------------------- reaping

    async def reap_once(self) -> int:
        """Kill the namespace's partition actors that nothing here owns; returns how many."""
        names = [n for n in await self.cluster.actor_names() if n.startswith(PARTITION_ACTOR_PREFIX)]
        owned = (
            self.state.owned_names() | self.standbys.reserved
        )  # read after listing: a new actor is owned before it exists
        reaped = 0
        for name in names:
            if name in owned:
                continue
            handle = await self.cluster.find(name)
            if handle is None:
                continue
            logger.warning("killing orphan partition actor %s", name)
            self.cluster.kill(handle)
            self.metrics.orphan_reaped()
            reaped += 1
        return reaped

    # ------------------------------------------------------------ queries

    def routing(self) -> Routing:
        parts = range(self.num_partitions)
        return (
            self.num_partitions,
            [self._routed(p) for p in parts],
            [self.state.partitions[p].epoch for p in parts],
            self.repartition.routing(),
        )

    def kafka_listeners(self) -> list[Broker]:
        """The Kafka listener of every routed leader that has one (`kafka_brokers`)."""
        parts = range(self.num_partitions)
        routed = [self.state.partitions[p].epoch if self._routed(p) is not None else None for p in parts]
        return self.kafka.listeners(routed)

    async def routing_after(self, partition: int, epoch: int, wait_s: float) -> Routing:
        """A client could not use the leader of `epoch` (or the routing named none):
        check the partition now, not at the next round, and answer the routing as
        soon as a leader serves a newer epoch, or serves at all where there was
        none (an election the client saw before its leader served), or this
        check found the old one sound, or `wait_s` passed. The client's next
        attempt then goes straight to the new leader.
        A partition past the count is one a shrink retired (the client's routing is
        older than its end): the routing now, at once, sends the call to the group's
        new owner."""
        bound = max(self.num_partitions, self.settings.max_partitions)
        _check_routing_request(partition, epoch, wait_s, bound)
        if partition >= self.num_partitions:
            return self.routing()
        meta = self.state.partitions[partition]
        leaderless = self._routed(partition) is None
        # A report of an older epoch is already answered; an operation holding
        # the lock is already moving the partition.
        check = None
        if epoch == meta.epoch and not self._locks[partition].locked():
            check = self._check_task(partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while loop.time() < deadline:
            # A source handing its groups off: the routing once they are the targets'.
            settled = check is not None and check.done() and partition not in self.repartition.handing_off
            if self._routed(partition) is not None and (meta.epoch != epoch or leaderless or settled):
                break
            await asyncio.sleep(ROUTING_POLL_S)
        return self.routing()

    async def status(self) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(self._status_row(p) for p in range(self.num_partitions))))

    async def _status_row(self, partition: int) -> dict[str, Any]:
        meta = self.state.partitions[partition]
        row: dict[str, Any] = {
            "partition": partition,
            "epoch": meta.epoch,
            "known_end": meta.known_end,
            "refused": partition in self.refused,
            "failure": self.refused.get(partition),
        }
        if meta.intent is not None:
            row["operation"] = f"{meta.intent.reason} -> epoch {meta.intent.epoch}"
        if (node := self.awaiting.get(partition)) is not None:
            return {
                **row, "state": "OFFLINE", "offline": True, "awaited_node": node, "node_id": node,
                "failure": f"waiting for node {node}: the only copy of its log is on that node's disk",
            }
        handle = self.leaders.get(partition)
        if handle is None:
            return {**row, "state": "NO LEADER"}
        try:
            info = await self.cluster.call(handle, "info", timeout_s=self.settings.probe_timeout_s)
        except ClusterError as exc:
            return {**row, "state": f"UNREACHABLE ({exc!r:.40})"}
        disks = {str(info.get("node_id")): info["disk"]} if disk_failed(info) else {}
        return {**row, **info, "disks": disks}

    def stats(self) -> dict[str, Any]:
        return {
            "failovers": sum(self.metrics.failovers.values()),
            "failovers_by_reason": dict(self.metrics.failovers),
            "refused": sorted(self.refused),
            "offline": sorted(self.awaiting),
            "orphans_reaped": self.metrics.reaped,
            "loop_errors": dict(self.metrics.loop_errors),
            "num_partitions": self.num_partitions,
            "repartition": self.repartition.status(),
        }

    async def shutdown(self) -> None:
        """Stop the loops, unload every partition, kill its actor and the standbys."""
        for task in [*self._loops, *self._checks.values(), *self._publishing.values()]:
            task.cancel()

        async def stop(partition: int, handle: Any) -> None:
            epoch = self.state.partitions[partition].epoch
            try:
                await self.cluster.call(handle, "unload", epoch, timeout_s=self.settings.probe_timeout_s)
            except ClusterError:
                pass  # killed below all the same
            self.cluster.kill(handle)

        await asyncio.gather(*(stop(p, h) for p, h in self.leaders.items()))
        self.standbys.kill_all()
        self.leaders.clear()

    def log_sources(self) -> dict[int, list[Any]]:
        """{partition: [leader handle]} of every partition with a leader: who holds its log."""
        return {p: [handle] for p, handle in self.leaders.items() if handle is not None}

    # ------------------------------------------------------------- helpers

    async def _persist(self) -> None:
        """Save the metadata; concurrent saves are ordered, and one save covers
        every change made before it started."""
        self._version += 1
        mine = self._version
        async with self._persist_lock:
            if self._saved_version >= mine:
                return
            version, data = self._version, self.state.to_json()
            await asyncio.to_thread(self.store.save, data)
            self._saved_version = version


def _check_routing_request(partition: object, epoch: object, wait_s: object, num_partitions: int) -> None:
    """`routing_after`'s arguments come from any process of the cluster."""
    if type(partition) is not int or not 0 <= partition < num_partitions:
        raise ValueError(f"partition must be an int in [0, {num_partitions}), got {partition!r}")
    if type(epoch) is not int:
        raise ValueError(f"epoch must be an int, got {epoch!r}")
    if type(wait_s) not in (int, float) or not 0 <= wait_s <= MAX_ROUTING_WAIT_S:  # type: ignore[operator]
        raise ValueError(f"wait_s must be a number in [0, {MAX_ROUTING_WAIT_S}], got {wait_s!r}")
