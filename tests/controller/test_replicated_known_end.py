"""The replicated plane never starts a partition empty where data was: it keeps the
committed end its leaders report and gives it to each new leader; a replica whose log is
missing or shorter refuses, is no candidate, and the partition stays offline until an ISR
member with its log is back (or an operator's unclean election)."""

from __future__ import annotations

from coordinator.errors import Errors
from coordinator.replication import IsrChange, IsrChangeKind

from tests.controller.fake import FakeCluster
from tests.controller.helpers import run, watch
from tests.controller.test_replicated import leader, replicas, started


def test_the_last_isr_member_back_without_its_log_refuses_and_the_partition_stays_offline() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started(FakeCluster(nodes=["n1", "n2", "n3"], shared_disk=False))
        lead = leader(cluster, 0)
        lead.commit(5)
        await watch(plane)
        assert plane.state.partitions[0].known_end == 5
        assert store.data is not None and store.data["known_end"]["0"] == 5
        change = IsrChange(IsrChangeKind.SHRINK, (lead.node,), lead.node, lead.epoch, lead.partition_epoch)
        assert (await plane.alter_isr(0, change))[0] == Errors.NONE
        # Its process dies, its node stays, its disk is lost: the restarted replica must not lead empty.
        cluster.crash(lead)
        cluster.disk(lead.node).clear()
        await watch(plane, 2)
        back = replicas(cluster, 0)[lead.node]
        assert back is not lead and back.refused and back.known_end == 5
        assert plane.routing()[1][0] is None and plane.stats()["offline"] == [0]
        assert not any(a.role == "leader" for a in replicas(cluster, 0).values())
        # The disk comes back (say, remounted) and the replica restarts: it leads with its log.
        cluster.disk(lead.node)[0] = 5
        cluster.crash(back)
        await watch(plane, 2)
        again = leader(cluster, 0)
        assert again.node == lead.node and again.durable_end == 5 and plane.stats()["offline"] == []

    run(scenario())


def test_an_unclean_election_forgets_the_committed_end() -> None:
    async def scenario() -> None:
        cluster, store, plane = await started(FakeCluster(nodes=["n1", "n2", "n3"], shared_disk=False))
        lead = leader(cluster, 0)
        lead.commit(5)
        await watch(plane)
        change = IsrChange(IsrChangeKind.SHRINK, (lead.node,), lead.node, lead.epoch, lead.partition_epoch)
        assert (await plane.alter_isr(0, change))[0] == Errors.NONE
        cluster.crash(lead)
        cluster.disk(lead.node).clear()
        await watch(plane, 2)
        assert plane.stats()["offline"] == [0]
        result = await plane.elect_leader(0, unclean=True)
        assert result["unclean"] and result["leader"] != lead.node
        assert plane.state.partitions[0].known_end == -1
        assert leader(cluster, 0).node == result["leader"]

    run(scenario())
