"""Rolling restart: the controller's recorded plan and its driver (issue 48, DESIGN section 10).

The plan and its decisions (order, the min ISR check, where leadership goes, when a node
is back in sync) are `coordinator.replication.rolling`'s; this drives them across actors,
as `actors.controller.repartition` drives a repartition: the plan (`RollPlan`) lives in
the controller's metadata (GCS), is saved before each step acts, and a restarted
controller resumes it.

Per node, in `roll_order`:
1. It waits (`waiting`, `paused`: the status says for what) while the node is not live,
   a partition with a replica on it would fall below min ISR without it, has no leader,
   is held, or has another replica out of its ISR (catching up, or recreated elsewhere by
   the controller's own recovery: `refusal`, `catching_up`); a leadership move that
   fails, or a leader elected back onto the node meanwhile, waits and retries too.
   Nothing needs a person: the roll goes on by itself once the cluster healed. A node
   that holds no replica any more (lost for good, its replicas moved to other nodes,
   which started them with the plan's code) is done.
2. Leadership leaves the node (`reassign` to the first other ISR member: a clean
   election, the old leader keeps serving until the new one took the epoch up).
3. Each of the node's replicas, under its partition's lock: its actor is killed and seen
   dead (two actors never share a log directory), it leaves the ISR (so the leader's
   high watermark stops waiting for it: `LeaderState` forgets a dropped follower's
   caught-up time, and no answer of the old actor can bring it back, as it is dead), and
   a new actor (new name) is started on the node, on the same disk, with
   the plan's runtime_env and settings (`Cluster.configure_actors`). The plan records the
   node as `restarted` once all are, so a resumed plan does not restart them twice.
4. The node is done once it is back in the ISR of each of its partitions (the leader
   admits a caught-up follower, as after any restart). While its node is down or a
   partition of it has no live leader, it waits (a node killed mid-roll: the
   controller restarts its replicas when it returns, or moves them after
   `replica_reassign_delay_s`). Only replicas not back `CATCH_UP_TIMEOUT_S` after
   their node and leaders were last seen healthy stop the roll for good: that is new
   code or settings that do not start or serve (a bad runtime_env), which a person
   must fix (a new roll replaces it; `--resume` waits again). `stop` (`--stop`) is the
   other way it stops for good.
Then the controller: it records the phase and exits its process; Ray restarts the same
actor (same handle: every client keeps working), which takes the plan's settings at
start and finishes the phase. Then the topic registry, restarted in place the same way.
Then the Kafka gateways deployed with the service (`next_gateway`), one at a time: each
attached actor that names its replacer (`actors.core.attached`: the gateway package's
`gateway.deploy.replace_gateway`, so this never imports gateway/) is replaced by it with
the plan's runtime_env, at its address, and serves again before the next; its Kafka
clients reconnect. It reads the settings in force from this (restarted) controller. A
replacement that fails is tried again; `GATEWAY_TRIES` failures in a row stop the roll
(`gateway_failed`). A gateway whose node is gone is done (nothing to replace).

Why the controller and the registry are restarted in place, not re-created: Ray restarts an
actor from the creation task it recorded (its runtime_env included; `ray.kill` takes no
new options), and a re-created one is a new actor id: every client keeps the controller
handle it looked up at connect, and leaders the one given with their role. So their code
is what their node has installed (a package upgraded on the nodes), not the plan's
runtime_env, which only the replicas take; the status's `controller_version` is the
release this process imported (docs/operations.md, "Upgrading the controller and the
registry", has the whole reasoning).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.controller.cluster_view import ClusterError
from actors.core.setting_keys import SettingError, rolling_overrides
from actors.core.settings import TOPIC_REGISTRY_NAME, ServiceSettings
from coordinator.replication import PartitionState
from coordinator.replication.rolling import (
    CONTROLLER,
    DONE,
    GATEWAYS,
    REGISTRY,
    REPLICAS,
    PartitionView,
    RollPlan,
    behind,
    catching_up,
    gateway_failed,
    leadership_moves,
    partitions_on,
    refusal,
    roll_order,
)

if TYPE_CHECKING:
    from actors.controller.replicas import ReplicatedPlane

logger = logging.getLogger(__name__)


def _imported_version() -> str:
    try:
        return importlib.metadata.version("raygroups")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (raygroups not installed as a package)"


# The release this process imported, read once at import: the disk may hold a newer one
# (installed for the next restart) than the code running here.
IMPORTED_VERSION = _imported_version()
CATCH_UP_TIMEOUT_S = 300.0
DEAD_TIMEOUT_S = 30.0
POLL_S = 0.05
WAIT_S = 1.0
GATEWAY_TIMEOUT_S = 60.0  # one gateway's replacement: stopped, started anew, serving


class RollRefused(ValueError):
    """A rolling restart that cannot start or resume; nothing changed."""


class RollingRestart:
    """The driver of the plan in `plane.state.roll` (one at a time)."""

    def __init__(self, plane: ReplicatedPlane, exit_process: Callable[[], None] | None = None) -> None:
        self.plane = plane
        # Ends this controller's process so Ray restarts it (the actor shell gives it).
        self.exit_process = exit_process
        self._task: asyncio.Task[None] | None = None
        # What the roll waits for now (None: it acts), and whether that is a fault it waits out.
        self.waiting: str | None = None
        self.paused = False
        self.wait_s = WAIT_S  # between tries while paused (each asks Ray for the live nodes)

    # ------------------------------------------------------------ starting

    def target_settings(self, plan: RollPlan | None) -> ServiceSettings:
        """The settings new actors start with: the service's start settings plus the plan's."""
        base = self.plane.start_settings
        return base if plan is None else rolling_overrides(base, plan.settings)

    async def start(
        self, runtime_env: dict[str, Any] | None, settings: dict[str, Any]
    ) -> dict[str, Any]:
        """Begin a rolling restart; returns at once with its status, or raises RollRefused.
        A stopped one is replaced (every node is rolled again: a runtime_env that does not
        start, say, is given again fixed, or the previous code for a downgrade back)."""
        state = self.plane.state
        if state.roll is not None and state.roll.phase != DONE and state.roll.stopped is None:
            raise RollRefused(f"rolling restart {state.roll.version} is under way; it finishes by itself")
        if state.plan is not None:
            raise RollRefused(f"repartition {state.plan.version} is under way; roll once it is done")
        if runtime_env is not None and not isinstance(runtime_env, dict):
            raise RollRefused(f"the runtime_env must be a JSON object, got {type(runtime_env).__name__}")
        if not isinstance(settings, dict):
            raise RollRefused("the settings must be a mapping of KEY to VALUE")
        previous = {} if state.roll is None else state.roll.settings
        plan = RollPlan((state.roll.version if state.roll else 0) + 1, roll_order(self.views()),
                        runtime_env, {**previous, **settings})
        try:
            target = self.target_settings(plan)
        except SettingError as exc:
            raise RollRefused(str(exc)) from None
        if not plan.nodes:
            raise RollRefused("no partition has replicas placed yet")
        if (why := refusal(plan.nodes[0], self.views(), self.plane.settings.min_insync_replicas)) is not None:
            raise RollRefused(f"not now: {why}")
        state.roll = plan
        self.plane.cluster.configure_actors(target, runtime_env)
        await self.plane._persist()
        logger.info("rolling restart %d: nodes %s, settings %s", plan.version, plan.nodes, plan.settings)
        self.resume()
        return self.status()

    async def resume_stopped(self) -> dict[str, Any]:
        """The operator's `--resume`: clear the reason it stopped and drive it again."""
        plan = self.plane.state.roll
        if plan is None or plan.phase == DONE:
            raise RollRefused("no rolling restart to resume")
        if plan.stopped is not None and self._task is not None and not self._task.done():
            await asyncio.wait([self._task])  # the stopped driver ends at its step; then anew
        plan.stopped = None
        await self.plane._persist()
        self.resume()
        return self.status()

    async def on_start(self) -> None:
        """At the controller's start: it and the actors it creates take the recorded plan's
        settings (and the replicas its runtime_env); a plan under way is resumed. A plan at
        its controller phase is past it: this is the restarted controller."""
        plan = self.plane.state.roll
        if plan is None:
            return
        try:
            target = self.target_settings(plan)
        except SettingError as exc:  # this code checks a value otherwise than the roll's did
            logger.error("rolling restart %d: its settings are refused here (%s); start settings kept",
                         plan.version, exc)
            target = self.plane.start_settings
        self.plane.settings_watch.base = target
        self.plane.settings = self.plane.standbys.settings = target
        self.plane.cluster.configure_actors(target, plan.runtime_env)
        if plan.phase == CONTROLLER:
            await self.finish_controller()
        self.resume()

    # ------------------------------------------------------------ driving

    def resume(self) -> None:
        plan = self.plane.state.roll
        if plan is None or plan.phase == DONE or plan.stopped is not None:
            return
        if self._task is not None and not self._task.done():
            return
        self._task = asyncio.get_running_loop().create_task(self._drive(plan))
        self._task.add_done_callback(self._driven)

    def _driven(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("rolling restart driver failed; resumed at the next check",
                         exc_info=task.exception())
            self._wait_for(f"the driver failed ({task.exception()!r}); it is resumed at the next check")
            self.plane.metrics.loop_error("rolling")

    async def _drive(self, plan: RollPlan) -> None:
        while plan.phase == REPLICAS and plan.stopped is None:
            node = plan.next_node()
            if node is None:  # every node done, the phase not moved on (an older save)
                plan.phase = CONTROLLER
                break
            await self._roll_node(plan, node)
        self._wait_for(None)
        if plan.stopped is not None:
            return
        if plan.phase == CONTROLLER:
            await self._restart_controller(plan)
            return  # this process ends; the restarted controller goes on
        if plan.phase == REGISTRY:
            await self._restart_registry()
            plan.advance()
            await self.plane._persist()
        if plan.phase == GATEWAYS:
            if not await self._roll_gateways(plan):
                return  # stopped (a resume may have cleared the reason since: it drives anew)
            plan.advance()
            await self.plane._persist()
            logger.info("rolling restart %d done", plan.version)

    async def _stop(self, plan: RollPlan, why: str) -> None:
        plan.stopped = why
        self._wait_for(None)
        await self.plane._persist()
        logger.warning("rolling restart %d stopped: %s", plan.version, why)

    async def stop(self) -> dict[str, Any]:
        """The operator's `--stop`: the roll stops for good at its next step (nothing is
        interrupted halfway); `--resume` or a new roll goes on."""
        plan = self.plane.state.roll
        if not self.running() or plan is None:
            raise RollRefused("no rolling restart under way")
        await self._stop(plan, "stopped by an operator (raygroups rolling-restart --stop)")
        return self.status()

    def _wait_for(self, why: str | None, paused: bool = True) -> None:
        """Say what the roll waits for (None: nothing); `paused`: a fault it waits out."""
        if why != self.waiting:
            if why is not None:
                (logger.warning if paused else logger.info)("rolling restart: waiting: %s", why)
            self.waiting, self.paused = why, paused and why is not None

    async def _pause(self, why: str) -> None:
        self._wait_for(why)
        await asyncio.sleep(self.wait_s)

    async def _roll_node(self, plan: RollPlan, node: str) -> None:
        restarted: set[int] = set()  # this node's replicas restarted by this try
        while plan.restarted != node and plan.stopped is None:
            views = self.views()
            if not partitions_on(node, views):
                logger.info("rolling restart %d: %s holds no replica any more (moved elsewhere)",
                            plan.version, node)
                break
            why = await self._not_now(node, views) or await self._take_out(node, restarted)
            if why is not None:
                await self._pause(why)
                continue
            plan.restarted = node
            await self.plane._persist()
            logger.info("rolling restart %d: replicas on %s restarted", plan.version, node)
        if plan.stopped is not None:
            return
        if (late := await self._until_in_sync(plan, node)) is not None:
            why = (f"replicas on {node} not back in the ISR {CATCH_UP_TIMEOUT_S:.0f} s after their node "
                   f"and leaders were healthy: partitions {late}. New code or settings that do not "
                   "start or serve? See the replicas' logs; a new rolling-restart replaces this one")
            await self._stop(plan, why)
            return
        if _stopped(plan):  # by an operator, meanwhile
            return
        plan.finish_node(node)
        await self.plane._persist()
        logger.info("rolling restart %d: %s back in sync (%d/%d nodes)",
                    plan.version, node, len(plan.done), len(plan.nodes))

    async def _not_now(self, node: str, views: dict[int, PartitionView]) -> str | None:
        """Why `node` may not be taken out now (a fault the roll waits out), else None."""
        if node not in await self.plane.cluster.live_nodes():
            return (f"node {node} is not live: waiting for it to return, or for the controller to "
                    "move its replicas after replica_reassign_delay_s")
        return (refusal(node, views, self.plane.settings.min_insync_replicas)
                or catching_up(node, views))

    async def _take_out(self, node: str, restarted: set[int]) -> str | None:
        """Leadership off `node`, then its replicas restarted; None when done, else why not yet."""
        for partition, target in leadership_moves(node, self.views()).items():
            try:
                await self.plane.reassign(partition, target)
            except ValueError as exc:
                return f"leadership of partition {partition} not moved off {node}: {exc}"
        for partition in partitions_on(node, self.views()):
            if partition in restarted:
                continue
            if not await self._restart_replica(partition, node):
                return (f"partition {partition}: leadership came back to {node} (an election); "
                        "moving it off again")
            restarted.add(partition)
        return None

    async def _restart_replica(self, partition: int, node: str) -> bool:
        """Restart `node`'s replica of `partition`; False (nothing done) if it leads."""
        plane = self.plane
        async with plane.partition_lock(partition):
            if plane.state.partitions[partition].leader == node:
                return False
            handle = plane.handles.get(partition, {}).pop(node, None)
            if handle is not None:
                plane.cluster.kill(handle)
                await self._until_dead(handle)
            meta = plane.state.partitions[partition]
            if node in meta.isr and len(meta.isr) > 1 and meta.leader != node:
                # Out of the ISR once it can answer no more: the leader's HWM stops waiting
                # for it, and no answer of the old actor brings it back.
                isr = tuple(r for r in meta.isr if r != node)
                out = PartitionState(
                    tuple(meta.replicas), isr, meta.leader, meta.epoch, meta.partition_epoch + 1
                )
                await plane._commit(partition, out, "rolling restart")
                live = set(await plane.cluster.live_nodes())
                await plane._send_roles(partition, await plane._probe_all(partition, live))
            await plane._restart(partition, node)
        await plane.check(partition)  # the new replica's role, and its leader learns its handle
        return True

    async def _until_dead(self, handle: Any) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEAD_TIMEOUT_S
        while not await self.plane.cluster.is_dead(handle):
            if loop.time() > deadline:
                raise ClusterError(f"a killed replica is not reported dead after {DEAD_TIMEOUT_S} s")
            await asyncio.sleep(POLL_S)

    async def _until_in_sync(self, plan: RollPlan, node: str) -> list[int] | None:
        """None once `node` is in every one of its partitions' ISR (or the plan stopped); the
        late partitions once they stayed behind `CATCH_UP_TIMEOUT_S` on a healthy cluster."""
        deadline: float | None = None
        while plan.stopped is None and (late := behind(node, self.views())):
            fault = self._fault(node, late)
            if fault is not None:
                deadline = None  # the timeout counts from when the cluster is healthy again
                self._wait_for(f"{fault}; the replicas on {node} catch up after")
            else:
                now = self.plane.clock()
                deadline = now + CATCH_UP_TIMEOUT_S if deadline is None else deadline
                if now > deadline:
                    return late
                self._wait_for(f"replicas on {node} back in the ISR of partitions {late}", paused=False)
            await asyncio.sleep(POLL_S)
        self._wait_for(None)
        return None

    def _fault(self, node: str, late: list[int]) -> str | None:
        """What keeps `node`'s late replicas from catching up that is not theirs: their node
        down, a partition without a leader on a live node, held (as of the last checks)."""
        missing = self.plane._missing_since
        if node in missing:
            return f"node {node} is not live"
        for partition in late:
            meta = self.plane.state.partitions[partition]
            if meta.held is not None:
                return f"partition {partition} is held (an operator elects its leader)"
            if meta.leader is None or meta.leader in missing:
                return f"partition {partition} has no live leader"
        return None

    async def _restart_controller(self, plan: RollPlan) -> None:
        """Record that this controller's restart is the step under way, then end the process
        (Ray restarts the actor; `finish_controller` at its start completes the phase)."""
        if self.exit_process is None:  # no process to end (the fake cluster): the step is done
            await self.finish_controller()
            return
        logger.info("rolling restart %d: restarting the controller", plan.version)
        self.exit_process()

    async def finish_controller(self) -> None:
        plan = self.plane.state.roll
        if plan is not None and plan.phase == CONTROLLER:
            plan.advance()
            await self.plane._persist()
            self.resume()

    async def _restart_registry(self) -> None:
        handle = await self.plane.cluster.find(TOPIC_REGISTRY_NAME)
        if handle is not None:
            await self.plane.cluster.restart(handle)

    async def _roll_gateways(self, plan: RollPlan) -> bool:
        """Replace every gateway attached to the service, one at a time (module docstring);
        whether all are (False: the plan stopped)."""
        tries = 0
        while plan.stopped is None:
            name = plan.next_gateway(await self.plane.cluster.replaceable())
            if name is None:
                self._wait_for(None)
                return True
            self._wait_for(f"gateway {name} serving again", paused=False)
            try:
                replaced = await self.plane.cluster.replace_attached(
                    name, plan.runtime_env, GATEWAY_TIMEOUT_S)
            except ClusterError as exc:
                tries += 1
                why = gateway_failed(name, tries, str(exc))
                if why is not None:
                    await self._stop(plan, why)
                    return False
                await self._pause(f"gateway {name} not serving again ({exc}); trying again")
                continue
            tries = 0
            plan.finish_gateway(name)
            await self.plane._persist()
            logger.info("rolling restart %d: gateway %s %s", plan.version, name,
                        "serving again" if replaced else "gone (its node left): nothing to replace")
        return False

    # ------------------------------------------------------------ views

    def views(self) -> dict[int, PartitionView]:
        return {
            p: PartitionView(tuple(m.replicas), tuple(m.isr), m.leader, m.held is not None)
            for p, m in self.plane.state.partitions.items() if m.replicas
        }

    def running(self) -> bool:
        """A plan under way and not stopped (the balance loop leaves leadership alone then)."""
        plan = self.plane.state.roll
        return plan is not None and plan.phase != DONE and plan.stopped is None

    def status(self) -> dict[str, Any]:
        plan = self.plane.state.roll
        if plan is None:
            return {"running": False, "phase": None, "controller_version": IMPORTED_VERSION}
        return {
            "running": self.running(), **plan.to_json(), "phase": plan.phase,  # not as saved
            "controller_version": IMPORTED_VERSION,
            "waiting": self.waiting if self.running() else None,
            "paused": self.paused and self.running(),
            "nodes_done": len(plan.done), "nodes_total": len(plan.nodes),
        }


def _stopped(plan: RollPlan) -> bool:
    return plan.stopped is not None
