"""Recovery after a full Ray cluster restart (actors/controller/forgotten_logs.py): the controller's
metadata rebuilt from the replicas' state files (the newest wins), the controller electing
from the recovered ISR among live replicas, refusals of another service's directories, and
partitions held for an operator's choice where their history is ambiguous."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.controller.forgotten_logs import ForgottenLogsError, recover_state, scan_replicas
from log import PartitionLog, replica_dir
from log.epoch import write_leader_epoch
from log.replica_state import ReplicaState, write_epoch_replicas, write_replica_state

from tests.controller.fake import FakeCluster, MemoryStore
from tests.controller.helpers import make_settings, run, watch
from tests.controller.test_replicated import leader, make_replicated, replicas
from tests.log.replica_support import SMALL, write_epochs

NODES = ("n1", "n2", "n3")


def settings(tmp_path: Path, **overrides: Any) -> Any:
    values = {"data_dir": str(tmp_path), "num_partitions": 2, "replication_factor": 3,
              "min_insync_replicas": 2, **overrides}
    return make_settings(**values)


def replica(
    tmp_path: Path, node: str, partition: int, state: ReplicaState | None = None, epoch: int = -1
) -> str:
    """A replica directory with a log segment, its leader-epoch file and maybe a state file."""
    path = replica_dir(str(tmp_path), node, partition)
    Path(path).mkdir(parents=True)
    (Path(path) / "00000000000000000000.log").write_bytes(b"")
    if epoch >= 0:
        write_leader_epoch(path, epoch)
    if state is not None:
        write_replica_state(path, state)
    return path


def state(
    isr: tuple[str, ...], leader: str, leader_epoch: int, partition_epoch: int, **kw: int
) -> ReplicaState:
    return ReplicaState(NODES, isr, leader, leader_epoch, partition_epoch,
                        kw.get("num_partitions", 2), kw.get("replication_factor", 3))


def two_partitions(tmp_path: Path) -> None:
    """Partition 0: n1 led epoch 2 with everyone, then n2 led epoch 3 without n1 (n1 lagged
    and still follows epoch 2); partition 1: n3 leads epoch 1."""
    replica(tmp_path, "n1", 0, state(NODES, "n1", 2, 5), epoch=2)
    replica(tmp_path, "n2", 0, state(("n2", "n3"), "n2", 3, 6), epoch=3)
    replica(tmp_path, "n3", 0, epoch=3)
    for node in NODES:
        replica(tmp_path, node, 1, state(NODES, "n3", 1, 1) if node == "n3" else None, epoch=1)


def test_the_newest_state_file_of_each_partition_is_the_recovered_metadata(tmp_path: Path) -> None:
    two_partitions(tmp_path)
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None and recovered.num_partitions == 2
    zero, one = recovered.partitions[0], recovered.partitions[1]
    assert (zero.replicas, zero.isr, zero.leader, zero.epoch, zero.partition_epoch) == (
        list(NODES), ["n2", "n3"], None, 3, 6
    )
    assert (one.replicas, one.isr, one.epoch, one.partition_epoch) == (list(NODES), list(NODES), 1, 1)
    assert zero.known_end == one.known_end == 0 and not zero.names and zero.actor is None


def recovered_store(tmp_path: Path) -> MemoryStore:
    """A store holding the metadata recovered from `two_partitions`' state files."""
    two_partitions(tmp_path)
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None
    store = MemoryStore()
    store.save(recovered.to_json())
    return store


