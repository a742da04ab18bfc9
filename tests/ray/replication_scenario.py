"""Replicated offsets partitions on a simulated 4-node cluster, each node with its own disk.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster):
`python -m tests.ray.replication_scenario CASE` with CASE one of:
- `leader-node`: the node of partition 0's leader is removed and its disk
  deleted while consumers commit; a new leader comes from the ISR, and every
  acknowledged commit is there afterwards. Prints the unavailability.
- `followers`: partition 0's followers are stopped (SIGSTOP) one after the
  other: commits go on while the ISR holds min.insync.replicas, are refused
  below it, and go on again once the followers are resumed and back in sync.
- `controller-node`: the controller's node is removed (disk too) while
  consumers commit; the controller restarts elsewhere with its metadata.
- `restart`: the service is stopped and started again: every partition comes
  back from the replicas' logs on the nodes' disks.
- `divergent-tail`: partition 0's leader A appends commits its stopped
  followers never get (never acknowledged), is stopped itself, and a
  follower is elected; A, resumed, acknowledges nothing (it was deposed), is
  truncated to the new leader's log and catches up: its log on disk equals
  the new leader's, A's unacknowledged records are gone, every acknowledged
  commit is there (Kafka's KIP-101 truncation, replication notes section 5).
- `zombie-read` (issue 24 item 3): a group commits 1 and partition 0's
  leader A answers a read of it; A is stopped (SIGSTOP) until a follower is
  elected, a fresh client commits 2 there, and a read is sent to A while it
  is stopped (a client whose routing still names it). A, resumed, answers it
  NOT_COORDINATOR, never the stale 1: a read is answered only once A's
  followers confirmed its epoch after the read arrived.
Exits non-zero if a check fails.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import sys
import threading
import time
from typing import Any

import ray
from ray.cluster_utils import Cluster

import actors
from actors.client.client import commit_request
from actors.client.retry import CoordinatorUnavailableError
from actors.controller.ray_store import GcsKvStore
from actors.core.settings import CONTROLLER_NAME, ServiceSettings
from actors.core.wire import loads_response
from actors.demo.sim_cluster import fully_replicated, quick_failover_settings, wait_for
from actors.demo.sim_cluster import status_rows as rows
from coordinator import Errors
from coordinator.messages import OffsetFetchRequest
from coordinator.records import OffsetCommitValue
from log import LogReader, replica_dir

from tests.ray.cluster_support import run_case
from tests.ray.fault_scenario import GroupLoad, longest_gap, run_load

NAMESPACE = "raygroups-replication"
PARTITIONS = 4
GROUPS_PER_PARTITION = 2


def settings_for(data_dir: str) -> ServiceSettings:
    return quick_failover_settings(data_dir, NAMESPACE, PARTITIONS)


def groups_on(client: actors.Client, partition: int, count: int = GROUPS_PER_PARTITION) -> list[str]:
    names = (f"group-{i}" for i in range(10_000))
    return [n for n in names if client.partition_for(n) == partition][:count]


def start_load(groups: list[str]) -> tuple[list[GroupLoad], threading.Event, threading.Thread]:
    loads = [GroupLoad(g) for g in groups]
    stop = threading.Event()
    return loads, stop, run_load(actors.connect(namespace=NAMESPACE, timeout_s=20.0), loads, stop)


def check_nothing_lost(loads: list[GroupLoad]) -> int:
    fetch = actors.connect(namespace=NAMESPACE, timeout_s=30.0)
    for load in loads:
        committed = fetch.fetch_offsets(load.group).offsets().get(("t", 0), -1)
        assert load.acked > 0, f"{load.group} never committed"
        assert committed >= load.acked, f"{load.group}: acknowledged {load.acked}, committed {committed}"
    return sum(len(load.successes) for load in loads)


def remove_with_disk(cluster: Cluster, node: Any, data_dir: str) -> None:
    cluster.remove_node(node)
    shutil.rmtree(os.path.join(data_dir, "nodes", node.node_id), ignore_errors=True)


def worker(cluster: Cluster, node_id: str) -> Any:
    return next(w for w in cluster.worker_nodes if w.node_id == node_id)


# ------------------------------------------------------------------ cases


def leader_node(cluster: Cluster, data_dir: str) -> None:
    client = actors.start(settings=settings_for(data_dir), namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    controller_node = ray.get(ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE).stats.remote())["node_id"]
    before = rows(client)[0]
    workers = {w.node_id for w in cluster.worker_nodes} - {controller_node}
    if before["leader_node"] not in workers:  # the victim must be a worker without the controller
        client.reassign(0, next(n for n in before["isr"] if n in workers))
        before = rows(client)[0]
    victim = before["leader_node"]
    loads, stop, thread = start_load(groups_on(client, 0) + groups_on(client, 1))
    time.sleep(2.0)
    removed = time.monotonic()
    remove_with_disk(cluster, worker(cluster, victim), data_dir)
    wait_for("a new leader of partition 0", lambda: rows(client)[0].get("leader_node") not in (None, victim))
    time.sleep(3.0)
    stop.set()
    thread.join(timeout=30)
    after = rows(client)[0]
    assert after["leader_node"] in before["isr"] and after["epoch"] > before["epoch"], (before, after)
    assert victim not in after["isr"] and len(after["isr"]) >= 2, after
    gap, group = longest_gap(loads[:GROUPS_PER_PARTITION], removed, time.monotonic())
    total = check_nothing_lost(loads)
    print(f"leader node removed with its disk: partition 0 unavailable {gap:.2f} s ({group}); "
          f"{total} commits acknowledged, none lost", flush=True)


def all_pushed_over_links(client: actors.Client) -> bool:
    """Every leader pushes to each follower over its TCP link (actors/partition/link.py)."""
    followers = [follower for row in rows(client).values() for follower in row["followers"].values()]
    return all(follower["transport"] == "tcp" for follower in followers)


def followers(cluster: Cluster, data_dir: str) -> None:
    client = actors.start(settings=settings_for(data_dir), namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    row = rows(client)[0]
    followers_of_0 = [node for node in row["replicas"] if node != row["leader_node"]]
    wait_for("the pushes over the replication links", lambda: all_pushed_over_links(client))
    pids = {node: replica_pid(0, node) for node in followers_of_0}
    loads, stop, thread = start_load(groups_on(client, 0))
    stopped: list[int] = []
    try:
        first, second = list(pids)
        os.kill(pids[first], signal.SIGSTOP)
        stopped.append(pids[first])
        wait_for("the stopped follower out of the ISR", lambda: first not in rows(client)[0]["isr"])
        acked = [load.acked for load in loads]
        wait_for("commits with one follower stopped", lambda: all(
            load.acked > a for load, a in zip(loads, acked, strict=True)
        ))
        os.kill(pids[second], signal.SIGSTOP)
        stopped.append(pids[second])
        # A commit sent from now on has no follower to acknowledge it; one sent before
        # may still be answered (its answer on its way), whenever that arrives.
        sent_before = [load.attempted for load in loads]
        wait_for("the ISR down to the leader", lambda: rows(client)[0]["isr"] == [row["leader_node"]])
        assert refused_below_min_isr(groups_on(client, 0, GROUPS_PER_PARTITION + 1)[-1])
        time.sleep(3.0)  # commits go on being sent meanwhile: none may be acknowledged
        assert all(load.acked <= sent for load, sent in zip(loads, sent_before, strict=True)), (
            f"a commit was acknowledged below min ISR: {[load.acked for load in loads]} > {sent_before}"
        )
        refused_from = [load.acked for load in loads]
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        stopped.clear()
        in_sync = sorted(row["replicas"])
        wait_for("the followers back in the ISR", lambda: sorted(rows(client)[0]["isr"]) == in_sync)
        wait_for("commits again", lambda: all(
            load.acked > a for load, a in zip(loads, refused_from, strict=True)
        ))
        wait_for("the pushes over the replication links again", lambda: all_pushed_over_links(client))
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        stop.set()
        thread.join(timeout=30)
    total = check_nothing_lost(loads)
    print(f"followers stopped and resumed: {total} commits acknowledged, none lost", flush=True)


def controller_node(cluster: Cluster, data_dir: str) -> None:
    client = actors.start(settings=settings_for(data_dir), namespace=NAMESPACE, address=cluster.address)
    controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
    workers = {w.node_id: w for w in cluster.worker_nodes}
    # Its node must be a worker to be removable: Ray restarts a killed
    # controller on any node (each try lands on a worker 3 times in 4).
    for _ in range(20):
        placed = ray.get(controller.stats.remote())["node_id"]
        if placed in workers:
            break
        ray.kill(controller, no_restart=False)
        wait_for("the controller restarted", lambda: bool(ray.get(controller.stats.remote(), timeout=5)))
    assert placed in workers, "the controller never landed on a worker"
    victim = workers[placed]
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    before = rows(client)
    loads, stop, thread = start_load([g for p in range(PARTITIONS) for g in groups_on(client, p, 1)])
    time.sleep(2.0)
    remove_with_disk(cluster, victim, data_dir)
    wait_for("the controller back on another node", lambda: ray.get(
        controller.stats.remote(), timeout=5)["node_id"] != victim.node_id)
    wait_for("every partition led again", lambda: all(
        r.get("role") == "leader" and r["leader_node"] != victim.node_id for r in rows(client).values()
    ))
    time.sleep(2.0)
    stop.set()
    thread.join(timeout=30)
    after = rows(client)
    for p, row in after.items():
        assert row["replicas"] == before[p]["replicas"] or victim.node_id in before[p]["replicas"], (p, row)
        assert row["epoch"] >= before[p]["epoch"], (p, before[p], row)
    total = check_nothing_lost(loads)
    print(f"controller node removed with its disk: metadata kept; {total} commits acknowledged, none lost",
          flush=True)


def restart(cluster: Cluster, data_dir: str) -> None:
    settings = settings_for(data_dir)
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    groups = [g for p in range(PARTITIONS) for g in groups_on(client, p)]
    for i, group in enumerate(groups):
        response = client.commit_offsets(group, {("t", 0): 1_000 + i})
        assert response.errors() == {("t", 0): Errors.NONE}, response
    before = rows(client)
    actors.stop(NAMESPACE)
    for p, row in before.items():
        assert all(os.path.isdir(replica_dir(data_dir, n, p)) for n in row["replicas"]), row
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition back", lambda: fully_replicated(client))
    for i, group in enumerate(groups):
        assert client.fetch_offsets(group).offsets() == {("t", 0): 1_000 + i}, group
    after = rows(client)
    assert all(after[p]["replicas"] == before[p]["replicas"] for p in before), (before, after)
    print(f"service restarted: {len(groups)} groups' commits recovered from the replicas' disks", flush=True)


# The divergent-tail case's lag time: long enough that the leader cannot
# shrink the ISR while its followers are stopped, so they stay electable.
DIVERGENT_LAG_MS = 30_000


def divergent_tail(cluster: Cluster, data_dir: str) -> None:
    settings = dataclasses.replace(settings_for(data_dir), replica_lag_time_max_ms=DIVERGENT_LAG_MS)
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    before = rows(client)[0]
    a = before["leader_node"]
    b, c = [node for node in before["replicas"] if node != a]
    replica = {node: replica_actor(data_dir, 0, node) for node in before["replicas"]}
    groups = groups_on(client, 0, 4)
    for group in groups[:2]:
        assert committed(client, group, 10), group
    # The topic registry writes its first records (its claim, the Ray path's secret) into
    # partition 0 when first asked: asked here, acknowledged at the high watermark, so
    # none is written while A's followers are stopped below.
    client.describe_topics()
    stopped: list[int] = []
    try:
        tail = unacknowledged_tail(replica, a, (b, c), stopped, groups, data_dir)
        for node in (b, c):
            os.kill(replica[node][1], signal.SIGCONT)
            stopped.remove(replica[node][1])
        wait_for("a follower elected", lambda: rows(client)[0]["leader_node"] in (b, c))
        new = rows(client)[0]
        assert new["epoch"] > before["epoch"] and a not in new["isr"], (before, new)
        new_log = LogReader(replica_dir(data_dir, new["leader_node"], 0))
        end = new_log.end_offset()
        assert end == tail.follower_end, (
            f"A's tail reached the new leader (a queued push): its end {end}, the followers' "
            f"{tail.follower_end} when stopped; its records past that: "
            f"{list(new_log.records(tail.follower_end))}; A's tail: {tail.records}"
        )
        # Sent to A while it is deposed (and stopped): answered once it resumes.
        tail.attempts += [Attempt(replica[a][0], groups[1], 902), Attempt(replica[a][0], groups[3], 903)]
        fresh = actors.connect(namespace=NAMESPACE, timeout_s=20.0)
        assert committed(fresh, groups[0], 20) and committed(fresh, groups[2], 21)
        os.kill(replica[a][1], signal.SIGCONT)
        stopped.remove(replica[a][1])
        outcomes = {attempt.what: attempt.outcome() for attempt in tail.attempts}
        assert "acknowledged" not in outcomes.values(), f"A acknowledged without its followers: {outcomes}"
        wait_for("A back in the ISR, caught up", lambda: caught_up(client, a), timeout_s=90.0)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    check_truncated(data_dir, a, rows(client)[0]["leader_node"], tail, replica[a][0])
    expected = {groups[0]: 20, groups[1]: 10, groups[2]: 21, groups[3]: -1}
    for group, offset in expected.items():
        assert fresh.fetch_offsets(group).offsets().get(("t", 0), -1) == offset, group
    print(f"A's answers: {outcomes}", flush=True)
    print(f"divergent tail of {len(tail.records)} record(s) truncated on the returning replica, "
          f"its log equal to the new leader's; nothing acknowledged by the deposed leader; none lost",
          flush=True)


def zombie_read(cluster: Cluster, data_dir: str) -> None:
    client = actors.start(settings=settings_for(data_dir), namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    a = rows(client)[0]["leader_node"]
    handle, pid = replica_actor(data_dir, 0, a)
    group = groups_on(client, 0, 1)[0]
    assert committed(client, group, 1)
    assert DirectRead(handle, group).answer().offsets() == {("t", 0): 1}
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for("a follower elected", lambda: rows(client)[0]["leader_node"] not in (None, a))
        fresh = actors.connect(namespace=NAMESPACE, timeout_s=20.0)
        assert committed(fresh, group, 2)
        stale = DirectRead(handle, group)  # queued at the stopped A
    finally:
        os.kill(pid, signal.SIGCONT)
    answer = stale.answer()
    assert answer.error is Errors.NOT_COORDINATOR, f"the deposed leader answered {answer}"
    assert fresh.fetch_offsets(group).offsets() == {("t", 0): 2}
    print("the deposed leader, resumed, answered its queued read NOT_COORDINATOR, not the stale "
          "offset; the new leader answers the new one", flush=True)


class DirectRead:
    """An OffsetFetch sent straight to one replica's actor, bypassing the client's
    routing and retries: its answer is that replica's own."""

    def __init__(self, handle: Any, group: str) -> None:
        self._answer = handle.handle_wire.remote(OffsetFetchRequest(group, (("t", 0),)))

    def answer(self, timeout_s: float = 60.0) -> Any:
        return loads_response(ray.get(self._answer, timeout=timeout_s))


