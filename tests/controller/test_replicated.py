"""The replicated plane on the fake cluster: placement on distinct nodes, elections
only from the ISR, ISR changes committed before they are answered, restarts of
lost replicas, moves off a lost node, and a restarted controller that adopts."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from typing import Any

import pytest

from actors.controller.replicas import ReplicatedPlane
from actors.core.metrics import ControllerMetrics
from coordinator.errors import Errors
from coordinator.replication import IsrChange, IsrChangeKind

from tests.controller.fake import ControllerCrash, FakeActor, FakeCluster, ManualClock, MemoryStore
from tests.controller.helpers import make_settings, run, watch


def make_replicated(
    cluster: FakeCluster, store: MemoryStore, clock: ManualClock | None = None, **overrides: Any
) -> ReplicatedPlane:
    values = {"replication_factor": 3, "min_insync_replicas": 2, **overrides}
    return ReplicatedPlane(
        make_settings(**values), cluster, store, ControllerMetrics(), "the-controller", clock or ManualClock()
    )


async def started(
    cluster: FakeCluster | None = None, **overrides: Any
) -> tuple[FakeCluster, MemoryStore, ReplicatedPlane]:
    """A replicated plane (factor 3, min ISR 2) started on `cluster` (a new fake
    cluster when None) with a new store."""
    cluster, store = cluster or FakeCluster(), MemoryStore()
    plane = make_replicated(cluster, store, **overrides)
    await plane.start()
    return cluster, store, plane


def replicas(cluster: FakeCluster, partition: int) -> dict[str, FakeActor]:
    return {a.node: a for a in cluster.live.values() if a.partition == partition}


def leader(cluster: FakeCluster, partition: int) -> FakeActor:
    [actor] = [a for a in replicas(cluster, partition).values() if a.role == "leader"]
    return actor


def saved(store: MemoryStore, partition: int) -> dict[str, Any]:
    assert store.data is not None
    meta: dict[str, Any] = store.data["replication"][str(partition)]
    return {**meta, "leader_epoch": store.data["epochs"][str(partition)]}


def test_replicas_on_distinct_nodes_with_leaders_spread_and_roles_sent() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        leaders = []
        for p in range(3):
            actors = replicas(cluster, p)
            assert sorted(actors) == ["n1", "n2", "n3"]
            lead = leader(cluster, p)
            leaders.append(lead.node)
            assert lead.epoch == 1 and sorted(lead.isr) == ["n1", "n2", "n3"]
            assert lead.followers == {n: a for n, a in actors.items() if n != lead.node}
            assert all(
                a.role == "follower" and a.leader_node == lead.node for a in actors.values() if a is not lead
            )
            assert plane.routing()[1][p] is lead and plane.routing()[2][p] == 1
            meta = saved(store, p)
            assert meta["isr"] == meta["replicas"] and meta["leader"] == lead.node == meta["replicas"][0]
        assert sorted(leaders) == ["n1", "n2", "n3"]

    run(scenario())


def test_assignment_waits_for_enough_live_nodes() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(nodes=["n1", "n2"]), MemoryStore()
        plane = make_replicated(cluster, store)
        await plane.start()
        assert not cluster.live and plane.routing()[1] == [None, None, None]
        cluster.nodes.append("n3")
        await watch(plane, 2)
        assert all(sorted(replicas(cluster, p)) == ["n1", "n2", "n3"] for p in range(3))

    run(scenario())


def test_leader_node_lost_elects_the_next_isr_member_and_drops_the_lost_one() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        old = leader(cluster, 0)
        cluster.remove_node(old.node)
        await watch(plane)
        new = leader(cluster, 0)
        assert new.node != old.node and new.epoch == old.epoch + 1
        assert old.node not in new.isr and len(new.isr) == 2
        meta = saved(store, 0)
        assert (
            meta["leader"] == new.node and meta["leader_epoch"] == new.epoch and meta["isr"] == list(new.isr)
        )
        [follower] = [a for n, a in replicas(cluster, 0).items() if n != new.node]
        assert (
            follower.role == "follower" and follower.leader_node == new.node and follower.epoch == new.epoch
        )
        assert plane.routing()[1][0] is new
        assert plane.stats()["under_replicated"] == 3

    run(scenario())


def test_a_client_asking_for_the_routing_after_a_lost_leader_gets_the_elected_one() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        old = leader(cluster, 0)
        cluster.remove_node(old.node)
        # No watch round: the client's own request starts the check and waits for its outcome.
        routing = await plane.routing_after(0, old.epoch, 5.0)
        new = leader(cluster, 0)
        assert new.node != old.node and routing[1][0] is new and routing[2][0] == old.epoch + 1

    run(scenario())


def test_the_routing_never_pairs_a_new_epoch_with_the_lost_leader() -> None:
    """While an election is saved, the routing names no leader rather than the new
    epoch with the lost leader's handle (a client would retry the dead leader)."""

    async def scenario() -> None:
        cluster, store, plane = await started()
        old = leader(cluster, 0)
        seen: list[Any] = []
        save = store.save

        def save_and_look(data: dict[str, Any]) -> None:
            seen.append(plane.routing())  # mid-commit: the loop awaits this save
            save(data)

        store.save = save_and_look  # type: ignore[method-assign]
        cluster.remove_node(old.node)
        await watch(plane)
        during = [(r[1][0], r[2][0]) for r in seen if r[2][0] > old.epoch]
        assert during and all(handle is not old for handle, _ in during), during
        assert plane.routing()[1][0] is leader(cluster, 0)

    run(scenario())