def test_the_controller_elects_from_the_recovered_isr_and_new_leaders_must_find_their_logs(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        store = recovered_store(tmp_path)
        cluster = FakeCluster(nodes=list(NODES), shared_disk=False)
        for node in NODES:
            cluster.disk(node).update({0: 7, 1: 3})
        plane = make_replicated(cluster, store, data_dir=str(tmp_path), num_partitions=2)
        await plane.start()
        await watch(plane)
        lead = leader(cluster, 0)
        assert lead.node == "n2" and lead.epoch == 4 and lead.known_end == 0 and lead.durable_end == 7
        assert sorted(replicas(cluster, 0)) == list(NODES)
        assert plane.state.partitions[0].isr == ["n2", "n3"]  # n1 rejoins once caught up
        assert leader(cluster, 1).node == "n1" and leader(cluster, 1).epoch == 2

    run(scenario())


def test_a_partition_whose_isr_replica_is_missing_stays_offline(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = recovered_store(tmp_path)
        # n2 and n3 (partition 0's ISR) come back, but n3 without its disk; n1 has its log.
        cluster = FakeCluster(nodes=list(NODES), shared_disk=False)
        cluster.disk("n1").update({0: 5, 1: 3})
        cluster.disk("n2").update({1: 3})
        plane = make_replicated(cluster, store, data_dir=str(tmp_path), num_partitions=2)
        await plane.start()
        await watch(plane, 3)
        assert plane.stats()["offline"] == [0] and plane.routing()[1][0] is None
        assert not any(a.role == "leader" for a in replicas(cluster, 0).values())
        assert leader(cluster, 1).node == "n1"  # partition 1 is whole: served

    run(scenario())


def held_reason(tmp_path: Path, partition: int) -> str | None:
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None
    return recovered.partitions[partition].held


def test_logs_without_a_state_file_anywhere_hold_their_partition(tmp_path: Path) -> None:
    replica(tmp_path, "n1", 0, state(NODES, "n1", 1, 1), epoch=1)
    stray = replica(tmp_path, "n1", 1, epoch=1)
    assert held_reason(tmp_path, 0) is None
    reason = held_reason(tmp_path, 1)
    assert reason is not None and reason.startswith(f"no partition state file with its logs ({stray}); ")
    assert reason.endswith("surviving logs, best first: n1 (last epoch -1, end 0, followed epoch 1)")


def test_a_directory_that_followed_a_newer_epoch_than_any_state_file_holds_its_partition(
    tmp_path: Path,
) -> None:
    replica(tmp_path, "n1", 0, state(NODES, "n1", 1, 1), epoch=1)
    follower = replica(tmp_path, "n2", 0, epoch=2)  # its leader of epoch 2 is not on any disk found
    replica(tmp_path, "n1", 1, state(NODES, "n1", 1, 1), epoch=1)
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None
    zero = recovered.partitions[0]
    assert zero.held is not None and zero.held.startswith(f"{follower} followed leader epoch 2")
    # The one that saw the newest epoch comes first (the default choice), every epoch seen is below the next.
    assert (zero.replicas, zero.epoch, zero.leader) == (["n2", "n1", "n3"], 2, None)
    assert recovered.partitions[1].held is None


def logged_replica(tmp_path: Path, node: str, partition: int, epochs: list[int], followed: int) -> str:
    """A replica directory whose log holds one batch per entry of `epochs` (in those leader
    epochs; small segments, so it spans several), having followed leader epoch `followed`."""
    path = replica_dir(str(tmp_path), node, partition)
    log = PartitionLog.open(path, epochs[0] if epochs else followed, SMALL)
    try:
        write_epochs(log, epochs)
        log.bump_epoch(followed)
    finally:
        log.close()
    return path


@pytest.mark.parametrize(("n1_epochs", "n2_epochs", "elected"), [
    ([1, 1, 2], [1, 1, 2, 2], "n2"),  # one epoch: the longer log
    ([1, 1, 2], [1, 1, 1, 1, 1], "n1"),  # the newer last epoch wins over a longer stale tail
    ([], [1], "n2"),  # an empty log ranks last
])
def test_a_lost_disk_of_the_newest_leader_elects_the_highest_ranking_survivor(
    tmp_path: Path, n1_epochs: list[int], n2_epochs: list[int], elected: str
) -> None:
    """n3 led epoch 2 and its disk is gone with the only state file of that epoch; n1 and n2
    followed it. One replica missing is fewer than min.insync.replicas (2): every acknowledged
    commit is on n1 or n2, and the one ranking highest by (last epoch, log end) holds them all."""
    replica(tmp_path, "n1", 1, state(NODES, "n1", 1, 1), epoch=1)  # partition 1 is whole
    write_replica_state(logged_replica(tmp_path, "n1", 0, n1_epochs, followed=2), state(NODES, "n1", 1, 1))
    logged_replica(tmp_path, "n2", 0, n2_epochs, followed=2)
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None
    zero = recovered.partitions[0]
    assert zero.held is None and zero.isr == [elected] and zero.replicas[0] == elected
    assert sorted(zero.replicas) == list(NODES)
    assert (zero.epoch, zero.partition_epoch, zero.known_end) == (2, 1, 0)


@pytest.mark.parametrize(("min_isr", "n1_followed"), [
    (1, 2),  # the lost leader alone may have acknowledged a commit
    (2, 1),  # n1 did not follow the newest epoch: it and the lost leader may hold what n2 lacks
])
def test_a_lost_disk_is_not_elected_around_when_min_isr_copies_may_be_gone(
    tmp_path: Path, min_isr: int, n1_followed: int
) -> None:
    logged_replica(tmp_path, "n1", 0, [1, 1], followed=n1_followed)
    logged_replica(tmp_path, "n2", 0, [1, 1, 2], followed=2)
    replica(tmp_path, "n1", 1, state(NODES, "n1", 1, 1), epoch=1)
    recovered = recover_state(
        scan_replicas(str(tmp_path)), settings(tmp_path, min_insync_replicas=min_isr), NODES
    )
    assert recovered is not None and recovered.partitions[0].held is not None
    assert recovered.partitions[1].held is None


def test_an_unreadable_state_file_holds_its_partition_and_names_the_file(tmp_path: Path) -> None:
    two_partitions(tmp_path)
    broken = Path(replica_dir(str(tmp_path), "n3", 1)) / "partition-state.json"
    broken.write_text('{"version": 1, "isr": ')
    reason = held_reason(tmp_path, 1)
    assert reason is not None and str(broken) in reason and reason.startswith("unreadable partition state")
    assert held_reason(tmp_path, 0) is None


def test_a_held_partition_waits_for_the_operators_unclean_election_and_the_others_serve(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        replica(tmp_path, "n1", 0, state(NODES, "n1", 1, 1), epoch=1)
        replica(tmp_path, "n2", 0, epoch=2)
        replica(tmp_path, "n3", 0, epoch=1)
        for node in NODES:
            replica(tmp_path, node, 1, state(NODES, "n3", 1, 1) if node == "n3" else None, epoch=1)
        recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
        assert recovered is not None
        store = MemoryStore()
        store.save(recovered.to_json())
        cluster = FakeCluster(nodes=list(NODES), shared_disk=False)
        for node in NODES:
            cluster.disk(node).update({0: 5, 1: 3})
        plane = make_replicated(cluster, store, data_dir=str(tmp_path), num_partitions=2)
        await plane.start()
        await watch(plane, 3)
        assert leader(cluster, 1).node == "n1"  # partition 1 is whole: served
        assert plane.stats()["held"] == [0] and plane.stats()["offline"] == [0]
        assert sorted(replicas(cluster, 0)) == list(NODES)  # started, no role
        assert not any(a.role == "leader" for a in replicas(cluster, 0).values())
        [row] = [r for r in await plane.status() if r["partition"] == 0]
        assert row["held"] == recovered.partitions[0].held and row["failure"].startswith("held: ")
        assert saved_held(store) == {"0": row["held"]}
        with pytest.raises(ValueError, match="held after a full restart.*--unclean"):
            await plane.elect_leader(0)
        with pytest.raises(ValueError, match="not one of its replicas"):
            await plane.elect_leader(0, unclean=True, node="n9")
        result = await plane.elect_leader(0, unclean=True, node="n3")
        assert (result["leader"], result["unclean"], result["leader_epoch"]) == ("n3", True, 3)
        await watch(plane, 2)
        assert leader(cluster, 0).node == "n3" and plane.stats()["held"] == []
        assert saved_held(store) == {}  # persisted: a restarted controller does not hold it again

    run(scenario())


def saved_held(store: MemoryStore) -> dict[str, str]:
    assert store.data is not None
    return {p: r["held"] for p, r in store.data["replication"].items() if "held" in r}


def test_logs_under_names_no_live_node_has_are_refused_with_the_advice_to_label_nodes(
    tmp_path: Path,
) -> None:
    two_partitions(tmp_path)
    with pytest.raises(ForgottenLogsError, match="no live node has.*raygroups.io/node"):
        recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), ["f00d", "beef"])


@pytest.mark.parametrize("overrides", [{"num_partitions": 3}, {"replication_factor": 2}])
def test_state_files_of_another_shape_are_refused(tmp_path: Path, overrides: dict[str, int]) -> None:
    two_partitions(tmp_path)
    with pytest.raises(ForgottenLogsError, match="another shape"):
        recover_state(scan_replicas(str(tmp_path)), settings(tmp_path, **overrides), NODES)


def test_nothing_on_disk_starts_afresh(tmp_path: Path) -> None:
    Path(replica_dir(str(tmp_path), "n1", 0)).mkdir(parents=True)  # an empty directory is no replica
    assert recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES) is None


