"""Seeded fault injection on replicated offsets partitions while consumers commit.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster):
`python -m tests.ray.replicated_fault_scenario [--seed N] [--faults N] [--root DIR] [--only K1,K2]`
(FAULT_SEED sets the default seed; --only runs those fault kinds in that
order). As root on Linux: every node's disk is a small filesystem of the
disk-fault rig (tests/ray/disks.py) under DIR.

A named simulated cluster of 5 nodes (head + 4 workers, each with its own
disk), replication factor 3, min.insync.replicas 2, lost nodes' replicas moved
after `REASSIGN_DELAY_S`. Every group (the same number on every partition) commits
without pause, as tests/ray/fault_scenario.py does, but each commit n to a
key of its own (topic partition n, offset n) and remembers every one
acknowledged: an acknowledged commit lost in a failover cannot hide behind a
later commit of the same key, so the final fetch counts every loss. Faults,
drawn from the seed, one at a time, each from a fully replicated state:
`ray.kill` of a leader replica, SIGKILL of a leader's process, `ray.kill` of
a follower, SIGSTOP of a follower for a few seconds, the controller killed
(Ray restarts it) at a quiet moment or within 250 ms of being asked for an
election or a leadership move, a worker node removed with its disk (at most
`MAX_REMOVALS`, so 3 nodes stay for 3 replicas); and (issues 21, 24) the
disk of a leader's or a follower's node filled to ENOSPC or made read-only
for a few seconds, then healed (every replica on that node meets it); a
zombie leader (its process stopped past failure detection, a new leader
elected and committed to, then resumed) that a client whose routing still
names it reads from; and overlapping faults (a node's disk full while
another node's leader is stopped; a follower's disk full while its own
partition's leader is killed, allowed the disk fault's duration plus 3 s
without a commit).
After each: a recovery window, then every partition must have a leader and
an ISR of at least min.insync.replicas and every group must commit again;
the longest time a group went without a commit is printed (a figure, not a
check: it grows with the machine's load; gaps over `MAX_GAP_S` after a
single fault are counted in the summary); every partition must be back to
a full ISR within `CONVERGE_S` of the fault's last heal (else the run stops
there: the next fault would start from a broken state). No read may be
stale: a zombie's answer, or the reading client's, never holds an offset
older than one acknowledged before the read began. At the end every
acknowledged commit must be in its group's offsets.
Prints `N commits acknowledged, 0 lost; K faults survived`; exits non-zero if
a check fails. No process is left stopped, no disk broken or mounted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import signal
import sys
import threading
import time
from typing import Any

import ray
from ray.cluster_utils import Cluster

import actors
from actors.client.retry import CoordinatorUnavailableError
from actors.core.settings import CONTROLLER_NAME
from actors.core.wire import loads_response
from actors.demo.sim_cluster import remove_with_disk
from coordinator import Errors
from coordinator.messages import OffsetFetchRequest

from tests.ray.disk_support import cluster_with_disks, inject
from tests.ray.disks import NodeDisks
from tests.ray.fault_scenario import GroupLoad, longest_gap
from tests.ray.replication_scenario import (
    NAMESPACE,
    PARTITIONS,
    fully_replicated,
    groups_on,
    replica_actor,
    rows,
    settings_for,
    wait_for,
)

WORKERS = 4
MIN_ISR = settings_for("unused").min_insync_replicas
REASSIGN_DELAY_S = 3.0
RECOVERY_S = 3.0
MAX_REMOVALS = 2
# A gap without a commit after a single fault this long is named in the summary
# (issue 21's figure on an idle machine; never a failure: DESIGN 7, tests assert no wall time).
MAX_GAP_S = 5.0
# Every partition back to a full ISR within this after a fault's last heal.
CONVERGE_S = 30.0
FAULTS = (
    "kill_leader", "sigkill_leader", "kill_follower", "sigstop_follower", "kill_controller",
    "kill_controller_mid_election", "kill_controller_mid_move", "remove_node",
    "fill_leader", "fill_follower", "read_only_leader", "read_only_follower", "zombie_leader_read",
    "overlap", "two_faults_one_partition",
)
# Faults that are not one single fault: their gap is printed, not counted.
OVERLAPPING = ("overlap",)
TOPIC = "t"
# The zombie reads' group commits to this key only.
ZOMBIE_KEY = ("zombie", 0)


@dataclasses.dataclass
class KeyedLoad(GroupLoad):
    """A group's committer whose commit n goes to key (TOPIC, n): every acknowledged one is kept."""

    acked_all: list[int] = dataclasses.field(default_factory=list)