def test_a_client_that_saw_an_election_without_its_leader_gets_the_leader_once_it_serves() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        old = leader(cluster, 0)
        release = asyncio.Event()
        for actor in replicas(cluster, 0).values():
            become_leader = actor.become_leader

            async def held(*args: Any, become_leader: Any = become_leader) -> Any:
                await release.wait()
                return await become_leader(*args)

            actor.become_leader = held  # type: ignore[method-assign]
        cluster.remove_node(old.node)
        first = asyncio.create_task(plane.routing_after(0, old.epoch, 30.0))  # starts the election
        while plane.routing()[2][0] == old.epoch:
            await asyncio.sleep(0)
        assert plane.routing()[1][0] is None  # elected, not serving yet
        # A client that got this routing asks for the routing after the new epoch.
        second = asyncio.create_task(plane.routing_after(0, old.epoch + 1, 30.0))
        await asyncio.sleep(0.05)
        release.set()
        # Answered once the leader serves, not after the 30 s wait.
        for routing in await asyncio.wait_for(asyncio.gather(first, second), 10.0):
            assert routing[1][0] is leader(cluster, 0) and routing[2][0] == old.epoch + 1

    run(scenario())


def test_dead_follower_leaves_the_isr_at_once_and_restarts_on_its_node() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        lead = leader(cluster, 0)
        victim = next(a for a in replicas(cluster, 0).values() if a is not lead)
        partition_epoch = lead.partition_epoch
        cluster.crash(victim)
        await watch(plane)
        assert leader(cluster, 0) is lead and lead.epoch == 1
        assert victim.node not in lead.isr
        assert lead.partition_epoch == saved(store, 0)["partition_epoch"] == partition_epoch + 1
        restarted = replicas(cluster, 0)[victim.node]
        assert restarted is not victim and restarted.role == "follower"
        assert lead.followers[victim.node] is restarted

    run(scenario())


