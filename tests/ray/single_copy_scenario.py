"""Replication factor 1 on node-local disks: the node holding a partition's log
is removed, the partition waits offline for it (nothing moves), and serves
again, its commits intact, once a node of that name is back.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster): `python -m tests.ray.single_copy_scenario`.
The simulated nodes are named (`raygroups.io/node`), so the returning node is
the lost one; their data directory is one on this host, but the service is
not told so (`shared_data_dir` False), as on machines with their own disks.
Prints what happened and exits non-zero if a check fails.
"""

from __future__ import annotations

import sys

import actors
from actors.core.node_names import NODE_LABEL
from actors.core.settings import ServiceSettings
from actors.demo.sim_cluster import FAST_NODE_FAILURE, wait_for, worker_name

from tests.ray.cluster_support import simulated_cluster

NAMESPACE = "raygroups-single-copy"


def main() -> int:
    nodes = simulated_cluster(
        workers=2, namespace=NAMESPACE, prefix="raygroups-single-copy-", system_config=FAST_NODE_FAILURE,
        named=True,
    )
    with nodes as (cluster, data_dir):
        settings = ServiceSettings(data_dir=data_dir, num_partitions=4, namespace=NAMESPACE)
        client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
        wait_for("every partition serving", lambda: all(r["state"] == "ACTIVE" for r in client.status()))
        lost = worker_name(1)
        partition = 0
        if client.status()[partition]["node_id"] != lost:
            client.reassign(partition, lost)
        group = next(g for g in (f"g{i}" for i in range(10_000)) if client.partition_for(g) == partition)
        client.commit_offsets(group, {("t", 0): 42})
        on_lost = {r["partition"] for r in client.status() if r["node_id"] == lost}
        victim = next(w for w in cluster.worker_nodes if w._ray_params.labels.get(NODE_LABEL) == lost)
        cluster.remove_node(victim)

        def settled() -> bool:
            # Every partition of the lost node waits offline for it; every other one serves.
            return all(
                r.get("awaited_node") == lost if r["partition"] in on_lost else r["state"] == "ACTIVE"
                for r in client.status()
            )

        wait_for("the lost node's partitions offline, waiting for it, and the others serving", settled)
        cluster.add_node(num_cpus=1, labels={NODE_LABEL: lost})
        cluster.wait_for_nodes()

        def served_there() -> bool:
            row = client.status()[partition]
            return (row["state"], row.get("node_id")) == ("ACTIVE", lost)

        wait_for("the partition serving on its node again", served_there)
        assert client.fetch_offsets(group).offsets() == {("t", 0): 42}
        print(f"partition {partition} waited offline for {lost} and served again there; commits intact")
        actors.stop(NAMESPACE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