async def commit_keyed(client: actors.Client, load: KeyedLoad, stop: threading.Event) -> None:
    offset = 0
    while not stop.is_set():
        offset += 1
        load.attempted = offset
        try:
            response = await client.commit_offsets_async(load.group, {(TOPIC, offset): offset})
        except (CoordinatorUnavailableError, ray.exceptions.RayError):
            load.errors += 1
            continue
        if response.errors() == {(TOPIC, offset): Errors.NONE}:
            load.acked = offset
            load.acked_all.append(offset)
            load.successes.append(time.monotonic())
        else:
            load.errors += 1
        await asyncio.sleep(0.02)


def start_keyed_load(groups: list[str]) -> tuple[list[KeyedLoad], threading.Event, threading.Thread]:
    loads = [KeyedLoad(g) for g in groups]
    stop = threading.Event()
    client = actors.connect(namespace=NAMESPACE, timeout_s=20.0)

    async def main() -> None:
        await asyncio.gather(*(commit_keyed(client, load, stop) for load in loads))

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    return loads, stop, thread


def lost_commits(loads: list[KeyedLoad]) -> dict[str, list[int]]:
    """Per group, the acknowledged commits its offsets do not hold."""
    fetch = actors.connect(namespace=NAMESPACE, timeout_s=30.0)
    lost = {}
    for load in loads:
        assert load.acked_all, f"{load.group} never committed"
        offsets = fetch.fetch_offsets(load.group).offsets()
        missing = [n for n in load.acked_all if offsets.get((TOPIC, n)) != n]
        if missing:
            lost[load.group] = missing
    return lost


