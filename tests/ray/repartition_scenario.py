"""Growing the offsets partition count of a replicated service (RF 3) under load, with the
controller and a source partition's leader killed midway (issue 46's crash safety).

Run in its own process: `python -m tests.ray.repartition_scenario CASE [SEED]`, CASE one of:
- `kills`: 4 partitions grow to 8 while groups of every partition commit; once the first
  source has switched, the controller is killed (Ray restarts it, and it resumes the
  recorded plan), then the leader of a source still handing off (or of any source) is
  killed (a follower takes over with its hot copy; the handoff is retried with it). The
  repartition finishes by itself; every acknowledged commit is where its group now lives.
Exits non-zero if a check fails.
"""

from __future__ import annotations

import random
import sys
import time

import ray
from ray.cluster_utils import Cluster

import actors
from actors.core.settings import CONTROLLER_NAME
from actors.demo.sim_cluster import fully_replicated, wait_for

from tests.ray.cluster_support import run_case
from tests.ray.replication_scenario import NAMESPACE, check_nothing_lost, groups_on, settings_for, start_load


def kills(cluster: Cluster, data_dir: str) -> None:
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    rng = random.Random(seed)
    client = actors.start(settings=settings_for(data_dir), namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    loads, stop, thread = start_load([g for p in range(4) for g in groups_on(client, p, 2)])
    wait_for("every group committed", lambda: all(load.acked > 0 for load in loads))
    controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
    client.repartition(8, wait=False)
    wait_for("a source switched", lambda: client.repartition_status().get("switched", 8) >= 1, 120)
    time.sleep(rng.uniform(0, 0.2))
    ray.kill(controller, no_restart=False)
    wait_for("the controller back", lambda: bool(ray.get(controller.stats.remote(), timeout=5)))
    client.refresh()
    status = client.repartition_status()
    source = rng.randrange(4)
    ray.kill(client.leader(source), no_restart=True)
    wait_for("the repartition done", lambda: not client.repartition_status()["running"], 180)
    client.refresh()
    wait_for("every partition fully replicated", lambda: fully_replicated(client), 120)
    seen = {load.group: load.acked for load in loads}
    wait_for("every group commits at its new partition", lambda: all(
        load.acked > seen[load.group] for load in loads
    ), 60)
    stop.set()
    thread.join(timeout=30)
    assert client.num_partitions == 8 and client.repartition_status()["partitions"] == 8
    total = check_nothing_lost(loads)
    moved = sum(1 for load in loads if client.partition_for(load.group) >= 4)
    print(f"grew 4 -> 8 with the controller and partition {source}'s leader killed midway "
          f"(at the kill: {status}); {moved} of {len(loads)} groups moved; {total} commits "
          "acknowledged, none lost", flush=True)


CASES = {"kills": kills}


def main() -> int:
    return run_case(CASES, NAMESPACE, "raygroups-repartition-")


if __name__ == "__main__":
    sys.exit(main())
