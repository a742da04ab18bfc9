"""Changing the offsets partition count online: the controller's recorded plan and its driver.

Which counts are allowed and how a group moves whole are `coordinator/handoff.py`'s rules;
this drives them across actors (DESIGN section 10: a step that can crash midway is a
recorded plan the controller finishes).

The plan (`Plan`, in the controller's metadata): the repartition's version (numbered
from 1, never reused), the count before and after, and the source partitions whose
switch the controller has recorded. While it runs, the routing every client gets
(`Routing(count, previous, switched, version)`) sends a group to its old partition until
that partition switched, then to its new one: never to two, and only for the length of
one source's handoff to neither.

Growing N to kN:
1. The plan and the new partitions' metadata are saved; the new partitions are started
   before any group moves, one after another (`unstarted`: the watch leaves them alone
   until the driver lets each go, once the one before serves), then placed and published
   as any other (they own no group until a source switches: no client is routed to them
   before). A replica's process start costs a core for a second or more: all of them at
   once would stall every running partition on the nodes they share.
2. Per source partition p, at most `MAX_CONCURRENT_SOURCES` at once: its leader freezes
   the groups that move and exports them once durable (`handoff_export`); each target's
   leader is fenced with a new copy session of p (`handoff_fence`: it forgets what an
   abandoned attempt left it, coordinator/precopy_target.py) and admits its share, durably,
   checked against that session (`precopy_admit`; `handoff_admit` unchecked at a leader
   without it); p's leader writes its switch
   record, the commit point, durably (`handoff_switch`); the controller records the
   switch and pushes the routing to every leader (`set_routing`). A step refused or
   failed (a leader moved, a replica below min ISR, a timeout) abandons the attempt
   (`handoff_abort`, best effort: a new leader froze nothing) and retries it after a
   backoff; the switch is refused to any leader but the one that froze and exported the
   groups, so a group that changed after its export never switches.
3. With every source switched the plan ends: the routing is `Routing(kN)` again.
A controller restarted midway resumes the plan: a source that wrote its switch record
but was not recorded exports nothing more and answers its switch as done.

Shrinking N to N/k is the reverse: the sources are partitions N/k..N-1, each handing
all its groups to `p % (N/k)`; once all switched, each emptied partition's replicas stop
and rename their directories away (`retire`: `retired-v<version>-offsets-<p>`, never
read again), then the controller forgets them. A controller or a full restart midway
resumes the plan (the retirement is retried; a directory gone already is fine).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actors.controller.cluster_view import ActorGone, CallFailed, ClusterError
from actors.controller.precopy import PrecopyDriver
from coordinator.handoff import refusal
from coordinator.replication.rolling import DONE as ROLL_DONE
from coordinator.routing import Routing

if TYPE_CHECKING:
    from actors.controller.plane import ControlPlane

logger = logging.getLogger(__name__)
MAX_CONCURRENT_SOURCES = 8
STEP_TIMEOUT_S = 60.0
RETRY_INITIAL_S = 0.05
RETRY_MAX_S = 2.0
PUBLISH_POLL_S = 0.02


class RepartitionRefused(ValueError):
    """A repartition that cannot start; nothing changed."""


@dataclass(slots=True)
class Plan:
    version: int
    previous: int
    count: int
    switched: list[int] = field(default_factory=list)
    # The last copy session numbered per source (a fence at its targets each, persisted
    # before use: a controller resuming the plan never reuses one).
    sessions: dict[int, int] = field(default_factory=dict)

    def routing(self) -> Routing:
        return Routing(self.count, self.previous, frozenset(self.switched), self.version)

    def sources(self) -> range:
        """The partitions whose groups move: every old one when growing; when shrinking,
        those the new count drops (their groups go to `p % count`)."""
        return range(self.previous) if self.count > self.previous else range(self.count, self.previous)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "previous": self.previous, "count": self.count,
                "switched": self.switched,
                **({"sessions": {str(p): n for p, n in self.sessions.items()}} if self.sessions else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        sessions = {int(p): int(n) for p, n in data.get("sessions", {}).items()}  # absent before pre-copy
        return cls(int(data["version"]), int(data["previous"]), int(data["count"]), list(data["switched"]),
                   sessions)


class Repartitioner:
    """The driver of the plan in `plane.state.plan` (one at a time)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self._task: asyncio.Task[None] | None = None
        # The sources whose groups are frozen or about to be: a client told NOT_COORDINATOR
        # there is answered the routing once they switched (`ControlPlane.routing_after`).
        self.handing_off: set[int] = set()
        # New partitions the watch must not start yet (step 1: the driver starts them in turn).
        self.unstarted: set[int] = set()
        self.attempts = 0
        # How long the last run (in this controller) took: starting the new partitions,
        # then the handoffs (`status`; bench/repartition.py).
        self.timings: dict[str, float] = {}
        # The longest each step of a source's successful attempt took in this run (where a
        # moved group's stall goes: export, admits, switch, routing), and the longest time
        # a source's moving groups were frozen (from its export to the targets' routing).
        self.steps: dict[str, float] = {}
        self.precopy = PrecopyDriver(self)

    # ------------------------------------------------------------ routing

    def routing(self) -> Routing:
        state = self.plane.state
        if state.plan is not None:
            return state.plan.routing()
        return Routing(state.num_partitions, version=state.routing_version)

    # ------------------------------------------------------------ starting

    async def start(self, count: int) -> dict[str, Any]:
        """Begin growing or shrinking to `count` partitions; returns at once with the plan (`status`)."""
        self._check(count)
        state = self.plane.state
        plan = Plan(state.routing_version + 1, state.num_partitions, count)
        state.plan, state.routing_version = plan, plan.version
        if count > plan.previous:
            self.plane.add_partitions(count)
        await self.plane._persist()
        logger.info("repartition %d: %d -> %d offsets partitions", plan.version, plan.previous, plan.count)
        self.resume()
        return self.status()

    def _check(self, count: object) -> None:
        if type(count) is not int:
            raise RepartitionRefused(f"the partition count must be an int, got {type(count).__name__}")
        state = self.plane.state
        current = state.num_partitions
        if state.plan is not None:
            plan = state.plan
            running = f"repartition {plan.version} ({plan.previous} -> {plan.count})"
            raise RepartitionRefused(f"{running} is under way; it finishes by itself")
        if state.roll is not None and state.roll.phase != ROLL_DONE:
            roll = state.roll.version
            raise RepartitionRefused(f"rolling restart {roll} is under way; repartition once it is done")
        if (why := refusal(current, count)) is not None:
            raise RepartitionRefused(why)
        limit = self.plane.settings.max_partitions
        if count > limit:
            raise RepartitionRefused(f"at most {limit} offsets partitions (max_partitions), not {count}")
        if unfit := self.plane.unfit_for_repartition():
            raise RepartitionRefused("not while a partition cannot take writes: " + "; ".join(unfit))

    # ------------------------------------------------------------ driving

    def resume(self) -> None:
        """Drive the recorded plan, if any, unless already driving it."""
        plan = self.plane.state.plan
        if plan is None or (self._task is not None and not self._task.done()):
            return
        # Set before the watch's next round (which calls this first): it starts none of them.
        self.unstarted = {p for p in range(plan.previous, plan.count) if self.plane._routed(p) is None}
        self._task = asyncio.get_running_loop().create_task(self._drive())
        self._task.add_done_callback(self._driven)

    def _driven(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:  # never silent: logged, and the watch loop resumes it
            logger.error("repartition driver failed; resumed at the next check", exc_info=task.exception())
            self.plane.metrics.loop_error("repartition")

    async def _drive(self) -> None:
        plan = self.plane.state.plan
        assert plan is not None
        loop = asyncio.get_running_loop()
        began = loop.time()
        await self._start_in_turn()
        await self._until_published(range(max(plan.count, plan.previous)))
        # Every leader records the plan (its state file: a full restart resumes it) before
        # any group moves.
        while not await self.push_routing():
            await asyncio.sleep(PUBLISH_POLL_S)
        published = loop.time()
        self.steps = {}
        sources = [p for p in plan.sources() if p not in plan.switched]
        gate = asyncio.Semaphore(MAX_CONCURRENT_SOURCES)

        async def one(source: int) -> None:
            async with gate:
                await self._hand_off(plan, source)

        await asyncio.gather(*(one(p) for p in sources))
        handed = loop.time()
        for partition in range(plan.count, plan.previous):  # a shrink: the emptied partitions go
            await self._retire(plan, partition)
        self.timings = {
            "partitions_ready_s": published - began, "handoffs_s": handed - published, **self.steps,
        }
        self.plane.forget_partitions(plan.count)
        self.plane.state.num_partitions = plan.count
        self.plane.state.plan = None
        await self.plane._persist()
        logger.info("repartition %d done: %d offsets partitions", plan.version, plan.count)
        await self.push_routing()

    async def _retire(self, plan: Plan, partition: int) -> None:
        """Stop every replica of an emptied partition and rename its directory away (under
        the partition's lock: no check restarts it meanwhile), retried until each answered or
        is gone (a dead node's directory stays, and a full restart ignores it: the recovered
        count is below it)."""
        delay = RETRY_INITIAL_S
        async with self.plane.partition_lock(partition):
            while True:
                calls = [
                    self.plane.cluster.call(handle, "retire", plan.version, timeout_s=STEP_TIMEOUT_S)
                    for handle in self.plane.replica_handles(partition)
                ]
                results = await asyncio.gather(*calls, return_exceptions=True)
                failed = [r for r in results if isinstance(r, BaseException) and not isinstance(r, ActorGone)]
                if not failed:
                    logger.info("repartition %d: partition %d retired: %s", plan.version, partition, results)
                    return
                logger.warning(
                    "repartition %d: retiring partition %d retried: %r", plan.version, partition, failed[0]
                )
                await asyncio.sleep(delay)
                delay = min(2 * delay, RETRY_MAX_S)

    async def _start_in_turn(self) -> None:
        """Start the new partitions one at a time: each is checked (which starts its
        replicas) and served before the next is let go (step 1)."""
        try:
            for partition in sorted(self.unstarted):
                self.unstarted.discard(partition)
                delay = RETRY_INITIAL_S
                # Checked again soon, not at the next round, backing off to the round's pace
                # (a partition that cannot start, such as too few live nodes, waits as before).
                while self.plane._routed(partition) is None:
                    self.plane.check_soon(partition)
                    await asyncio.sleep(delay)
                    delay = min(2 * delay, self.plane.settings.probe_interval_s)
        finally:
            self.unstarted.clear()  # a failed driver leaves the watch free to start them

    async def _until_published(self, partitions: range) -> None:
        while missing := [p for p in partitions if self.plane._routed(p) is None]:
            logger.debug("repartition: waiting for partitions %s to be served", missing[:8])
            await asyncio.sleep(PUBLISH_POLL_S)

    async def _hand_off(self, plan: Plan, source: int) -> None:
        """Move `source`'s leaving groups to their new partitions; retried until done."""
        delay = RETRY_INITIAL_S
        try:
            while (why := await self._try(plan, source)) is not None:
                logger.warning("repartition %d: partition %d handoff retried: %s", plan.version, source, why)
                await self.call(source, "handoff_abort", quiet=True)
                self.handing_off.discard(source)  # served again until the next freeze
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(2 * delay, RETRY_MAX_S)
        finally:
            self.handing_off.discard(source)

    async def _try(self, plan: Plan, source: int) -> str | None:
        self.attempts += 1
        try:
            if await self.precopy.fits(plan, source):
                return await self.precopy.attempt(plan, source)
            return await self._attempt(plan, source)
        except ClusterError as exc:
            return f"{exc!r}"

    async def _attempt(self, plan: Plan, source: int) -> str | None:
        """One try of the fenced handoff; None when the source switched (and it is
        recorded), else why not."""
        routing = plan.routing().with_switched(source).encode()
        page, moved, session = 0, 0, 0
        clock = asyncio.get_running_loop().time
        took = {"export_s": 0.0, "admit_s": 0.0}
        frozen = clock()
        self.handing_off.add(source)
        while page >= 0:  # the moving groups, a page at a time (a big partition's are many)
            began = clock()
            exported = await self.call(source, "handoff_export", routing, page)
            if exported["error"] != "NONE":
                return f"export: {exported['error']} {exported['detail']}"
            if page == 0 and not exported["switched"]:
                session = await self.new_session(plan, source)
                if why := await self.fence(plan, source, routing, session):
                    return why
            exported_at = clock()
            targets = sorted(exported["exported"])
            admitted = await asyncio.gather(*(
                self._admit(plan, source, routing, session, int(t), exported["exported"][t]) for t in targets
            ))
            for target, answer in zip(targets, admitted, strict=True):
                if answer["error"] != "NONE":
                    return f"admit at {target}: {answer['error']} {answer['detail']}"
            page, moved = exported["next_page"], moved + exported["groups"]
            took["export_s"] += exported_at - began
            took["admit_s"] += clock() - exported_at
        began = clock()
        switched = await self.call(source, "handoff_switch", routing)
        if switched["error"] != "NONE":
            return f"switch: {switched['error']} {switched['detail']}"
        took["switch_s"] = clock() - began
        await self.record_switch(plan, source, took, frozen, moved)
        return None

    async def record_switch(
        self, plan: Plan, source: int, took: dict[str, float], frozen: float, moved: int
    ) -> None:
        """The source's switch record is durable: record it in the plan and push the routing
        (`took`: the attempt's step timings, completed here; `frozen`: when its groups froze)."""
        clock = asyncio.get_running_loop().time
        began = clock()
        if source not in plan.switched:
            plan.switched.append(source)
        # The partitions whose groups changed owner learn it first (the clients told
        # NOT_COORDINATOR meanwhile are answered the routing once this returns), while the
        # switch is saved: a controller restarted before the save finds the source's switch
        # record (its export is then empty and its switch answered as done).
        await asyncio.gather(self.plane._persist(), self.push_routing(self.takers(plan, source)))
        took["routing_s"] = clock() - began
        took["frozen_s"] = clock() - frozen
        for step, seconds in took.items():
            self.steps[step] = max(self.steps.get(step, 0.0), seconds)
        logger.info("repartition %d: partition %d handed off %d groups (%s)", plan.version, source, moved,
                    ", ".join(f"{k} {v:.3f}" for k, v in took.items()))

    async def _admit(
        self, plan: Plan, source: int, routing: bytes, session: int, target: int, payload: bytes
    ) -> dict[str, Any]:
        """One page's admit at `target`, checked against the attempt's fenced session where
        the leader can (an admit of an abandoned attempt that runs late is refused, never
        overwriting a newer copy); a leader without the pre-copy methods admits unchecked."""
        handle = self.plane._routed(target)
        if session and handle is not None and hasattr(handle, "precopy_admit"):
            return await self.call(target, "precopy_admit", routing, source, session, payload, [])
        return await self.call(target, "handoff_admit", plan.version, payload)

    async def fence(self, plan: Plan, source: int, routing: bytes, session: int) -> str | None:
        """Before a session's first admits: every target forgets the copies an older session
        or an abandoned attempt left there, and refuses older sessions from then on
        (coordinator/precopy_target.py `fence_step`); why not, or None."""
        targets = [t for t in self.takers(plan, source) if t != source]
        answers = await asyncio.gather(*(
            self.call(t, "handoff_fence", routing, source, session) for t in targets
        ))
        for target, answer in zip(targets, answers, strict=True):
            if answer["error"] != "NONE":
                # A target fenced a session this plan did not number (a full restart lost the
                # numbers): the next one goes past it.
                plan.sessions[source] = max(plan.sessions.get(source, 0), int(answer.get("session", 0)))
                return f"fence at {target}: {answer['error']} {answer['detail']}"
        return None

    async def new_session(self, plan: Plan, source: int) -> int:
        """The next copy session of `source`, persisted before any target sees it."""
        plan.sessions[source] = plan.sessions.get(source, 0) + 1
        await self.plane._persist()
        return plan.sessions[source]

    @staticmethod
    def takers(plan: Plan, source: int) -> list[int]:
        """`source` and the partitions its groups go to."""
        if plan.count > plan.previous:
            return [source + k * plan.previous for k in range(plan.count // plan.previous)]
        return [source, source % plan.count]

    async def call(self, partition: int, method: str, *args: Any, quiet: bool = False) -> Any:
        handle = self.plane._routed(partition)
        if handle is None:
            if quiet:
                return None
            raise ClusterError(f"partition {partition} has no leader now")
        try:
            return await self.plane.cluster.call(handle, method, *args, timeout_s=STEP_TIMEOUT_S)
        except (ClusterError, ValueError):
            if quiet:
                return None
            raise
        except AttributeError as exc:  # a Ray handle of an older version: the attempt fails, retried
            raise CallFailed(f"{method}: partition {partition}'s leader has no such method") from exc

    # ------------------------------------------------------------ routing pushes

    async def push_routing(self, partitions: list[int] | None = None) -> bool:
        """Tell leaders the current routing (they own groups by it, and record it); True
        when every one answered. A leader that missed it is told again when its probe
        shows another routing."""
        encoded = self.routing().encode()
        targets = range(self.plane.state.num_partitions) if partitions is None else partitions
        answers = await asyncio.gather(*(self.call(p, "set_routing", encoded, quiet=True) for p in targets))
        return all(answer is not None for answer in answers)

    def needs_push(self, partition: int, probe: dict[str, Any]) -> bool:
        """A leader whose probe shows it owns by another routing than the current one."""
        routing = self.routing()
        if routing.version == 0:
            return False  # never repartitioned: every shard owns what it is sent
        return probe.get("routing") != routing.encode().decode("ascii")

    def status(self) -> dict[str, Any]:
        plan = self.plane.state.plan
        routing = self.routing()
        row: dict[str, Any] = {
            "partitions": routing.count, "version": routing.version, "running": plan is not None,
        }
        if plan is not None:
            row.update(previous=plan.previous, switched=len(plan.switched), sources=plan.previous)
        elif self.timings:
            row.update(self.timings)
        return row