class Faults:
    """The faults, each picking its victim with the seed's generator; each returns what it did."""

    def __init__(self, client: actors.Client, cluster: Cluster, disks: NodeDisks, rng: random.Random) -> None:
        self.client, self.cluster, self.disks, self.rng = client, cluster, disks, rng
        self.data_dir = disks.data_dir
        self.removed = 0
        # Processes stopped and not yet resumed (resumed by `resume_all` whatever happens).
        self.stopped: set[int] = set()
        # Nodes whose disk is broken and not yet healed (healed by `resume_all` whatever happens).
        self.broken: set[str] = set()
        # Stale reads seen (a zombie's or its reader's answer older than an acknowledged commit).
        self.stale: list[str] = []
        self.zombie_group = ""
        self.zombie_offset = 0
        # A fault that allows more than MAX_GAP_S without a commit sets this (for its survive check).
        self.allowed_gap_s = MAX_GAP_S

    def _replica(self, leader: bool) -> tuple[int, str, Any, int]:
        """A partition, one of its replicas' node (its leader, or a follower), handle and pid."""
        partition = self.rng.randrange(PARTITIONS)
        row = rows(self.client)[partition]
        followers = sorted(n for n in row["replicas"] if n != row["leader_node"])
        node = row["leader_node"] if leader else self.rng.choice(followers)
        handle, pid = replica_actor(self.data_dir, partition, node)
        return partition, node, handle, pid

    def kill_leader(self) -> str:
        partition, node, handle, _ = self._replica(leader=True)
        ray.kill(handle, no_restart=True)
        return f"ray.kill leader of partition {partition} on {node[:12]}"

    def sigkill_leader(self) -> str:
        partition, node, _, pid = self._replica(leader=True)
        os.kill(pid, signal.SIGKILL)
        return f"SIGKILL leader of partition {partition} on {node[:12]} (pid {pid})"

    def kill_follower(self) -> str:
        partition, node, handle, _ = self._replica(leader=False)
        ray.kill(handle, no_restart=True)
        return f"ray.kill follower of partition {partition} on {node[:12]}"

    def sigstop_follower(self) -> str:
        partition, node, _, pid = self._replica(leader=False)
        # Sometimes longer than replica_lag_time_max_ms: the follower leaves the ISR and returns.
        pause_s = self.rng.uniform(2.0, 6.0)
        os.kill(pid, signal.SIGSTOP)
        self.stopped.add(pid)
        try:
            time.sleep(pause_s)
        finally:
            os.kill(pid, signal.SIGCONT)
            self.stopped.discard(pid)
        return f"SIGSTOP follower of partition {partition} on {node[:12]} for {pause_s:.1f} s"

    def kill_controller(self) -> str:
        ray.kill(ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE), no_restart=False)
        return "controller killed (restarted by Ray)"

    def kill_controller_mid_election(self) -> str:
        """The controller asked to elect another leader (as `raygroups elect-leader` or a
        preferred-leader rebalance does) and killed within 250 ms, mid-way (issue 29)."""
        def elect(controller: Any, partition: int, row: dict[str, Any]) -> Any:
            return controller.reassign.remote(partition, None, row["epoch"])

        return self._kill_controller_during("an election", elect)

    def kill_controller_mid_move(self) -> str:
        """The controller asked to move leadership to a named ISR member (`raygroups reassign`)
        and killed within 250 ms."""
        def move(controller: Any, partition: int, row: dict[str, Any]) -> Any:
            target = self.rng.choice(sorted(n for n in row["isr"] if n != row["leader_node"]))
            return controller.reassign.remote(partition, target, row["epoch"])

        return self._kill_controller_during("a move", move)

    def _kill_controller_during(self, what: str, ask: Any) -> str:
        partition = self.rng.randrange(PARTITIONS)
        row = rows(self.client)[partition]
        controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
        ask(controller, partition, row)  # naming the epoch seen: Ray's retry on the new controller moves once
        delay_s = self.rng.uniform(0.0, 0.25)
        time.sleep(delay_s)  # the fault's own timing (seeded): the kill lands mid-operation
        ray.kill(controller, no_restart=False)
        return (f"controller killed {delay_s * 1000:.0f} ms after being asked for {what} "
                f"of partition {partition}")

    def remove_node(self) -> str:
        controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
        controller_node = ray.get(controller.stats.remote(), timeout=30)["node_id"]
        # Not the controller's node: its loss is the `controller-node` replication case.
        workers = sorted(
            (n for n in self.cluster.worker_nodes if n.node_id != controller_node), key=lambda n: n.node_id
        )
        victim = self.rng.choice(workers)
        remove_with_disk(self.cluster, victim, self.data_dir)
        self.removed += 1
        return f"removed worker node {victim.node_id[:12]} with its disk"

    # -------------------------------------------------- disks (issue 21)

    def _disk_fault(self, fault: str, leader: bool) -> str:
        partition, node, _, _ = self._replica(leader=leader)
        hold_s = self.rng.uniform(2.5, 5.0)
        inject(self.disks, node, fault)
        self.broken.add(node)
        try:
            time.sleep(hold_s)
        finally:
            self.heal(node)
        role = "leader" if leader else "follower"
        return f"{fault} disk on {node} ({role} of partition {partition}) for {hold_s:.1f} s"

    def two_faults_one_partition(self) -> str:
        """Issue 29's case: a follower's disk full while its partition's leader is killed, so the
        partition is below min ISR until one of them is back. Allowed gap: the disk fault's
        duration plus 3 s (the killed leader's replica restarts and rejoins meanwhile)."""
        partition, node, _, _ = self._replica(leader=False)
        leader = rows(self.client)[partition]["leader_node"]
        handle, _ = replica_actor(self.data_dir, partition, leader)
        hold_s = self.rng.uniform(2.5, 5.0)
        inject(self.disks, node, "full")
        self.broken.add(node)
        try:
            time.sleep(0.5)  # the fault's own timing: the kill lands while the disk is full
            ray.kill(handle, no_restart=True)
            time.sleep(hold_s - 0.5)
        finally:
            self.heal(node)
        self.allowed_gap_s = hold_s + 3.0
        return (f"full disk on {node} (follower of partition {partition}) for {hold_s:.1f} s, its "
                f"leader on {leader} killed 0.5 s in")

    def heal(self, node: str) -> None:
        self.disks.heal(node)
        self.broken.discard(node)

    def fill_leader(self) -> str:
        return self._disk_fault("full", leader=True)

    def fill_follower(self) -> str:
        return self._disk_fault("full", leader=False)

    def read_only_leader(self) -> str:
        return self._disk_fault("read-only", leader=True)

    def read_only_follower(self) -> str:
        return self._disk_fault("read-only", leader=False)

    # ------------------------------------------- zombie reads (issue 24)

    def zombie_leader_read(self) -> str:
        """A leader stopped past failure detection; a new leader acknowledges a commit; a
        client whose routing still names the old leader reads, and the old leader resumes:
        neither its own answer nor the client's may be older than that commit."""
        partition = self.rng.randrange(PARTITIONS)
        if not self.zombie_group:
            self.zombie_group = groups_on(self.client, partition, 10)[-1]
        group = self.zombie_group
        partition = self.client.partition_for(group)
        row = rows(self.client)[partition]
        handle, pid = replica_actor(self.data_dir, partition, row["leader_node"])
        self.zombie_offset += 1
        first = self.zombie_offset
        writer = actors.connect(namespace=NAMESPACE, timeout_s=30.0)
        assert committed_key(writer, group, first), f"{group} could not commit {first}"
        reader = actors.connect(namespace=NAMESPACE, timeout_s=10.0)  # routing names the leader
        assert reader.fetch_offsets(group).offsets().get(ZOMBIE_KEY) == first
        os.kill(pid, signal.SIGSTOP)
        self.stopped.add(pid)
        acked = False
        try:
            # A client's call to a stopped actor waits for it whatever the client's deadline:
            # the commit goes to the new leader only, once the controller names one.
            try:
                replaced = lambda: rows(self.client)[partition].get("leader_node") not in (  # noqa: E731
                    None, row["leader_node"])
                wait_for(f"a new leader of partition {partition} while its leader is stopped", replaced, 30)
            except TimeoutError as exc:
                self.stale.append(str(exc))
                return f"zombie leader of partition {partition}: not replaced while it was stopped"
            self.zombie_offset += 1
            second = self.zombie_offset
            fresh = actors.connect(namespace=NAMESPACE, timeout_s=30.0)
            acked, error = ThreadResult(lambda: committed_key(fresh, group, second)).get(timeout_s=40)
            if not acked:
                self.stale.append(f"the new leader of partition {partition} acknowledged no commit while the "
                                  f"old one was stopped ({error!r:.100})")
                return f"zombie leader of partition {partition}: no commit while it was stopped"
            # Reads begin after `second` was acknowledged: both go to the stopped leader.
            raw = handle.handle_wire.remote(OffsetFetchRequest(group))
            read = ThreadResult(lambda: reader.fetch_offsets(group).offsets().get(ZOMBIE_KEY))
            time.sleep(0.5)
        finally:
            os.kill(pid, signal.SIGCONT)
            self.stopped.discard(pid)
        answers = [
            f"zombie: {self._zombie_answer(raw, second)}", f"reader: {self._reader_answer(read, second)}"
        ]
        return f"zombie leader of partition {partition} on {row['leader_node']} read after commit " \
               f"{second}: {'; '.join(answers)}"

    def _zombie_answer(self, raw: Any, acked: int) -> str:
        try:
            response = loads_response(ray.get(raw, timeout=30))
        except ray.exceptions.RayError as exc:
            return f"failed ({type(exc).__name__})"
        if isinstance(response, BaseException):
            return f"refused ({response!r:.60})"
        if response.error is not Errors.NONE:
            return f"refused ({response.error.name})"
        offset = response.offsets().get(ZOMBIE_KEY)
        if offset is None or offset < acked:
            self.stale.append(f"the deposed leader answered offset {offset} after {acked} was acknowledged")
        return f"offset {offset}"

    def _reader_answer(self, read: ThreadResult, acked: int) -> str:
        value, error = read.get(timeout_s=30)
        if error is not None:
            self.stale.append(f"a read of committed offsets failed within its deadline: {error!r:.120}")
            return f"failed ({error!r:.60})"
        if value is None or value < acked:
            self.stale.append(f"a client routed to the deposed leader read {value} after {acked} was "
                              "acknowledged")
        return f"offset {value}"

    # --------------------------------------------------- overlapping faults

    def overlap(self) -> str:
        """One node's disk full while another node's leader process is stopped for a few seconds."""
        partition, node, _, _ = self._replica(leader=False)
        others = [
            (p, r["leader_node"]) for p, r in rows(self.client).items()
            if r.get("leader_node") not in (None, node)
        ]
        inject(self.disks, node, "full")
        self.broken.add(node)
        stopped = ""
        try:
            time.sleep(1.0)
            if others:
                p, leader = self.rng.choice(sorted(others))
                _, pid = replica_actor(self.data_dir, p, leader)
                pause_s = self.rng.uniform(2.0, 4.0)
                os.kill(pid, signal.SIGSTOP)
                self.stopped.add(pid)
                try:
                    time.sleep(pause_s)
                finally:
                    os.kill(pid, signal.SIGCONT)
                    self.stopped.discard(pid)
                stopped = f", SIGSTOP leader of partition {p} on {leader} for {pause_s:.1f} s"
            time.sleep(1.0)
        finally:
            self.heal(node)
        return f"overlap: full disk on {node} (follower of partition {partition}){stopped}"

    def resume_all(self) -> None:
        for pid in list(self.stopped):
            os.kill(pid, signal.SIGCONT)
            self.stopped.discard(pid)
        for node in list(self.broken):
            self.heal(node)