def refused_below_min_isr(group: str) -> bool:
    """A commit that gives up after 2 s is not acknowledged (the committers' client retries for 20)."""
    impatient = actors.connect(namespace=NAMESPACE, timeout_s=2.0)
    try:
        response = impatient.commit_offsets(group, {("t", 0): 1})
    except CoordinatorUnavailableError:
        return True
    return response.errors() != {("t", 0): Errors.NONE}


def replica_pid(partition: int, node: str) -> int:
    """The process id of partition's replica actor on `node` (an actor this scenario started)."""
    for info in ray._private.state.actors().values():
        if (
            info["State"] == "ALIVE" and info["Address"]["NodeID"] == node
            and info["ActorClassName"].endswith("OffsetPartition")
            and ray.get(ray.get_actor(info["Name"], namespace=NAMESPACE).probe.remote())["partition"]
            == partition
        ):
            return int(info["Pid"])
    raise AssertionError(f"no replica of partition {partition} on {node}")


@dataclasses.dataclass
class DivergentTail:
    """The records the stopped leader A holds past what its followers have, and the
    commits it was sent that must never be acknowledged."""

    follower_end: int
    records: list[tuple[int, Any]]
    attempts: list[Attempt]


def unacknowledged_tail(
    replica: dict[str, tuple[Any, int]], a: str, followers: tuple[str, str], stopped: list[int],
    groups: list[str], data_dir: str,
) -> DivergentTail:
    """Stop A's followers, let A append commits only it gets, stop A; return A's divergent tail."""
    leader = replica[a][0]
    # Over the links and caught up: no push of earlier writes (the registry's first records
    # land in partition 0 too) is in flight when the followers stop, so they stop equal.
    wait_for("A's pushes over the replication links, its followers caught up", lambda: replicated(leader))
    ports = {
        node: ray.get(replica[node][0].replication_endpoint.remote(), timeout=10)[1] for node in followers
    }
    for node in followers:
        os.kill(replica[node][1], signal.SIGSTOP)
        stopped.append(replica[node][1])
    # A push sent to a stopped follower runs when it resumes: wait until A's sender
    # to each follower can push nothing more while it is stopped, so the commits
    # below never reach them.
    since = time.monotonic()
    wait_for("A's senders stuck on the stopped followers", lambda: all(
        sender_stuck(leader, node, port) for node, port in ports.items()
    ), timeout_s=DIVERGENT_LAG_MS / 1000)
    print(f"A's senders stuck on the stopped followers after {time.monotonic() - since:.1f} s "
          f"(unread bytes {[unread_bytes(port) for port in ports.values()]})", flush=True)
    end = ray.get(leader.probe.remote(), timeout=10)["log_end"]
    attempts = [Attempt(leader, groups[0], 900), Attempt(leader, groups[2], 901)]
    wait_for("A appended the commits", lambda: ray.get(leader.probe.remote(), timeout=5)["log_end"] > end + 1)
    os.kill(replica[a][1], signal.SIGSTOP)
    stopped.append(replica[a][1])
    ends = {node: LogReader(replica_dir(data_dir, node, 0)).end_offset() for node in followers}
    assert len(set(ends.values())) == 1, f"the followers' logs differ: {ends}"
    (follower_end,) = set(ends.values())
    records = list(LogReader(replica_dir(data_dir, a, 0)).records(follower_end))
    # Offset commits only: the registry's service state (partition 0's log) may be in the tail too.
    mine = {(r.key.group_id, r.value.offset) for _, r in records if isinstance(r.value, OffsetCommitValue)}
    assert {(groups[0], 900), (groups[2], 901)} <= mine, f"A's tail past {follower_end}: {records}"
    return DivergentTail(follower_end, records, attempts)