def lost_leader_case(tmp_path: Path, n1_followed: int, members: tuple[str, ...] | None) -> Any:
    """n3 led epoch 2 with `members` recorded by its followers, and its disk is gone; n2
    followed epoch 2 (and holds its batches), n1 followed `n1_followed`."""
    n1 = logged_replica(tmp_path, "n1", 0, [1, 1], followed=n1_followed)
    n2 = logged_replica(tmp_path, "n2", 0, [1, 1, 2], followed=2)
    if members is not None:
        write_epoch_replicas(n2, 2, members)
        write_epoch_replicas(n1, n1_followed, members if n1_followed == 2 else NODES)
    replica(tmp_path, "n1", 1, state(NODES, "n1", 1, 1), epoch=1)
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None and recovered.partitions[1].held is None
    return recovered.partitions[0]


def test_a_member_that_only_lagged_is_present_so_the_survivor_is_elected(tmp_path: Path) -> None:
    """The CI failure of test_cluster_restart[one-disk-lost]: n1 lagged at epoch 1 (down when
    n3 was elected), n3's disk is lost. Epoch 2's replicas, as n2 recorded them, are n1, n2,
    n3: only n3 is missing, fewer than min.insync.replicas, so n2 (the best log) leads."""
    zero = lost_leader_case(tmp_path, n1_followed=1, members=NODES)
    assert zero.held is None and zero.isr == ["n2"] and zero.replicas[0] == "n2"
    assert sorted(zero.replicas) == list(NODES) and zero.epoch == 2


