"""A rolling restart of a 3-node RF 3 service while members commit (issue 48).

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share a process
with the test session's): `python -m tests.ray.rolling_scenario`. A simulated cluster of a
head and 2 workers runs the replicated service (2 partitions, RF 3, min ISR 2); one group
per partition commits without pause. `Client.rolling_restart` runs with a runtime_env and a
rolling setting: it must end DONE, `config get` showing the setting, every replica a new
actor (no name of before is left), every partition fully in sync, no acknowledged commit
lost, commits going on after it, and each Kafka gateway deployed with the service a new actor
at its old address, serving. Then a second roll during which a worker node is removed
and added back under its name (`raygroups.io/node`): it must pause, saying for what, and
finish by itself (issue 48: a fault needs no person). Prints the longest commit gap of the
first roll and the times. Exits non-zero if a check fails.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import ray

import actors
from actors.controller.cluster_view import PARTITION_ACTOR_PREFIX
from actors.core.node_names import NODE_LABEL
from actors.demo.sim_cluster import fully_replicated, quick_failover_settings, sim_node_name, wait_for
from gateway import deploy

from tests.gateway.gateway_support import assert_served
from tests.ray.cluster_support import simulated_cluster
from tests.ray.fault_scenario import longest_gap
from tests.ray.replication_scenario import (
    NAMESPACE,
    check_nothing_lost,
    groups_on,
    start_load,
)

PARTITIONS = 2  # few actors to restart: a short test on CI's 2 cores


def partition_actor_names(namespace: str) -> set[str]:
    return {
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == namespace and a["name"].startswith(PARTITION_ACTOR_PREFIX)
    }


def roll_through_a_node_loss(client: actors.Client, cluster: Any) -> tuple[float, str]:
    """A roll during which a worker is removed and added back under its name: it pauses and
    finishes by itself. (seconds it took, what it said it waited for)."""
    began = time.monotonic()
    started = client.rolling_restart(settings={"commit_timeout_ms": 4500}, wait=False)
    name = [n for n in started["nodes"] if n != "head"][-1]
    cluster.remove_node(next(w for w in cluster.worker_nodes if sim_node_name(w) == name))
    said: list[str] = []

    def paused() -> bool:
        status = client.rolling_status()
        if status["paused"]:
            said.append(status["waiting"])
        return bool(status["paused"])

    wait_for("the roll paused by the lost node", paused, 120.0)
    cluster.add_node(num_cpus=1, labels={NODE_LABEL: name})
    wait_for("the roll done by itself", lambda: not client.rolling_status()["running"], 240.0)
    status = client.rolling_status()
    assert status["phase"] == "done" and status["stopped"] is None and status["version"] == 2, status
    return time.monotonic() - began, said[0]


def main() -> int:
    with simulated_cluster(2, NAMESPACE, "raygroups-rolling-", named=True) as (cluster, path):
        settings = quick_failover_settings(path, NAMESPACE, PARTITIONS)
        client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
        wait_for("every partition fully replicated", lambda: fully_replicated(client))
        before = partition_actor_names(NAMESPACE)
        assert len(before) == 3 * PARTITIONS, before
        gateways = deploy.start_gateways(deploy.GatewaySpec(port=0), NAMESPACE)
        gateway_ids = {a._actor_id for a in deploy.gateway_actors(NAMESPACE)}
        loads, stop, thread = start_load([g for p in range(PARTITIONS) for g in groups_on(client, p, 1)])
        wait_for("every group committing", lambda: all(load.acked > 2 for load in loads), 30.0)
        began = time.monotonic()
        status = client.rolling_restart(
            runtime_env={"env_vars": {"RAYGROUPS_ROLLED": "1"}}, settings={"commit_timeout_ms": 4000},
            timeout_s=240.0,
        )
        ended = time.monotonic()
        assert status["phase"] == "done" and status["stopped"] is None, status
        [row] = client.config(["commit_timeout_ms"])  # what the roll set is what config get shows
        assert (row["value"], row["set_by"]) == (4000, "rolling-restart 1"), row
        after = partition_actor_names(NAMESPACE)
        assert len(after) == 3 * PARTITIONS and not before & after, (before, after)
        assert len(status["gateways_done"]) == len(gateways) == 3, status
        assert deploy.gateway_addresses(NAMESPACE) == gateways  # each at its old address
        assert not gateway_ids & {a._actor_id for a in deploy.gateway_actors(NAMESPACE)}
        for _, _, port in gateways:
            assert_served(port)
        wait_for("every partition fully replicated", lambda: fully_replicated(client))
        during = {load.group: load.acked for load in loads}
        wait_for("commits after the roll", lambda: all(load.acked > during[load.group] for load in loads))
        healed_s, waited_for = roll_through_a_node_loss(client, cluster)
        wait_for("every partition fully replicated", lambda: fully_replicated(client), 120.0)
        during = {load.group: load.acked for load in loads}
        wait_for("commits after the second roll",
                 lambda: all(load.acked > during[load.group] for load in loads))
        stop.set()
        thread.join(timeout=30)
        gap, group = longest_gap(loads, began, ended)
        commits = check_nothing_lost(loads)
        print(f"rolled {len(status['nodes'])} nodes in {ended - began:.1f} s; longest commit gap "
              f"{gap:.2f} s ({group}); a roll through a node's loss and return in {healed_s:.1f} s, "
              f"paused: {waited_for!r}; {commits} commits acknowledged, none lost")
        actors.stop(NAMESPACE)
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
