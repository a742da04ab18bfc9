"""Rolling restart: the pure decisions (`coordinator.replication.rolling`) on plain data, and
the controller's driver (`actors.controller.rolling`) on the fake cluster: one node at a
time, leadership off it first, never below min ISR, new actors with the new runtime_env and
settings, back in the ISR before the next node; faults waited out with the status saying
for what (a partition below min ISR, a node killed mid-roll that returns or is lost for
good) and the roll going on by itself; stopped for good only by replicas that do not come
back on a healthy cluster (a bad runtime_env) or an operator's stop; resumed by a
restarted controller."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from actors.controller.repartition import Plan, RepartitionRefused
from actors.controller.replicas import ReplicatedPlane
from actors.controller.rolling import CATCH_UP_TIMEOUT_S, IMPORTED_VERSION, RollRefused
from actors.core.metrics import ControllerMetrics
from coordinator.replication import IsrChange, IsrChangeKind
from coordinator.replication.rolling import (
    DONE,
    GATEWAY_TRIES,
    GATEWAYS,
    PartitionView,
    RollPlan,
    behind,
    catching_up,
    gateway_failed,
    leadership_moves,
    refusal,
    roll_order,
)

from tests.controller.fake import FakeActor, FakeCluster, ManualClock, MemoryStore
from tests.controller.helpers import make_settings, run

# ------------------------------------------------------------------ pure decisions

VIEWS = {
    0: PartitionView(("a", "b", "c"), ("a", "b", "c"), "a"),
    1: PartitionView(("b", "c", "a"), ("b", "c", "a"), "b"),
    2: PartitionView(("a", "c", "b"), ("a", "c", "b"), "a"),
}


def test_order_puts_the_nodes_leading_fewest_first() -> None:
    assert roll_order(VIEWS) == ["c", "b", "a"]


def test_refusal_names_the_partition_that_would_fall_below_min_isr() -> None:
    assert refusal("a", VIEWS, 2) is None
    shrunk = {**VIEWS, 1: PartitionView(("b", "c", "a"), ("b", "a"), "b")}
    assert refusal("c", shrunk, 2) is None  # c is out of partition 1's ISR already
    why = refusal("a", shrunk, 2)
    assert why is not None and why.startswith("partition 1:") and "below min ISR 2" in why
    assert refusal("a", {0: PartitionView(("a", "b"), ("a", "b"), None)}, 1) == "partition 0 has no leader"
    held = refusal("b", {0: PartitionView(("a", "b"), ("a", "b"), "a", held=True)}, 1)
    assert held is not None and "held" in held


def test_a_node_waits_while_another_replica_of_its_partitions_is_out_of_the_isr() -> None:
    assert catching_up("a", VIEWS) is None
    recreated = {**VIEWS, 1: PartitionView(("b", "d", "a"), ("b", "a"), "b")}  # d replaces c
    why = catching_up("a", recreated)
    assert why is not None and why.startswith("partition 1: replica(s) on d not in its ISR")
    assert catching_up("d", recreated) is None  # its own replica catching up is no reason
    assert catching_up("c", recreated) is None  # c holds none of partition 1 any more


def test_leadership_goes_to_the_first_other_isr_member_in_assignment_order() -> None:
    assert leadership_moves("a", VIEWS) == {0: "b", 2: "c"}
    partial = {0: PartitionView(("a", "b", "c"), ("a", "c"), "a")}
    assert leadership_moves("a", partial) == {0: "c"}
    assert leadership_moves("c", VIEWS) == {}


def test_behind_lists_partitions_whose_isr_lacks_the_node() -> None:
    views = {**VIEWS, 2: PartitionView(("a", "c", "b"), ("a", "c"), "a")}
    assert behind("b", views) == [2]
    assert behind("a", views) == []


def test_plan_round_trips_and_walks_its_phases() -> None:
    plan = RollPlan(3, ["c", "b"], {"pip": ["x"]}, {"commit_timeout_ms": 7000})
    plan.restarted = "c"
    assert RollPlan.from_json(plan.to_json()) == plan
    plan.finish_node("c")
    assert (plan.restarted, plan.next_node(), plan.phase) == (None, "b", "replicas")
    plan.finish_node("b")
    assert plan.phase == "controller"
    plan.advance()
    plan.advance()
    assert plan.phase == GATEWAYS
    plan.finish_gateway("gw-b")
    assert RollPlan.from_json(plan.to_json()) == plan
    # Saved as the registry step for the release before, which knows no gateways phase.
    assert plan.to_json()["phase"] == "registry"
    plan.advance()
    assert plan.phase == DONE
    with pytest.raises(ValueError, match="phase"):
        RollPlan.from_json({**plan.to_json(), "phase": "sideways"})
    older = {k: v for k, v in plan.to_json().items() if k != "gateways_done"}  # saved before gateways
    assert RollPlan.from_json(older).gateways_done == []


def test_gateways_go_one_at_a_time_by_name_each_once() -> None:
    plan = RollPlan(1, ["a"], phase=GATEWAYS)
    assert plan.next_gateway(["gw-c", "gw-a", "gw-b"]) == "gw-a"
    plan.finish_gateway("gw-a")
    plan.finish_gateway("gw-a")  # a resumed step records it once
    assert plan.gateways_done == ["gw-a"]
    # gw-b is gone meanwhile (its node left): not waited for; gw-d deployed meanwhile: rolled.
    assert plan.next_gateway(["gw-a", "gw-c", "gw-d"]) == "gw-c"
    plan.finish_gateway("gw-c")
    assert plan.next_gateway(["gw-a", "gw-c", "gw-d"]) == "gw-d"
    plan.finish_gateway("gw-d")
    assert plan.next_gateway(["gw-a", "gw-c", "gw-d"]) is None
    assert plan.next_gateway([]) is None


def test_a_gateway_that_keeps_failing_stops_the_roll_naming_it() -> None:
    assert all(gateway_failed("gw-a", tries, "port taken") is None for tries in range(1, GATEWAY_TRIES))
    why = gateway_failed("gw-a", GATEWAY_TRIES, "port taken")
    assert why is not None and why.startswith(f"gateway gw-a not serving again after {GATEWAY_TRIES} tries")
    assert "port taken" in why and "--resume" in why


# ------------------------------------------------------------------ the driver, fake cluster


def make(cluster: FakeCluster, store: MemoryStore, **overrides: Any) -> ReplicatedPlane:
    values = {"replication_factor": 3, "min_insync_replicas": 2, **overrides}
    return ReplicatedPlane(make_settings(**values), cluster, store, ControllerMetrics(), "ctl", ManualClock())


Hold = Callable[[FakeActor], bool]


def never(_actor: FakeActor) -> bool:
    return False


async def admit_followers(plane: ReplicatedPlane, hold: Callable[[], Hold]) -> None:
    """Each leader admits a follower back into the ISR once it follows (a caught-up
    follower, as `coordinator.replication.leader` proposes), except the actors `hold()`
    holds back (lagging, or new code that does not serve)."""
    while True:
        for partition, meta in plane.state.partitions.items():
            actors = plane.handles.get(partition, {})
            lead = actors.get(meta.leader) if meta.leader else None
            following = [
                n for n in meta.replicas
                if n in actors and actors[n].role == "follower" and not hold()(actors[n])
            ]
            missing = [n for n in following if n not in meta.isr]
            if lead is None or lead.role != "leader" or not missing:
                continue
            isr = tuple(n for n in meta.replicas if n in meta.isr or n in missing)
            change = IsrChange(IsrChangeKind.EXPAND, isr, lead.node, lead.epoch, lead.partition_epoch)
            await plane.alter_isr(partition, change)
        await plane.watch_once()
        await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def admitting(plane: ReplicatedPlane, hold: Callable[[], Hold] = lambda: never) -> AsyncIterator[None]:
    """`admit_followers` running meanwhile."""
    helper = asyncio.get_running_loop().create_task(admit_followers(plane, hold))
    try:
        yield
    finally:
        helper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await helper


async def until_idle(plane: ReplicatedPlane) -> dict[str, Any]:
    """The roll's status once it is done or stopped."""
    await until(lambda: not plane.rolling.status()["running"])
    return plane.rolling.status()