def test_without_recorded_replica_sets_a_lagging_member_still_counts_as_missing(tmp_path: Path) -> None:
    """Directories of an older raygroups record no sets: the conservative rule holds."""
    zero = lost_leader_case(tmp_path, n1_followed=1, members=None)
    assert zero.held is not None and "surviving logs, best first: n2 (last epoch 2" in zero.held


def test_a_removed_replicas_directory_is_no_member(tmp_path: Path) -> None:
    """n1 was removed (epoch 2's replicas are n2, n3, n4) and its old directory stays; n3 is
    lost and n4's directory was never written: two of epoch 2's three replicas are missing."""
    zero = lost_leader_case(tmp_path, n1_followed=1, members=("n2", "n3", "n4"))
    assert zero.held is not None


def test_two_lost_disks_hold_the_partition(tmp_path: Path) -> None:
    n2 = logged_replica(tmp_path, "n2", 0, [1, 1, 2], followed=2)
    write_epoch_replicas(n2, 2, NODES)
    replica(tmp_path, "n2", 1, state(NODES, "n2", 1, 1), epoch=1)
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None and recovered.partitions[0].held is not None


def test_an_unclean_election_of_a_held_partition_defaults_to_the_best_log(tmp_path: Path) -> None:
    """Held (no record, a lagging n1): the replica an operator's unclean election takes by
    default, the first, is the log ranking highest, not the first in node order."""
    zero = lost_leader_case(tmp_path, n1_followed=1, members=None)
    assert zero.held is not None and zero.replicas[0] == "n2"


