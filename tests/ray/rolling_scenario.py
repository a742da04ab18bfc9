"""A rolling restart of a 3-node RF 3 service while members commit (issue 48).

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share a process
with the test session's): `python -m tests.ray.rolling_scenario`. A simulated cluster of a
head and 2 workers runs the replicated service (2 partitions, RF 3, min ISR 2); one group
per partition commits without pause. `Client.rolling_restart` runs with a runtime_env and a
rolling setting: it must end DONE, `config get` showing the setting, every replica a new
actor (no name of before is left), every partition fully in sync, no acknowledged commit
lost, commits going on after it.
Prints the longest commit gap and the time. Exits non-zero if a check fails.
"""

from __future__ import annotations

import sys
import time

import ray

import actors
from actors.controller.cluster_view import PARTITION_ACTOR_PREFIX
from actors.demo.sim_cluster import fully_replicated, quick_failover_settings, wait_for

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


def main() -> int:
    with simulated_cluster(2, NAMESPACE, "raygroups-rolling-") as (cluster, path):
        settings = quick_failover_settings(path, NAMESPACE, PARTITIONS)
        client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
        wait_for("every partition fully replicated", lambda: fully_replicated(client))
        before = partition_actor_names(NAMESPACE)
        assert len(before) == 3 * PARTITIONS, before
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
        wait_for("every partition fully replicated", lambda: fully_replicated(client))
        during = {load.group: load.acked for load in loads}
        wait_for("commits after the roll", lambda: all(load.acked > during[load.group] for load in loads))
        stop.set()
        thread.join(timeout=30)
        gap, group = longest_gap(loads, began, ended)
        commits = check_nothing_lost(loads)
        print(f"rolled {len(status['nodes'])} nodes in {ended - began:.1f} s; longest commit gap "
              f"{gap:.2f} s ({group}); {commits} commits acknowledged, none lost")
        actors.stop(NAMESPACE)
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