class ThreadResult:
    """`call()` in a thread of its own: (value, exception) when it ends."""

    def __init__(self, call: Any) -> None:
        self._value: Any = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                self._error = exc

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def get(self, timeout_s: float) -> tuple[Any, BaseException | None]:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            return None, TimeoutError(f"no answer within {timeout_s} s")
        return self._value, self._error


def committed_key(client: actors.Client, group: str, offset: int) -> bool:
    try:
        response = client.commit_offsets(group, {ZOMBIE_KEY: offset})
    except CoordinatorUnavailableError:
        return False
    return response.errors() == {ZOMBIE_KEY: Errors.NONE}


def fault_plan(rng: random.Random, faults: int) -> list[str]:
    """Every kind once in the seed's order, then random ones; at most MAX_REMOVALS node removals."""
    plan = rng.sample(FAULTS, len(FAULTS))[:faults]
    while len(plan) < faults:
        kinds = [k for k in FAULTS if k != "remove_node" or plan.count(k) < MAX_REMOVALS]
        plan.append(rng.choice(kinds))
    return plan


def serving(client: actors.Client) -> bool:
    """Every partition has an active leader and an ISR of at least min.insync.replicas."""
    return all(
        r.get("state") == "ACTIVE" and r.get("role") == "leader" and len(r["isr"]) >= MIN_ISR
        for r in rows(client).values()
    )


