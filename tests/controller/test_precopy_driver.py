"""The controller's pre-copy driver (actors/controller/precopy.py) over leaders built from the
partition actor's own handoff part and runtime, without Ray: a source's groups copied while
it serves, a commit during the copy carried by the last delta, the fenced handoff for a
small source or a leader without the pre-copy methods, and a failed admit retried with a
new session."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from actors.controller.cluster_view import Unreachable
from actors.controller.repartition import Plan, Repartitioner
from actors.partition.handoff import HandoffPart
from coordinator import precopy_target
from coordinator.errors import Errors
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from coordinator.records import OffsetCommitKey
from coordinator.runtime import PartitionRuntime
from coordinator.shard import Shard

from tests.controller.helpers import make_settings
from tests.core.harness import Harness
from tests.core.test_handoff import groups_on


class Answer:
    def __init__(self) -> None:
        self.got: list[Any] = []
        self.deliver = self.got.append


class Leader:
    """A partition leader's handoff methods over a runtime whose log is durable at once."""

    def __init__(self, shard: Shard, precopy: bool = True, log: list[Any] | None = None) -> None:
        self.runtime = PartitionRuntime(shard.partition)
        self.runtime.begin_load()
        self.runtime.on_loaded(shard, 0, 0)
        self.shard, self.log, self.written = shard, list(log or ()), 0
        self.part = HandoffPart(lambda: self.runtime, self.deliver, lambda: 0, self._record)
        self.calls: list[str] = []
        if precopy:  # (a replica of the version before pre-copy has none of these)
            for method in ("begin", "round", "export", "confirm", "admit", "switch"):
                setattr(self, f"precopy_{method}", getattr(self.part, f"precopy_{method}"))
        self.handoff_fence = self.part.fence
        self.handoff_export, self.handoff_admit = self.part.export, self.part.admit
        self.handoff_switch, self.handoff_abort = self.part.switch, self.part.abort

    async def _record(self) -> None:
        return None

    def deliver(self, released: Any) -> None:
        for token, answer in released:
            token.deliver(answer)
        if batch := self.runtime.take_batch():
            self.log += batch
            self.written += len(batch)
            self.deliver(self.runtime.on_durable(self.written, self.runtime.incarnation))

    def commit(self, group: str, offset: int) -> Errors:
        answer = Answer()
        request = OffsetCommitRequest(group, (OffsetCommitPartition("t", 0, offset),))
        self.deliver(self.runtime.submit(request, answer, 0))
        return answer.got[0].errors()[("t", 0)]  # type: ignore[no-any-return]

    async def info(self) -> dict[str, Any]:
        return {"groups": len(self.shard.groups)}

    async def set_routing(self, routing: bytes) -> int | None:
        return await self.part.route(routing)


class Plane:
    """What the repartitioner asks of the control plane: its leaders, settings, saves."""

    def __init__(self, leaders: dict[int, Leader], plan: Plan, precopy_min_groups: int) -> None:
        self.leaders = leaders
        self.settings = make_settings(num_partitions=plan.previous, precopy_min_groups=precopy_min_groups)
        self.state = SimpleNamespace(plan=plan, num_partitions=plan.previous, routing_version=plan.version)
        self.cluster = self
        self.saved = 0
        self.fail: set[str] = set()  # methods whose next call fails once

    def _routed(self, partition: int) -> Leader | None:
        return self.leaders.get(partition)

    async def _persist(self) -> None:
        self.saved += 1

    async def call(self, handle: Leader, method: str, *args: Any, timeout_s: float) -> Any:
        handle.calls.append(method)
        if method in self.fail:
            self.fail.discard(method)
            raise Unreachable(f"{method}: no answer")
        return await getattr(handle, method)(*args)


def grow(moving: int = 4, staying: int = 2, **kw: Any) -> tuple[Plane, Leader, Leader, list[str]]:
    """Partition 0 of 1 growing to 2: its leader and partition 1's, both serving the plan."""
    h = Harness()
    moves, stays = groups_on(1, 2, moving), groups_on(0, 2, staying)
    for group in moves + stays:
        h.commit(group, {("t", 0): 1, ("t", 1): 2})
    precopy = kw.pop("precopy", True)
    source, target = Leader(h.shard, log=h.log), Leader(Shard(h.shard.config, partition=1), precopy)
    plan = Plan(1, 1, 2)
    plane = Plane({0: source, 1: target}, plan, **kw)
    for leader in (source, target):
        asyncio.run(leader.set_routing(plan.routing().encode()))
    return plane, source, target, moves


def hand_off(plane: Plane) -> Repartitioner:
    repartitioner = Repartitioner(plane)  # type: ignore[arg-type]
    plan = plane.state.plan
    asyncio.run(asyncio.wait_for(repartitioner._hand_off(plan, 0), 30))
    return repartitioner


def test_a_big_source_is_copied_while_it_serves_and_frozen_for_the_last_delta() -> None:
    plane, source, target, moves = grow(precopy_min_groups=1)
    confirm = source.part.precopy_confirm
    written: list[Errors] = []

    async def confirm_then_commit(session: int, page: int) -> dict[str, Any]:
        answer = await confirm(session, page)
        if not written:  # a commit after the first page's copy: dirty again, in the delta
            written.append(source.commit(moves[0], 99))
        return answer

    source.precopy_confirm = confirm_then_commit  # type: ignore[attr-defined]
    repartitioner = hand_off(plane)
    assert written == [Errors.NONE], "served while copied"
    assert plane.state.plan.switched == [0] and plane.state.plan.sessions == {0: 1}
    assert "handoff_export" not in source.calls, "the pre-copy, not the fenced handoff"
    assert repartitioner.steps["copy_rounds"] == 1, "one round, then a freeze"
    view = target.shard.persistent_view()
    assert {g: view[g] for g in moves} == {g: _view(source, g) for g in moves}
    assert view[moves[0]][1][_key(moves[0])].offset == 99, "the commit during the copy arrived"
    assert not target.shard.copies, "owned once pushed the routing"
    assert source.commit(moves[1], 5) is Errors.NOT_COORDINATOR and target.commit(moves[1], 5) is Errors.NONE