async def rolled(plane: ReplicatedPlane, **start: Any) -> dict[str, Any]:
    """Start a roll and drive the cluster until it is done or stopped; its status."""
    async with admitting(plane):
        await plane.rolling.start(start.get("runtime_env"), start.get("settings", {}))
        return await until_idle(plane)


async def ready(cluster: FakeCluster | None = None) -> tuple[FakeCluster, MemoryStore, ReplicatedPlane]:
    cluster, store = cluster or FakeCluster(), MemoryStore()
    plane = make(cluster, store)
    plane.rolling.wait_s = 0.005
    await plane.start()
    await plane.watch_once()
    await plane.settle()
    return cluster, store, plane


async def until(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Wait for `condition` (the fake cluster settles in milliseconds; the bound only turns
    a roll that never gets there into a failure)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition never held"
        await asyncio.sleep(0.005)


def test_every_replica_restarts_one_node_at_a_time_with_the_new_code_and_settings() -> None:
    async def scenario() -> None:
        cluster, store, plane = await ready()
        cluster.live["raygroups-topics"] = FakeActor(cluster, "raygroups-topics", -1, 0, "n1")
        before = {name for name, a in cluster.live.items() if a.partition >= 0}
        isr_sizes: list[int] = []
        original = plane._commit

        async def watched(partition: int, new: Any, reason: str) -> None:
            isr_sizes.append(len(new.isr))
            await original(partition, new, reason)

        plane._commit = watched  # type: ignore[method-assign]
        killed_roles: list[str] = []
        kill = cluster.kill

        def watched_kill(handle: FakeActor) -> None:
            killed_roles.append(handle.role)
            kill(handle)

        cluster.kill = watched_kill  # type: ignore[method-assign]
        env = {"pip": ["raygroups==9.9"]}
        status = await rolled(plane, runtime_env=env, settings={"commit_timeout_ms": 7000})
        assert status["phase"] == DONE and status["stopped"] is None
        assert status["nodes_done"] == 3
        after = {name: a for name, a in cluster.live.items() if a.partition >= 0}
        assert not before & set(after)  # every replica is a new actor
        assert all(a.runtime_env == env and a.settings.commit_timeout_ms == 7000 for a in after.values())
        assert min(isr_sizes) >= 2  # never below min ISR
        assert all(len(m.isr) == 3 and m.leader is not None for m in plane.state.partitions.values())
        # Leadership left each node before its replicas were killed: no kill of a leader.
        assert len(killed_roles) == 9 and set(killed_roles) == {"follower"}
        assert cluster.restarted == ["raygroups-topics"]  # in place, after every replica
        await until(lambda: store.data is not None and store.data["rolling_restart"]["phase"] == DONE)
        [row] = await plane.describe_settings(["commit_timeout_ms"])  # type: ignore[misc]
        assert (row["value"], row["start"], row["set_by"]) == (7000, 5000, "rolling-restart 1")
        assert status["controller_version"] == IMPORTED_VERSION and IMPORTED_VERSION

    run(scenario())


def test_refused_at_start_when_a_partition_would_fall_below_min_isr() -> None:
    async def scenario() -> None:
        _cluster, _store, plane = await ready()
        node = roll_order(plane.rolling.views())[0]
        partition, meta = next((p, m) for p, m in plane.state.partitions.items() if node in m.replicas)
        other = next(n for n in meta.replicas if n != node)
        meta.isr = [node, other]  # without `node`, one in-sync replica: below min ISR 2
        meta.leader = other
        with pytest.raises(RollRefused, match=f"not now: partition {partition}: .* below min ISR 2"):
            await plane.rolling.start(None, {"commit_timeout_ms": 7000})
        assert plane.state.roll is None

    run(scenario())


def test_fixed_or_unknown_settings_are_refused_with_the_reason() -> None:
    async def scenario() -> None:
        _cluster, _store, plane = await ready()
        with pytest.raises(RollRefused, match="replication_factor never changes"):
            await plane.rolling.start(None, {"replication_factor": 5})
        with pytest.raises(RollRefused, match="unknown setting"):
            await plane.rolling.start(None, {"no_such_key": 1})
        with pytest.raises(RollRefused, match="must be a int"):
            await plane.rolling.start(None, {"commit_timeout_ms": "soon"})
        assert plane.state.roll is None

    run(scenario())


def test_waits_while_a_partition_would_fall_below_min_isr_and_goes_on_by_itself() -> None:
    async def scenario() -> None:
        # 4 nodes, RF 3: a partition without the first node to roll lags on another of its
        # replicas, so the roll passes the first node and waits before that partition's.
        cluster, _store, plane = await ready(FakeCluster(nodes=["n1", "n2", "n3", "n4"]))
        order = roll_order(plane.rolling.views())
        partition, meta = next(
            (p, m) for p, m in plane.state.partitions.items() if order[0] not in m.replicas
        )
        laggard = next(n for n in meta.replicas if n != meta.leader)
        meta.isr = [n for n in meta.isr if n != laggard]
        lagging = {meta.names[laggard]}
        async with admitting(plane, lambda: lambda a: a.name in lagging):
            await plane.rolling.start(None, {})
            await until(lambda: "below min ISR 2" in (plane.rolling.status()["waiting"] or ""))
            status = plane.rolling.status()
            assert status["running"] and status["paused"] and status["stopped"] is None
            assert status["waiting"].startswith(f"partition {partition}:")
            plan = plane.state.roll
            assert plan is not None and order[0] in plan.done and plan.restarted is None
            stopped_at = plan.next_node()
            assert stopped_at in meta.replicas and stopped_at != laggard  # the laggard's own exit is fine
            # The laggard catches up: the roll goes on by itself, nobody resumes it.
            lagging.clear()
            status = await until_idle(plane)
        assert status["phase"] == DONE and sorted(status["done"]) == sorted(order)
        assert status["waiting"] is None and not status["paused"]

    run(scenario())


def test_a_node_killed_mid_roll_pauses_it_until_the_node_returns() -> None:
    async def scenario() -> None:
        cluster, _store, plane = await ready()
        order = roll_order(plane.rolling.views())
        first = order[0]
        # The first node's new replicas are held back from the ISR until the test lets go.
        held = {first}
        async with admitting(plane, lambda: lambda a: a.node in held):
            await plane.rolling.start({"env_vars": {"V": "2"}}, {})
            await until(lambda: plane.state.roll is not None and plane.state.roll.restarted == first)
            await until(lambda: (plane.rolling.status()["waiting"] or "").startswith(f"replicas on {first}"))
            assert not plane.rolling.status()["paused"]  # catching up is no fault
            cluster.remove_node(first)  # killed while its replicas catch up
            await until(lambda: plane.rolling.status()["paused"])
            status = plane.rolling.status()
            assert status["waiting"].startswith(f"node {first} is not live") and status["running"]
            plane.clock.advance(CATCH_UP_TIMEOUT_S + 1)  # type: ignore[attr-defined]
            await asyncio.sleep(0.05)
            assert plane.rolling.status()["stopped"] is None  # a node down is no reason to stop
            # The node returns: the controller restarts its replicas, they catch up, the roll goes on.
            cluster.nodes.append(first)
            held.clear()
            status = await until_idle(plane)
        assert status["phase"] == DONE and status["stopped"] is None
        assert sorted(status["done"]) == sorted(order)
        news = [a for a in cluster.live.values() if a.partition >= 0]
        assert len(news) == 9 and all(a.runtime_env == {"env_vars": {"V": "2"}} for a in news)
        assert all(len(m.isr) == 3 for m in plane.state.partitions.values())

    run(scenario())


def test_a_node_lost_for_good_is_done_once_its_replicas_moved_elsewhere() -> None:
    async def scenario() -> None:
        cluster, _store, plane = await ready(FakeCluster(nodes=["n1", "n2", "n3", "n4"]))
        order = roll_order(plane.rolling.views())
        lost = order[0]
        async with admitting(plane):
            await plane.rolling.start({"env_vars": {"V": "3"}}, {})
            cluster.remove_node(lost)  # before its turn: the roll waits for it
            await until(lambda: f"node {lost} is not live" in (plane.rolling.status()["waiting"] or ""))
            # It never returns: after replica_reassign_delay_s its replicas move to other nodes.
            plane.clock.advance(plane.settings.replica_reassign_delay_s + 1)  # type: ignore[attr-defined]
            status = await until_idle(plane)
        assert status["phase"] == DONE and status["stopped"] is None and lost in status["done"]
        assert all(lost not in m.replicas and len(m.isr) == 3 for m in plane.state.partitions.values())
        news = [a for a in cluster.live.values() if a.partition >= 0]
        assert all(a.runtime_env == {"env_vars": {"V": "3"}} for a in news)

    run(scenario())


def test_replicas_that_do_not_come_back_on_a_healthy_cluster_stop_it_for_good() -> None:
    async def scenario() -> None:
        cluster, _store, plane = await ready()
        broken = {"pip": ["raygroups==broken"]}
        async with admitting(plane, lambda: lambda a: a.runtime_env == broken):
            await plane.rolling.start(broken, {"commit_timeout_ms": 7000})
            with pytest.raises(RollRefused, match="under way"):
                await plane.rolling.start(None, {})
            first = plane.state.roll.nodes[0]  # type: ignore[union-attr]
            await until(lambda: (plane.rolling.status()["waiting"] or "").startswith(f"replicas on {first}"))
            plane.clock.advance(CATCH_UP_TIMEOUT_S + 1)  # type: ignore[attr-defined]
            status = await until_idle(plane)
            assert status["stopped"].startswith(f"replicas on {first} not back in the ISR")
            assert "a new rolling-restart replaces this one" in status["stopped"]
            assert not status["running"] and status["waiting"] is None
            await plane.watch_once()  # the controller's rounds do not resume it
            assert plane.rolling.status()["stopped"] is not None
            # A person gives working code: a new roll replaces the stopped one.
            await plane.rolling.start({"pip": ["raygroups==fixed"]}, {})
            status = await until_idle(plane)
        assert status["version"] == 2 and status["phase"] == DONE
        assert status["settings"] == {"commit_timeout_ms": 7000}  # settings carry over
        news = [a for a in cluster.live.values() if a.partition >= 0]
        assert all(a.runtime_env == {"pip": ["raygroups==fixed"]} for a in news)

    run(scenario())


def test_an_operator_stop_holds_until_resumed() -> None:
    async def scenario() -> None:
        cluster, _store, plane = await ready()
        with pytest.raises(RollRefused, match="no rolling restart under way"):
            await plane.rolling.stop()
        order = roll_order(plane.rolling.views())
        async with admitting(plane):
            await plane.rolling.start(None, {})
            cluster.remove_node(order[0])
            await until(lambda: plane.rolling.status()["paused"])
            status = await plane.rolling.stop()
            assert status["stopped"].startswith("stopped by an operator") and not status["running"]
            cluster.nodes.append(order[0])  # healthy again: a stopped roll stays stopped
            await until(lambda: all(len(m.isr) == 3 for m in plane.state.partitions.values()))
            await plane.watch_once()
            await asyncio.sleep(0.05)
            assert plane.state.roll is not None and plane.state.roll.done == []
            await plane.rolling.resume_stopped()
            status = await until_idle(plane)
        assert status["phase"] == DONE and status["stopped"] is None

    run(scenario())


def test_a_restarted_controller_resumes_the_roll_from_its_metadata() -> None:
    async def scenario() -> None:
        cluster, store, plane = await ready()
        await plane.rolling.start({"env_vars": {"V": "2"}}, {"commit_timeout_ms": 9000})
        async with admitting(plane):
            await until(lambda: bool(plane.state.roll.done))  # type: ignore[union-attr]
        assert plane.rolling._task is not None
        plane.rolling._task.cancel()
        for task in plane._loops:
            task.cancel()
        # A new controller over the same store and cluster.
        successor = make(cluster, store)
        await successor.start()
        assert successor.settings.commit_timeout_ms == 9000
        async with admitting(successor):
            status = await until_idle(successor)
        assert status["phase"] == DONE and len(status["done"]) == 3
        news = [a for a in cluster.live.values() if a.partition >= 0]
        assert all(a.runtime_env == {"env_vars": {"V": "2"}} for a in news)

    run(scenario())


def test_the_controller_ends_its_process_and_its_restart_finishes_the_roll() -> None:
    async def scenario() -> None:
        cluster, store, plane = await ready()
        cluster.live["raygroups-topics"] = FakeActor(cluster, "raygroups-topics", -1, 0, "n1")
        exits: list[int] = []
        plane.rolling.exit_process = lambda: exits.append(1)
        async with admitting(plane):
            await plane.rolling.start(None, {"replica_lag_time_max_ms": 20000})
            await until(lambda: bool(exits))
        assert plane.state.roll is not None and plane.state.roll.phase == "controller"
        assert store.data is not None and store.data["rolling_restart"]["phase"] == "controller"
        assert cluster.restarted == []  # the registry waits for the controller's restart
        for task in plane._loops:
            task.cancel()
        # Ray restarts the actor: a new controller over the same metadata.
        restarted = make(cluster, store)
        await restarted.start()
        assert restarted.settings.replica_lag_time_max_ms == 20000
        status = await until_idle(restarted)
        assert status["phase"] == DONE and cluster.restarted == ["raygroups-topics"]

    run(scenario())


def test_a_roll_and_a_repartition_never_run_together() -> None:
    async def scenario() -> None:
        _cluster, _store, plane = await ready()
        async with admitting(plane):
            await plane.rolling.start(None, {})
            with pytest.raises(RepartitionRefused, match="rolling restart 1 is under way"):
                await plane.repartition.start(6)
            await until_idle(plane)
        plane.state.plan = Plan(1, 3, 6)
        with pytest.raises(RollRefused, match="repartition 1 is under way"):
            await plane.rolling.start(None, {})

    run(scenario())


def test_the_balance_loop_leaves_leadership_alone_while_a_roll_runs() -> None:
    async def scenario() -> None:
        _cluster, _store, plane = await ready()
        moved: list[tuple[Any, ...]] = []

        async def reassign(*args: Any) -> int:
            moved.append(args)
            return 0

        partition, meta = next(iter(plane.state.partitions.items()))
        meta.leader = next(n for n in meta.replicas if n != meta.replicas[0])  # not the preferred
        plane.state.roll = RollPlan(1, ["n1"])
        plane.reassign = reassign  # type: ignore[method-assign]
        await plane.balance_once()
        assert moved == []
        plane.state.roll.stopped = "node n1 is not live"
        await plane.balance_once()
        assert moved and moved[0][0] == partition

    run(scenario())


def test_the_gateways_are_replaced_one_at_a_time_after_the_registry_with_the_new_code() -> None:
    async def scenario() -> None:
        cluster, store, plane = await ready()
        cluster.live["raygroups-topics"] = FakeActor(cluster, "raygroups-topics", -1, 0, "n1")
        cluster.attached = {"raygroups-gateway-b": None, "raygroups-gateway-a": None,
                            "raygroups-gateway-c": None}
        cluster.gone = {"raygroups-gateway-c"}  # its node left: nothing to replace
        cluster.gateway_failures = {"raygroups-gateway-b": GATEWAY_TRIES - 1}  # then it serves
        env = {"env_vars": {"V": "4"}}
        status = await rolled(plane, runtime_env=env)
        assert status["phase"] == DONE and status["stopped"] is None
        assert cluster.replaced == ["raygroups-gateway-a", "raygroups-gateway-b"]
        assert cluster.attached["raygroups-gateway-a"] == env == cluster.attached["raygroups-gateway-b"]
        assert status["gateways_done"] == ["raygroups-gateway-a", "raygroups-gateway-b",
                                           "raygroups-gateway-c"]
        # After every replica and the registry; each tried until it serves before the next.
        events = [e for e in cluster.events if e[0] in ("create", "replace")]
        first = events.index(("replace", "raygroups-gateway-a"))
        assert all(kind == "replace" for kind, _ in events[first:])
        assert [name for _, name in events[first:]] == (
            ["raygroups-gateway-a"] + ["raygroups-gateway-b"] * GATEWAY_TRIES + ["raygroups-gateway-c"])
        assert cluster.restarted == ["raygroups-topics"]
        await until(lambda: store.data is not None and store.data["rolling_restart"]["phase"] == DONE)

    run(scenario())


def test_a_gateway_that_never_serves_stops_the_roll_and_resume_retries_it() -> None:
    async def scenario() -> None:
        cluster, _store, plane = await ready()
        cluster.attached = {"raygroups-gateway-a": None, "raygroups-gateway-b": None}
        cluster.gateway_failures = {"raygroups-gateway-b": GATEWAY_TRIES}
        status = await rolled(plane, runtime_env={"pip": ["raygroups==broken"]})
        assert status["phase"] == GATEWAYS and not status["running"]
        assert status["stopped"].startswith("gateway raygroups-gateway-b not serving again")
        assert status["gateways_done"] == ["raygroups-gateway-a"]
        await plane.rolling.resume_stopped()  # fixed meanwhile: b is tried again, a is not
        status = await until_idle(plane)
        assert status["phase"] == DONE and status["stopped"] is None
        assert cluster.replaced == ["raygroups-gateway-a", "raygroups-gateway-b"]

    run(scenario())
