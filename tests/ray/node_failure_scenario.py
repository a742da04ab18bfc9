"""A worker node dies: its single-copy partitions move to the remaining nodes.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster): `python -m tests.ray.node_failure_scenario`.
Prints the moves and exits non-zero if any check fails.
"""

from __future__ import annotations

import sys
import time

import ray

import actors
from actors.core.settings import CONTROLLER_NAME, ServiceSettings

from tests.ray.cluster_support import simulated_cluster


def main() -> int:
    nodes = simulated_cluster(workers=2, namespace="raygroups", prefix="raygroups-nodes-")
    with nodes as (cluster, data_dir):
        # One copy on a directory every simulated node shares, declared so: the
        # single-copy failover (replicated partitions have scenarios of their own).
        settings = ServiceSettings(data_dir=data_dir, num_partitions=6, shared_data_dir=True)
        client = actors.start(settings=settings, address=cluster.address)
        controller_node = ray.get(ray.get_actor(CONTROLLER_NAME).stats.remote())["node_id"]
        # The victim: a worker without the controller. Ray may have placed no
        # partition there: then one is moved there first, as an operator would.
        victim = next(w for w in cluster.worker_nodes if w.node_id != controller_node)
        if victim.node_id not in {p["node_id"] for p in client.status()}:
            client.reassign(0, victim.node_id)
        status = client.status()
        moved = [p["partition"] for p in status if p["node_id"] == victim.node_id]
        assert moved, f"no partition on the victim node {victim.node_id}: {status}"
        groups = {
            p: next(g for g in (f"g{i}" for i in range(10_000)) if client.partition_for(g) == p)
            for p in moved
        }
        for p, group in groups.items():
            client.commit_offsets(group, {("t", 0): 100 + p})
        cluster.remove_node(victim)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = {p["partition"]: p for p in client.status()}
            if all(
                now[p].get("state") == "ACTIVE" and now[p].get("node_id") != victim.node_id for p in moved
            ):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"partitions did not move: {client.status()}")
        for p, group in groups.items():
            assert client.fetch_offsets(group).offsets() == {("t", 0): 100 + p}
        print(f"moved partitions {moved} off node {victim.node_id[:12]}; commits intact")
        actors.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