def test_a_small_source_or_a_leader_without_the_methods_is_handed_off_the_fenced_way() -> None:
    for kw in ({"precopy_min_groups": 100}, {"precopy_min_groups": 1, "precopy": False},
               {"precopy_min_groups": 0}):
        plane, source, target, moves = grow(**kw)
        hand_off(plane)
        assert "handoff_export" in source.calls and "precopy_begin" not in source.calls, kw
        admit = "precopy_admit" if kw.get("precopy", True) else "handoff_admit"
        assert admit in target.calls, "an admit checked against the fenced session where it can be"
        assert plane.state.plan.switched == [0] and set(moves) <= set(target.shard.groups)
        assert precopy_target.fenced(target.shard, 0) == (1, 1), "the fenced handoff fences too"


def test_a_failed_admit_abandons_the_session_and_the_next_one_copies_everything_again() -> None:
    plane, source, target, moves = grow(precopy_min_groups=1)
    plane.fail.add("precopy_admit")
    hand_off(plane)
    assert plane.state.plan.switched == [0] and plane.state.plan.sessions == {0: 2}
    assert precopy_target.fenced(target.shard, 0) == (1, 2)
    assert set(moves) <= set(target.shard.groups) and not target.shard.copies
    assert source.shard.copying is None


def _key(group: str) -> OffsetCommitKey:
    return OffsetCommitKey(group, "t", 0)


def _view(source: Leader, group: str) -> Any:
    """What the source's log says of `group` (its moved groups are released from memory)."""
    replayed = Shard(source.shard.config)
    replayed.replay_many(record for record in source.log if record.key.group_id == group)
    return replayed.persistent_view()[group]


def test_a_source_that_lost_its_session_or_a_failed_freeze_is_copied_again_with_a_new_one() -> None:
    """A new source leader knows no session (its tracker died with the old one): the driver
    begins a new session. A final admit that fails in the freeze: the groups are served
    again (aborted), and the next session copies and switches them."""
    plane, source, target, moves = grow(precopy_min_groups=1)
    confirm = source.part.precopy_confirm

    async def confirm_then_lose(session: int, page: int) -> dict[str, Any]:
        answer = await confirm(session, page)
        if session == 1:
            source.shard.copying = None  # as a failover leaves it
        return answer

    source.precopy_confirm = confirm_then_lose  # type: ignore[attr-defined]
    hand_off(plane)
    assert plane.state.plan.sessions == {0: 2} and set(moves) <= set(target.shard.groups)

    plane, source, target, moves = grow(precopy_min_groups=1)
    admit, rounds = target.part.precopy_admit, []
    served: list[Errors] = []

    async def admit_failing_in_the_freeze(*args: Any) -> dict[str, Any]:
        if source.shard.frozen is not None and not rounds:
            rounds.append(args)
            raise Unreachable("precopy_admit: no answer")
        return await admit(*args)

    async def abort() -> dict[str, Any]:
        answer = await source.part.abort()
        served.append(source.commit(moves[0], 41))
        return answer

    confirm = source.part.precopy_confirm

    async def confirm_then_commit(session: int, page: int) -> dict[str, Any]:
        answer = await confirm(session, page)
        if session == 1 and source.shard.frozen is None:
            source.commit(moves[1], 40)  # a delta for the freeze
        return answer

    source.precopy_confirm = confirm_then_commit  # type: ignore[attr-defined]
    target.precopy_admit = admit_failing_in_the_freeze  # type: ignore[attr-defined]
    source.handoff_abort = abort  # type: ignore[method-assign]
    hand_off(plane)
    assert served == [Errors.NONE], "served again once the freeze was aborted"
    assert rounds and plane.state.plan.sessions == {0: 2}, "the freeze's admit failed once"
    assert target.shard.groups[moves[0]].offsets[_key(moves[0])].offset == 41
    assert target.shard.groups[moves[1]].offsets[_key(moves[1])].offset == 40


def test_a_fenced_handoffs_late_admit_of_an_abandoned_attempt_changes_nothing() -> None:
    """An admit of an attempt that timed out runs after the next attempt's fence and admits:
    refused (its session is not the fenced one), so it never overwrites the newer copy."""
    plane, source, target, moves = grow(precopy_min_groups=100)
    late: list[tuple[Any, ...]] = []
    refused: list[dict[str, Any]] = []
    admit, switch = target.part.precopy_admit, source.part.switch

    async def admit_timing_out_once(*args: Any) -> dict[str, Any]:
        if not late:
            late.append(args)
            raise Unreachable("precopy_admit: no answer")
        return await admit(*args)

    async def late_admit_then_switch(routing: bytes) -> dict[str, Any]:
        view = target.shard.persistent_view()
        refused.append(await admit(*late[0]))  # the first attempt's, run only now
        assert target.shard.persistent_view() == view, "the late admit changed nothing"
        return await switch(routing)

    target.precopy_admit = admit_timing_out_once  # type: ignore[attr-defined]
    source.handoff_switch = late_admit_then_switch  # type: ignore[method-assign]
    hand_off(plane)
    assert plane.state.plan.sessions == {0: 2} and plane.state.plan.switched == [0]
    assert [(a["error"], a["detail"]) for a in refused] == [
        ("FENCED_LEADER_EPOCH", "not the fenced copy session of partition 0")
    ]