def test_last_isr_member_gone_leaves_the_partition_offline_until_an_unclean_election() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(nodes=["n1", "n2", "n3", "n4"]), MemoryStore()
        plane = make_replicated(cluster, store)
        await plane.start()
        lead = leader(cluster, 0)
        others = [n for n in replicas(cluster, 0) if n != lead.node]
        # The followers fell out of the ISR (the leader shrank it), then the leader's node is lost.
        change = IsrChange(IsrChangeKind.SHRINK, (lead.node,), lead.node, lead.epoch, lead.partition_epoch)
        assert (await plane.alter_isr(0, change))[0] == Errors.NONE
        cluster.remove_node(lead.node)
        await watch(plane, 3)
        assert plane.routing()[1][0] is None and plane.stats()["offline"] == [0]
        assert saved(store, 0)["isr"] == [lead.node]  # the last member stays: the partition waits for it
        assert all(a.role == "follower" for a in replicas(cluster, 0).values())
        with pytest.raises(ValueError, match="no eligible replica"):
            await plane.elect_leader(0)
        result = await plane.elect_leader(0, unclean=True)
        assert result["unclean"] and result["leader"] in others and result["isr"] == [result["leader"]]
        assert leader(cluster, 0).node == result["leader"]

    run(scenario())


def test_alter_isr_is_validated_persisted_and_answered_with_the_committed_state() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        lead = leader(cluster, 1)
        follower = next(n for n in replicas(cluster, 1) if n != lead.node)
        isr = tuple(n for n in lead.isr if n != follower)
        base = lead.partition_epoch
        shrink = IsrChange(IsrChangeKind.SHRINK, isr, lead.node, lead.epoch, base)
        error, committed, leader_epoch, partition_epoch = await plane.alter_isr(1, shrink)
        assert (error, tuple(committed), leader_epoch, partition_epoch) == (
            Errors.NONE,
            isr,
            lead.epoch,
            base + 1,
        )
        assert saved(store, 1)["isr"] == list(isr) and saved(store, 1)["partition_epoch"] == base + 1
        stale = IsrChange(IsrChangeKind.EXPAND, lead.isr, lead.node, lead.epoch - 1, base + 1)
        assert (await plane.alter_isr(1, stale))[0] == Errors.FENCED_LEADER_EPOCH
        old_version = IsrChange(IsrChangeKind.EXPAND, lead.isr, lead.node, lead.epoch, base)
        assert (await plane.alter_isr(1, old_version))[0] == Errors.INVALID_UPDATE_VERSION
        with pytest.raises(ValueError, match="IsrChange expected"):
            await plane.alter_isr(1, {"isr": ["x"]})
        with pytest.raises(ValueError, match="partition must be"):
            await plane.alter_isr(7, shrink)
        assert saved(store, 1)["isr"] == list(isr)

    run(scenario())


def test_node_gone_past_the_delay_moves_its_replicas_to_a_live_node() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        cluster, store = FakeCluster(nodes=["n1", "n2", "n3", "n4"]), MemoryStore()
        plane = make_replicated(cluster, store, clock, num_partitions=4, replica_reassign_delay_s=60.0)
        await plane.start()
        hosted = [p for p in range(4) if "n2" in saved(store, p)["replicas"]]
        assert len(hosted) == 3
        cluster.remove_node("n2")
        await watch(plane, 2, clock, step_s=10.0)
        assert all("n2" in saved(store, p)["replicas"] for p in hosted)  # not yet
        clock.advance(60.0)
        await watch(plane, 2)
        for p in range(4):
            meta = saved(store, p)
            assert "n2" not in meta["replicas"] and len(set(meta["replicas"])) == 3
            assert sorted(replicas(cluster, p)) == sorted(meta["replicas"])
            lead = leader(cluster, p)
            assert set(lead.followers) == set(meta["replicas"]) - {lead.node}

    run(scenario())


