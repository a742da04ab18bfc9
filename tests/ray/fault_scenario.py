"""Seeded fault injection on a 3-node cluster while consumers commit.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster):
`python -m tests.ray.fault_scenario [--seed N] [--faults N]`.

Every group commits increasing offsets without pause, each from its own
task, and remembers the last offset acknowledged. Faults, drawn from the
seed, one at a time and each followed by a recovery window: `ray.kill` of a
leader, SIGKILL of a leader's process, the controller killed while it moves
a partition, the standbys killed, a worker node removed. Checks:
- no acknowledged commit is lost: each group's committed offset at the end
  is at least the last one acknowledged;
- every group commits again after each fault (the longest time a group went
  without a commit is printed: a figure that grows with the machine's load,
  not a check; DESIGN 7, tests assert no wall time);
- at the end, every partition actor alive is one the controller owns.
Prints the faults, the longest gap per fault and `faults survived`; exits
non-zero if a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.cluster_utils import Cluster

import actors
from actors.client.retry import CoordinatorUnavailableError
from actors.controller.ray_store import GcsKvStore
from actors.core.settings import CONTROLLER_NAME, ServiceSettings
from actors.demo.sim_cluster import wait_for
from coordinator import Errors

from tests.ray.cluster_support import simulated_cluster

NAMESPACE = "raygroups-faults"
PARTITIONS = 4
GROUPS = 8
RECOVERY_S = 6.0
FAULTS = ("kill_leader", "sigkill_leader", "kill_controller_mid_reassign", "kill_standbys")
ACTOR_PREFIX = "raygroups-offsets-"


@dataclass
class GroupLoad:
    """One group's committer: last acknowledged offset and when commits succeeded."""

    group: str
    acked: int = -1
    attempted: int = -1
    successes: list[float] = field(default_factory=list)
    errors: int = 0
    last_error: str = ""  # the latest failed commit's exception or error code, for a failure's report


async def commit_forever(client: actors.Client, load: GroupLoad, stop: threading.Event) -> None:
    offset = 0
    while not stop.is_set():
        offset += 1
        load.attempted = offset
        try:
            response = await client.commit_offsets_async(load.group, {("t", 0): offset})
        except (CoordinatorUnavailableError, ray.exceptions.RayError) as exc:
            load.errors += 1
            load.last_error = f"{exc!r:.300}"
            continue
        if response.errors() == {("t", 0): Errors.NONE}:
            load.acked = offset
            load.successes.append(time.monotonic())
        else:
            load.errors += 1
            load.last_error = str(response.errors())
        await asyncio.sleep(0.02)


def run_load(client: actors.Client, loads: list[GroupLoad], stop: threading.Event) -> threading.Thread:
    async def main() -> None:
        await asyncio.gather(*(commit_forever(client, load, stop) for load in loads))

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    return thread


def longest_gap(loads: list[GroupLoad], start: float, end: float) -> tuple[float, str]:
    """The longest time within [start, end] that a group went without a successful commit."""
    worst = (0.0, "")
    for load in loads:
        times = [start, *(t for t in load.successes if start < t < end), end]
        gap = max(b - a for a, b in zip(times, times[1:]))
        worst = max(worst, (gap, load.group))
    return worst


class Faults:
    def __init__(self, client: actors.Client, cluster: Cluster, data_dir: str, rng: random.Random) -> None:
        self.client, self.cluster, self.data_dir, self.rng = client, cluster, data_dir, rng

    def leader(self) -> dict[str, Any]:
        active = [row for row in self.client.status() if row.get("state") == "ACTIVE"]
        return self.rng.choice(active)

    def kill_leader(self) -> str:
        row = self.leader()
        # The routing names a leader once the controller recorded it serving, a
        # moment after its status says ACTIVE; this client's copy may be older.
        deadline = time.monotonic() + 10.0
        self.client.refresh()
        while (handle := self.client.leader(row["partition"])) is None and time.monotonic() < deadline:
            time.sleep(0.05)
            self.client.refresh()
        ray.kill(handle, no_restart=True)
        return f"ray.kill leader of partition {row['partition']}"

    def sigkill_leader(self) -> str:
        row = self.leader()
        os.kill(row["pid"], signal.SIGKILL)
        return f"SIGKILL leader of partition {row['partition']} (pid {row['pid']})"

    def kill_controller_mid_reassign(self) -> str:
        partition = self.rng.randrange(PARTITIONS)
        controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
        # The epoch it saw: Ray retries the call on the restarted controller, which must not move it twice.
        epoch = next(row["epoch"] for row in self.client.status() if row["partition"] == partition)
        controller.reassign.remote(partition, None, epoch)
        time.sleep(self.rng.uniform(0.0, 0.3))
        ray.kill(controller, no_restart=False)
        return f"controller killed while reassigning partition {partition}"

    def kill_standbys(self) -> str:
        owned = owned_actors(self.data_dir)
        standbys = owned["standbys"]
        for name in standbys:
            try:
                ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
            except ValueError:
                pass
        return f"killed {len(standbys)} standby actor(s)"

    def remove_node(self) -> str:
        controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
        controller_node = ray.get(controller.stats.remote())["node_id"]
        workers = [n for n in self.cluster.worker_nodes if n.node_id != controller_node]
        victim = self.rng.choice(workers)
        self.cluster.remove_node(victim)
        return f"removed worker node {victim.node_id[:12]}"