def replicated(leader: Any) -> bool:
    probe = ray.get(leader.probe.remote(), timeout=5)
    followers = probe["followers"].values()
    return all(f["transport"] == "tcp" and f["log_end"] == probe["log_end"] for f in followers)


def sender_stuck(leader: Any, node: str, port: int) -> bool:
    """True once leader's sender to the stopped follower `node` (its link listening on
    `port`) cannot push records to it before it resumes: a push sent after the stop
    lies unread in the follower's socket (the sender awaits its answer, then gives up
    and closes the link), or the link is closed already. A closed link stays closed:
    reconnecting asks the stopped actor for its endpoint through Ray, a call it
    answers only once resumed (actors/partition/link.py)."""
    transport = ray.get(leader.probe.remote(), timeout=5)["followers"][node]["transport"]
    return transport is None or unread_bytes(port) > 0


def unread_bytes(port: int) -> int:
    """Bytes received and not yet read on this host's connections accepted by the
    listener on `port` (the receive queues of /proc/net/tcp and tcp6; LISTEN rows,
    whose queue counts connections, are left out)."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows_ = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows_:
            fields = row.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if int(local.rsplit(":", 1)[1], 16) == port and state != "0A":  # 0A: LISTEN
                total += int(queues.split(":")[1], 16)
    return total


class Attempt:
    """A commit sent straight to one replica's actor, bypassing the client's retries:
    its answer is that replica's own (it may be stopped: asked for later)."""

    def __init__(self, handle: Any, group: str, offset: int) -> None:
        self.what = f"{group}@{offset}"
        request = commit_request(group, {("t", 0): offset}, -1, "", None, -1)
        self._answer = handle.handle_wire.remote(request)

    def outcome(self, timeout_s: float = 60.0) -> str:
        response = loads_response(ray.get(self._answer, timeout=timeout_s))
        if isinstance(response, BaseException):
            return f"refused: {response!r}"
        errors = response.errors()
        return "acknowledged" if errors == {("t", 0): Errors.NONE} else f"refused: {errors}"