def test_a_replica_whose_disk_stays_broken_past_the_delay_moves_to_a_live_node() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        cluster, store = FakeCluster(nodes=["n1", "n2", "n3", "n4"]), MemoryStore()
        plane = make_replicated(cluster, store, clock, num_partitions=1, disk_failure_move_delay_s=60.0)
        await plane.start()
        lead = leader(cluster, 0)
        broken = next(a for a in replicas(cluster, 0).values() if a is not lead)
        broken.fail_disk()
        await watch(plane, 2, clock, step_s=10.0)
        assert broken.node in saved(store, 0)["replicas"] and broken.node not in saved(store, 0)["isr"]
        assert not broken.killed  # not yet: it may heal by itself
        clock.advance(60.0)
        await watch(plane, 2)
        meta = saved(store, 0)
        assert broken.node not in meta["replicas"] and len(set(meta["replicas"])) == 3
        assert broken.killed and "n4" in meta["replicas"]
        assert sorted(replicas(cluster, 0)) == sorted(meta["replicas"])
        assert set(leader(cluster, 0).followers) == set(meta["replicas"]) - {leader(cluster, 0).node}

    run(scenario())


def test_a_restarted_controller_adopts_every_replica_without_an_election() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        first = make_replicated(cluster, store)
        await first.start()
        before = {p: saved(store, p) for p in range(3)}
        created = len(cluster.created)
        second = make_replicated(cluster, store)
        await second.start()
        await watch(second, 2)
        assert len(cluster.created) == created
        assert {p: saved(store, p) for p in range(3)} == before
        assert all(second.routing()[1][p] is leader(cluster, p) for p in range(3))

    run(scenario())


def test_a_failed_leader_is_replaced_by_an_isr_member_and_keeps_its_place() -> None:
    """A leader whose runtime failed reloads from an intact log: no candidate, but in sync."""
    async def scenario() -> None:
        cluster, store, plane = await started()
        old = leader(cluster, 2)
        epoch = old.epoch
        old.state, old.failure = "FAILED", "the shard broke an invariant"
        await watch(plane)
        new = leader(cluster, 2)
        assert new is not old and new.epoch == epoch + 1 == saved(store, 2)["leader_epoch"]
        assert old.node in new.isr
        assert old.role == "follower" and old.leader_node == new.node

    run(scenario())


def test_a_leader_whose_disk_failed_leaves_the_isr_and_follows_once_healed() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        old = leader(cluster, 2)
        epoch = old.epoch
        old.fail_disk()
        await watch(plane)
        new = leader(cluster, 2)
        assert new is not old and new.epoch == epoch + 1 == saved(store, 2)["leader_epoch"]
        assert old.node not in new.isr and old.node not in saved(store, 2)["isr"]
        assert old.role == "failed"  # no role while its disk is broken: it recovers by itself
        row = (await plane.status())[2]
        assert row["disks"][old.node]["error"].endswith("No space left on device")
        old.heal_disk()
        await watch(plane)
        assert old.role == "follower" and old.leader_node == new.node
        assert (await plane.status())[2]["disks"] == {}

    run(scenario())


def test_a_follower_whose_disk_failed_leaves_the_isr_and_is_never_a_candidate() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        lead = leader(cluster, 2)
        follower = next(a for a in replicas(cluster, 2).values() if a is not lead)
        follower.fail_disk()
        await watch(plane)
        assert follower.node not in saved(store, 2)["isr"]
        lead.fail_disk()
        await watch(plane)
        new = leader(cluster, 2)
        assert new is not follower and new is not lead

    run(scenario())


def test_a_replica_that_does_not_answer_stays_in_the_isr_at_an_election() -> None:
    """Issue 24 item 4: only a dead replica or a failed log leaves the ISR at an election;
    a paused one keeps its place (its log is intact) but is no candidate."""
    async def scenario() -> None:
        cluster, store, plane = await started()
        old = leader(cluster, 2)
        paused = next(a for a in replicas(cluster, 2).values() if a is not old)
        paused.hangs = True
        old.dead = True
        await watch(plane)
        new = leader(cluster, 2)
        assert new is not old and new is not paused
        assert paused.node in saved(store, 2)["isr"] and old.node not in saved(store, 2)["isr"]

    run(scenario())