def survive(client: actors.Client, injector: Faults, kind: str, loads: list[KeyedLoad]) -> list[str]:
    """One fault from a fully replicated state, then the recovery checks; a gap over
    MAX_GAP_S, to report (not a failure)."""
    started, errors = time.monotonic(), sum(load.errors for load in loads)
    injector.allowed_gap_s = MAX_GAP_S
    what = getattr(injector, kind)()
    healed = time.monotonic()
    time.sleep(RECOVERY_S)
    wait_for(f"a leader and min ISR everywhere after: {what}", lambda: serving(client), timeout_s=60.0)
    acked = [load.acked for load in loads]
    wait_for(f"every group committing after: {what}", lambda: all(
        load.acked > before for load, before in zip(loads, acked, strict=True)
    ), timeout_s=60.0)
    gap, group = longest_gap(loads, started, time.monotonic())
    failed = sum(load.errors for load in loads) - errors
    print(f"fault: {what}; longest gap without a commit: {gap:.1f} s ({group}); "
          f"{failed} commit(s) not acknowledged", flush=True)
    # A removed node's replicas are moved after REASSIGN_DELAY_S, then catch up.
    try:
        wait_for(f"every partition back to a full ISR within {CONVERGE_S:.0f} s after: {what}",
                 lambda: fully_replicated(client), timeout_s=max(0.0, healed + CONVERGE_S - time.monotonic()))
    except TimeoutError:
        for p, row in rows(client).items():
            print(f"  partition {p}: {row.get('state')} {row.get('role')} on {row.get('leader_node')}, "
                  f"ISR {row.get('isr')} of {row.get('replicas')}, followers {row.get('followers')}",
                  flush=True)
        raise
    print(f"  full ISR everywhere {time.monotonic() - healed:.1f} s after the last heal", flush=True)
    if kind not in OVERLAPPING and gap > injector.allowed_gap_s:
        return [f"{group} went {gap:.1f} s without a commit (allowed {injector.allowed_gap_s:.1f} s) "
                f"after: {what}"]
    return []