def committed(client: actors.Client, group: str, offset: int) -> bool:
    return client.commit_offsets(group, {("t", 0): offset}).errors() == {("t", 0): Errors.NONE}


def caught_up(client: actors.Client, node: str) -> bool:
    row = rows(client)[0]
    lag = (row.get("followers") or {}).get(node, {}).get("lag")
    return node in row["isr"] and lag == 0


def check_truncated(data_dir: str, a: str, leader: str, tail: DivergentTail, handle: Any) -> None:
    """A's log is the leader's, batch for batch: its own tail was cut, not merged."""
    def batches(node: str) -> list[tuple[int, int, list[int], list[Any]]]:
        reader = LogReader(replica_dir(data_dir, node, 0))
        return [(x.base_offset, x.leader_epoch, x.offsets, x.records) for x in reader.batches()]

    mine, theirs = batches(a), batches(leader)
    assert mine == theirs, f"A's log differs from the leader's:\n{mine}\n{theirs}"
    now = [(offset, record) for _, _, offsets, records in mine for offset, record in zip(offsets, records)]
    kept = [entry for entry in tail.records if entry in now]
    assert not kept, f"A kept records of its divergent tail: {kept}"
    probe = ray.get(handle.probe.remote(), timeout=10)
    assert probe["role"] == "follower" and probe["truncations"] >= 1, probe


def replica_actor(data_dir: str, partition: int, node: str) -> tuple[Any, int]:
    """The handle and process id of partition's replica on `node`, from the controller's metadata
    (no call to the actor: it may be stopped)."""
    data = GcsKvStore(NAMESPACE, data_dir).load()
    assert data is not None, "the controller saved no metadata"
    name = data["replication"][str(partition)]["names"][node]
    for info in ray._private.state.actors().values():
        if info["Name"] == name and info["State"] == "ALIVE":
            return ray.get_actor(name, namespace=NAMESPACE), int(info["Pid"])
    raise AssertionError(f"replica {name} of partition {partition} on {node} is not alive")


CASES = {
    "leader-node": leader_node,
    "followers": followers,
    "controller-node": controller_node,
    "restart": restart,
    "divergent-tail": divergent_tail,
    "zombie-read": zombie_read,
}


def main() -> int:
    return run_case(CASES, NAMESPACE, "raygroups-replication-")


if __name__ == "__main__":
    sys.exit(main())