async def rejoin(plane: ReplicatedPlane, cluster: FakeCluster, partition: int) -> None:
    """The leader's part, which the fake does not play: every replica back in the ISR."""
    lead = leader(cluster, partition)
    meta = plane.state.partitions[partition]
    everyone = tuple(meta.replicas)
    change = IsrChange(IsrChangeKind.EXPAND, everyone, lead.node, lead.epoch, lead.partition_epoch)
    assert (await plane.alter_isr(partition, change))[0] == Errors.NONE
    lead.isr, lead.partition_epoch = tuple(meta.isr), meta.partition_epoch


def test_leadership_returns_to_the_preferred_replica_once_it_is_back_in_sync() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        preferred = leader(cluster, 0)
        cluster.crash(preferred)
        await watch(plane)
        assert leader(cluster, 0).node != preferred.node
        await plane.balance_once()  # under-replicated: repairs first, nothing moves
        assert leader(cluster, 0).node != preferred.node
        await rejoin(plane, cluster, 0)
        await plane.balance_once()
        back = leader(cluster, 0)
        assert back.node == preferred.node == saved(store, 0)["replicas"][0]
        assert back is not preferred and back.epoch == saved(store, 0)["leader_epoch"]

    run(scenario())


def test_a_node_that_joins_takes_its_share_of_replicas() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        plane = make_replicated(cluster, store, num_partitions=6)
        await plane.start()
        cluster.nodes.append("n4")
        for _ in range(10):
            await plane.balance_once()
            for p in range(6):
                meta = plane.state.partitions[p]
                # Kafka's order: the new replica is added, and the old one leaves only
                # once the new one is in sync; the ISR never holds fewer than 3.
                assert len(meta.isr) >= 3 and len(meta.replicas) in (3, 4)
                if len(meta.isr) < len(meta.replicas):
                    await rejoin(plane, cluster, p)
            await watch(plane)
        assert all(m.moving is None and len(m.replicas) == 3 for m in plane.state.partitions.values())
        hosted = Counter(n for p in range(6) for n in saved(store, p)["replicas"])
        assert hosted["n4"] >= 4 and max(hosted.values()) - min(hosted.values()) <= 1
        for p in range(6):
            assert sorted(replicas(cluster, p)) == sorted(saved(store, p)["replicas"])
            lead = leader(cluster, p)
            assert set(lead.followers) == set(saved(store, p)["replicas"]) - {lead.node}
        assert not [a for a in cluster.live.values() if a.name not in plane.state.owned_names()]

    run(scenario())


def test_a_move_survives_a_controller_restart_and_ends_once_the_new_replica_is_in_sync() -> None:
    async def scenario() -> None:
        cluster, store = FakeCluster(), MemoryStore()
        first = make_replicated(cluster, store, num_partitions=6)
        await first.start()
        cluster.nodes.append("n4")
        await first.balance_once()
        [moving] = [p for p in range(6) if "moving" in saved(store, p)]
        source, target = saved(store, moving)["moving"]
        assert saved(store, moving)["replicas"][-1] == target and source in saved(store, moving)["isr"]
        assert first.stats()["under_replicated"] == 0, "a replica being added is not a missing one"
        second = make_replicated(cluster, store, num_partitions=6)  # the controller restarts mid-move
        await second.start()
        await watch(second)
        assert source in saved(store, moving)["replicas"], "not removed before the new one is in sync"
        await rejoin(second, cluster, moving)
        await watch(second)
        meta = saved(store, moving)
        assert "moving" not in meta and source not in meta["replicas"] and target in meta["isr"]
        assert len(meta["replicas"]) == len(meta["isr"]) == 3
        assert source not in replicas(cluster, moving), "the source's actor is gone"

    run(scenario())


def test_a_follower_ray_reports_dead_leaves_the_isr_even_while_its_calls_only_time_out() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started()
        lead = leader(cluster, 0)
        victim = next(a for a in replicas(cluster, 0).values() if a is not lead)
        victim.hangs = True
        await watch(plane)
        assert victim.node in lead.isr  # slow is the leader's business
        cluster.crash(victim)
        await watch(plane)
        assert victim.node not in lead.isr and replicas(cluster, 0)[victim.node] is not victim

    run(scenario())


