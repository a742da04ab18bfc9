"""Seeded fault injection on replicated offsets partitions while consumers commit.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster):
`python -m tests.ray.replicated_fault_scenario [--seed N] [--faults N]`
(FAULT_SEED sets the default seed).

A simulated cluster of 5 nodes (head + 4 workers, each with its own disk),
replication factor 3, min.insync.replicas 2, lost nodes' replicas moved after
`REASSIGN_DELAY_S`. Every group (the same number on every partition) commits
without pause, as tests/ray/fault_scenario.py does, but each commit n to a
key of its own (topic partition n, offset n) and remembers every one
acknowledged: an acknowledged commit lost in a failover cannot hide behind a
later commit of the same key, so the final fetch counts every loss. Faults,
drawn from the seed, one at a time, each from a fully replicated state:
`ray.kill` of a leader replica, SIGKILL of a leader's process, `ray.kill` of
a follower, SIGSTOP of a follower for a few seconds, the controller killed
(Ray restarts it), a worker node removed with its disk (at most
`MAX_REMOVALS`, so 3 nodes stay for 3 replicas).
After each: a recovery window, then every partition must have a leader and
an ISR of at least min.insync.replicas and every group must commit again;
the longest time a group went without a commit is printed. At the end every
acknowledged commit must be in its group's offsets.
Prints `N commits acknowledged, 0 lost; K faults survived`; exits non-zero if
a check fails. No process is left stopped.
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
from actors.retry import CoordinatorUnavailableError
from actors.settings import CONTROLLER_NAME
from coordinator import Errors

from tests.ray.cluster_support import simulated_cluster
from tests.ray.fault_scenario import GroupLoad, longest_gap
from tests.ray.replication_scenario import (
    NAMESPACE,
    PARTITIONS,
    fully_replicated,
    groups_on,
    remove_with_disk,
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
FAULTS = (
    "kill_leader", "sigkill_leader", "kill_follower", "sigstop_follower", "kill_controller", "remove_node",
)
TOPIC = "t"


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

    def __init__(self, client: actors.Client, cluster: Cluster, data_dir: str, rng: random.Random) -> None:
        self.client, self.cluster, self.data_dir, self.rng = client, cluster, data_dir, rng
        self.removed = 0
        # Processes stopped and not yet resumed (resumed by `resume_all` whatever happens).
        self.stopped: set[int] = set()

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

    def resume_all(self) -> None:
        for pid in list(self.stopped):
            os.kill(pid, signal.SIGCONT)
            self.stopped.discard(pid)


def fault_plan(rng: random.Random, faults: int) -> list[str]:
    """Every kind once in the seed's order, then random ones; at most MAX_REMOVALS node removals."""
    plan = rng.sample(FAULTS, len(FAULTS))[:faults]
    while len(plan) < faults:
        kinds = FAULTS if plan.count("remove_node") < MAX_REMOVALS else FAULTS[:-1]
        plan.append(rng.choice(kinds))
    return plan


def serving(client: actors.Client) -> bool:
    """Every partition has an active leader and an ISR of at least min.insync.replicas."""
    return all(
        r.get("state") == "ACTIVE" and r.get("role") == "leader" and len(r["isr"]) >= MIN_ISR
        for r in rows(client).values()
    )


def survive(client: actors.Client, injector: Faults, kind: str, loads: list[KeyedLoad]) -> None:
    """One fault from a fully replicated state, then the recovery checks."""
    wait_for("every partition fully replicated", lambda: fully_replicated(client), timeout_s=90.0)
    started, errors = time.monotonic(), sum(load.errors for load in loads)
    what = getattr(injector, kind)()
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


def scenario(seed: int, faults: int, data_dir: str, cluster: Cluster) -> None:
    rng = random.Random(seed)
    settings = dataclasses.replace(settings_for(data_dir), replica_reassign_delay_s=REASSIGN_DELAY_S)
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    loads, stop, thread = start_keyed_load([g for p in range(PARTITIONS) for g in groups_on(client, p)])
    injector = Faults(client, cluster, data_dir, rng)
    plan = fault_plan(rng, faults)
    try:
        for kind in plan:
            survive(client, injector, kind, loads)
    finally:
        injector.resume_all()
        stop.set()
        thread.join(timeout=30)
    wait_for("every partition serving", lambda: serving(client))
    lost = lost_commits(loads)
    total = sum(len(load.acked_all) for load in loads)
    lost_count = sum(map(len, lost.values()))
    print(f"{total} commits acknowledged, {lost_count} lost; {len(plan)} faults survived", flush=True)
    assert not lost, f"acknowledged commits lost: {lost}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FAULT_SEED", "7")))
    parser.add_argument("--faults", type=int, default=len(FAULTS))
    args = parser.parse_args()
    print(f"seed {args.seed}", flush=True)
    nodes = simulated_cluster(workers=WORKERS, namespace=NAMESPACE, prefix="raygroups-replicated-faults-")
    with nodes as (cluster, data_dir):
        scenario(args.seed, args.faults, data_dir, cluster)
        actors.stop(NAMESPACE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