def scenario(
    seed: int, faults: int, cluster: Cluster, disks: NodeDisks, kinds: list[str] | None = None
) -> None:
    """`kinds`: these faults in this order instead of the seed's plan (victims still drawn from the seed)."""
    rng = random.Random(seed)
    settings = dataclasses.replace(settings_for(disks.data_dir), replica_reassign_delay_s=REASSIGN_DELAY_S)
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    loads, stop, thread = start_keyed_load([g for p in range(PARTITIONS) for g in groups_on(client, p)])
    injector = Faults(client, cluster, disks, rng)
    plan = kinds or fault_plan(rng, faults)
    long_gaps: list[str] = []
    survived = 0
    try:
        for kind in plan:
            long_gaps += survive(client, injector, kind, loads)
            survived += 1
    finally:
        injector.resume_all()
        stop.set()
        thread.join(timeout=30)
        if survived < len(plan):
            print(f"stopped after {survived} of {len(plan)} faults; so far: {long_gaps + injector.stale}",
                  flush=True)
    wait_for("every partition serving", lambda: serving(client))
    lost = lost_commits(loads)
    total = sum(len(load.acked_all) for load in loads)
    lost_count = sum(map(len, lost.values()))
    print(f"{total} commits acknowledged, {lost_count} lost; {len(plan)} faults survived", flush=True)
    print(f"stale or failed reads: {len(injector.stale)}; gaps over {MAX_GAP_S:.0f} s: {len(long_gaps)} "
          f"{long_gaps}", flush=True)
    assert not lost, f"acknowledged commits lost: {lost}"
    assert not injector.stale, f"stale or failed reads: {injector.stale}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FAULT_SEED", "7")))
    parser.add_argument("--faults", type=int, default=len(FAULTS))
    parser.add_argument("--root", default=None, help="the disk rig's directory (a new one if not given)")
    parser.add_argument("--only", default="", help="comma-separated fault kinds to run in this order")
    args = parser.parse_args()
    kinds = [kind for kind in args.only.split(",") if kind]
    unknown = set(kinds) - set(FAULTS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULTS)}")
    print(f"seed {args.seed}", flush=True)
    with cluster_with_disks(WORKERS, NAMESPACE, root=args.root) as (cluster, disks):
        scenario(args.seed, args.faults, cluster, disks, kinds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