def test_followers_hear_of_an_epoch_only_once_its_leader_took_it_up() -> None:
    """A full restart must find no directory that saw an epoch no state file records:
    while the elected replica fails to lead, no follower is told the new epoch."""
    async def scenario() -> None:
        cluster, store, plane = await started()
        old = leader(cluster, 0)
        survivors = [a for a in replicas(cluster, 0).values() if a is not old]
        cluster.remove_node(old.node)

        async def cannot_lead(*args: Any) -> dict[str, Any]:
            raise RuntimeError("the load failed")

        for actor in survivors:
            actor.become_leader = cannot_lead  # type: ignore[method-assign]
        await plane.check(0)
        assert saved(store, 0)["leader_epoch"] > old.epoch  # elected and committed...
        assert all(a.epoch == old.epoch and a.role == "follower" for a in survivors)  # ...told no one
        for actor in survivors:
            del actor.become_leader
        await watch(plane)
        new = leader(cluster, 0)
        assert new.epoch == saved(store, 0)["leader_epoch"]
        assert all(a.epoch == new.epoch for a in survivors)

    run(scenario())


def converged(plane: ReplicatedPlane, cluster: FakeCluster) -> list[str]:
    """What keeps the plane from its full replica sets: empty when every partition is led,
    fully replicated and in sync, with one live actor per replica and no other."""
    gaps = []
    for p, meta in plane.state.partitions.items():
        actors = [a for a in cluster.live.values() if a.partition == p]
        nodes = sorted(a.node for a in actors)
        if meta.leader is None or meta.moving is not None or len(meta.replicas) != 3:
            gaps.append(f"partition {p}: leader {meta.leader}, replicas {meta.replicas}, move {meta.moving}")
        elif sorted(meta.isr) != sorted(meta.replicas) or nodes != sorted(meta.replicas):
            gaps.append(f"partition {p}: ISR {meta.isr}, actors on {nodes}")
        elif any(a.role != ("leader" if a.node == meta.leader else "follower") for a in actors):
            gaps.append(f"partition {p}: roles {[(a.node, a.role) for a in actors]}")
    return gaps


async def heal(plane: ReplicatedPlane, cluster: FakeCluster, rounds: int = 12) -> list[str]:
    """Run the controller's rounds (and the leaders' ISR expansions) until it converges."""
    for _ in range(rounds):
        await watch(plane)
        for p, meta in plane.state.partitions.items():
            if meta.leader is not None and any(a.role == "leader" for a in replicas(cluster, p).values()):
                await rejoin(plane, cluster, p)
        await plane.balance_once()
        if not converged(plane, cluster):
            return []
    return converged(plane, cluster)


@pytest.mark.parametrize("seed", range(24))
def test_a_controller_killed_at_any_point_of_a_move_or_an_election_leaves_no_replica_out(seed: int) -> None:
    """The controller dies at a seeded point of a reassignment (a node joins) or an election
    (a leader's actor dies); its successor converges to full replica sets and ISRs, two
    actors of one replica on a node never both hold its log, and none is left out."""
    async def scenario() -> None:
        rng = random.Random(seed)
        cluster, store = FakeCluster(locks=True), MemoryStore()
        first = make_replicated(cluster, store, num_partitions=4)
        await first.start()
        if seed % 2:
            cluster.nodes.append("n4")
            operation = first.balance_once
        else:
            cluster.crash(leader(cluster, rng.randrange(4)))
            operation = first.watch_once
        cluster.crash_in = rng.randint(1, 12)
        with contextlib.suppress(ControllerCrash):
            await operation()
            await first.settle()
            await heal(first, cluster, 2)
        cluster.crash_in, cluster.crashed = None, False
        second = make_replicated(cluster, store, num_partitions=4)  # Ray restarts the controller
        await second.start()
        assert await heal(second, cluster) == [], f"seed {seed}: not converged"

    run(scenario())