def owned_actors(data_dir: str) -> dict[str, list[str]]:
    data = GcsKvStore(NAMESPACE, data_dir).load()
    assert data is not None, "the controller saved no metadata"
    return {"leaders": [n for n in data["actors"].values() if n], "standbys": list(data.get("standbys", []))}


def wait_settled(client: actors.Client, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if all(row.get("state") == "ACTIVE" for row in client.status()):
                return
        except ray.exceptions.RayError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"partitions did not settle: {client.status()}")


def orphans(data_dir: str) -> list[str]:
    """Partition actors alive that the controller does not own."""
    owned = owned_actors(data_dir)
    mine = set(owned["leaders"]) | set(owned["standbys"])
    named = ray.util.list_named_actors(all_namespaces=True)
    return sorted(
        a["name"] for a in named if a["namespace"] == NAMESPACE and a["name"].startswith(ACTOR_PREFIX)
        and a["name"] not in mine
    )


def scenario(seed: int, faults: int, data_dir: str, cluster: Cluster) -> None:
    rng = random.Random(seed)
    settings = ServiceSettings(
        data_dir=data_dir, num_partitions=PARTITIONS, namespace=NAMESPACE,
        probe_interval_s=0.5, probe_timeout_s=2.0,
        shared_data_dir=True,  # the simulated nodes share one: a removed node's partitions move
    )
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    # The same number of groups on every partition.
    names = [f"group-{i}" for i in range(1_000)]
    groups = [
        name
        for p in range(PARTITIONS)
        for name in [n for n in names if client.partition_for(n) == p][: GROUPS // PARTITIONS]
    ]
    loads = [GroupLoad(g) for g in groups]
    stop = threading.Event()
    worker = run_load(actors.connect(namespace=NAMESPACE, timeout_s=20.0), loads, stop)
    injector = Faults(client, cluster, data_dir, rng)
    # Every kind of fault once, in the seed's order, then random ones; a node removal last.
    plan = rng.sample(FAULTS, len(FAULTS)) + [rng.choice(FAULTS) for _ in range(faults - len(FAULTS) - 1)]
    plan.append("remove_node")
    try:
        time.sleep(2.0)
        for kind in plan:
            wait_settled(client)
            started = time.monotonic()
            what = getattr(injector, kind)()
            time.sleep(RECOVERY_S)
            wait_settled(client)
            acked = [load.acked for load in loads]
            wait_for(f"every group committing after: {what}", lambda acked=acked: all(
                load.acked > before for load, before in zip(loads, acked, strict=True)
            ))
            gap, group = longest_gap(loads, started, time.monotonic())
            print(f"fault: {what}; longest gap without a commit: {gap:.1f} s ({group})", flush=True)
    finally:
        stop.set()
        worker.join(timeout=30)
    wait_settled(client)
    fetch = actors.connect(namespace=NAMESPACE)
    for load in loads:
        committed = fetch.fetch_offsets(load.group).offsets().get(("t", 0), -1)
        assert committed >= load.acked, f"{load.group}: acknowledged {load.acked}, committed {committed}"
        assert load.acked > 0, f"{load.group} never committed"
    deadline = time.monotonic() + 30
    while (left := orphans(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"orphan partition actors: {left}"
    total = sum(len(load.successes) for load in loads)
    print(f"{total} commits acknowledged, none lost; {len(plan)} faults survived", flush=True)
    actors.stop(NAMESPACE)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FAULT_SEED", "7")))
    parser.add_argument("--faults", type=int, default=len(FAULTS) + 2)
    args = parser.parse_args()
    print(f"seed {args.seed}", flush=True)
    with simulated_cluster(workers=2, namespace=NAMESPACE, prefix="raygroups-faults-") as (cluster, data_dir):
        scenario(args.seed, args.faults, data_dir, cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