def test_a_member_without_a_readable_log_counts_as_missing(tmp_path: Path) -> None:
    """n1's directory is there but holds no log (only its state file of epoch 1): with n3
    lost, two of epoch 2's replicas may hold what n2 lacks."""
    n1 = replica_dir(str(tmp_path), "n1", 0)
    Path(n1).mkdir(parents=True)
    write_replica_state(n1, state(NODES, "n1", 1, 1))
    n2 = logged_replica(tmp_path, "n2", 0, [1, 1, 2], followed=2)
    write_epoch_replicas(n2, 2, NODES)
    replica(tmp_path, "n1", 1, state(NODES, "n1", 1, 1), epoch=1)
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None and recovered.partitions[0].held is not None


def grown(tmp_path: Path, routings: dict[int, str], count: int = 4) -> None:
    """Partitions 0..count-1 each led by n1 at epoch 1, its state file recording `routings[p]`."""
    for p in range(count):
        for node in NODES:
            lead = ReplicaState(NODES, NODES, "n1", 1, 1, 2, 3, routings.get(p, "")) if node == "n1" else None
            replica(tmp_path, node, p, lead, epoch=1)


def test_a_finished_repartition_is_recovered_with_its_count_whatever_the_settings_say(tmp_path: Path) -> None:
    grown(tmp_path, {0: "1;4;2;0", 1: "1;4;0;", 2: "1;4;0;"})  # partition 3's file predates the end
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None and sorted(recovered.partitions) == [0, 1, 2, 3]
    assert recovered.plan is None and recovered.routing_version == 1


def test_a_repartition_under_way_is_resumed_with_every_switch_any_file_recorded(tmp_path: Path) -> None:
    grown(tmp_path, {0: "2;4;2;0", 2: "2;4;2;", 3: "1;2;0;"})
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None and recovered.num_partitions == 4
    assert recovered.plan is not None and recovered.plan.to_json() == {
        "version": 2, "previous": 2, "count": 4, "switched": [0],
    }


def test_an_unreadable_routing_is_refused_naming_its_file(tmp_path: Path) -> None:
    grown(tmp_path, {0: "not a routing"}, count=2)
    with pytest.raises(ForgottenLogsError, match="no readable routing.*offsets-0"):
        recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)


def test_after_a_shrink_the_retired_partitions_left_on_disk_are_ignored(tmp_path: Path) -> None:
    grown(tmp_path, {0: "2;2;0;", 1: "2;2;0;", 2: "2;2;4;0,1,2,3", 3: "2;2;4;0,1,2,3"})
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None and sorted(recovered.partitions) == [0, 1] and recovered.plan is None


def test_a_shrink_under_way_resumes_with_every_partition(tmp_path: Path) -> None:
    grown(tmp_path, {0: "2;2;4;", 2: "2;2;4;2"})
    recovered = recover_state(scan_replicas(str(tmp_path)), settings(tmp_path), NODES)
    assert recovered is not None and sorted(recovered.partitions) == [0, 1, 2, 3]
    assert recovered.plan is not None and (recovered.plan.previous, recovered.plan.count) == (4, 2)
    assert recovered.plan.switched == [2]
