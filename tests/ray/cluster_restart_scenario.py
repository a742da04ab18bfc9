"""A full restart of the Ray cluster under a replicated service: recovered from the replicas' disks.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster):
`python -m tests.ray.cluster_restart_scenario`. A simulated 4-node cluster
whose nodes carry the `raygroups.io/node` label runs the service while
consumers commit; the whole Ray cluster is then shut down under it (no
orderly stop of the service; the GCS, and the controller's metadata in it,
are gone). A NEW simulated cluster starts with the same node names on the
same data directory; `actors.start` finds no metadata, rebuilds it from the
replicas' `partition-state.json` files, and every acknowledged commit is
there (OffsetFetch). With `--lose-disk` the node that led the most partitions
comes back without its disk (its directory deleted between the two lives):
the partitions it led, whose newest state file went with it, elect from the
other replicas (`actors/controller/forgotten_logs.py`), none is held, and its
replicas are rebuilt empty and catch up. The topic registry's topics, ids and
end offsets (offsets partition 0's log) come back too, wherever Ray starts it.
Exits non-zero if a check fails.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import shutil
import sys
import tempfile
import time
from typing import Any

import actors
from actors.controller.ray_store import GcsKvStore
from actors.demo.sim_cluster import HEAD_NAME, fully_replicated, node_disk, wait_for, worker_name
from actors.demo.sim_cluster import status_rows as rows

from tests.ray.cluster_support import simulated_cluster
from tests.ray.fault_scenario import GroupLoad
from tests.ray.replication_scenario import (
    NAMESPACE,
    PARTITIONS,
    check_nothing_lost,
    groups_on,
    settings_for,
    start_load,
)

WORKERS = 3
NAMES = {HEAD_NAME, *(worker_name(i) for i in range(1, WORKERS + 1))}


TOPIC = "orders"


def first_life(
    data_dir: str, grow: bool, mid_grow: bool
) -> tuple[list[GroupLoad], dict[int, dict[str, object]], Any]:
    """Serve and commit on the first cluster (with `grow`, growing the partition count from
    PARTITIONS to twice that while the groups commit; with `mid_grow`, starting that growth
    and shutting the cluster down while it is under way); it is shut down under the service
    on return."""
    with simulated_cluster(WORKERS, NAMESPACE, "unused-", data_dir=data_dir, named=True) as (cluster, path):
        client = actors.start(settings=settings_for(path), namespace=NAMESPACE, address=cluster.address)
        wait_for("every partition fully replicated", lambda: fully_replicated(client))
        client.create_topic(TOPIC, 3)
        client.set_end_offsets({(TOPIC, p): 100 + p for p in range(3)})
        topics = (client.describe_topics(), client.topic_ids(), client.end_offsets())
        before = rows(client)
        assert all(set(row["replicas"]) <= NAMES for row in before.values()), before  # replicas by name
        loads, stop, thread = start_load([g for p in range(PARTITIONS) for g in groups_on(client, p)])
        time.sleep(3.0)
        if grow:
            client.repartition(2 * PARTITIONS)
            wait_for("every partition fully replicated", lambda: fully_replicated(client), 120.0)
            before = rows(client)
        stop.set()
        thread.join(timeout=30)
        assert all(load.acked > 0 for load in loads), [(load.group, load.acked) for load in loads]
        if mid_grow:
            cut_mid_plan(client)
        return loads, before, topics


def cut_mid_plan(client: Any) -> None:
    """Start growing to 2 * PARTITIONS and return (the cluster is then shut down) once the
    plan is under way: at the first source switched if the handoffs are seen before they
    all end, else as soon as the controller has recorded the plan."""
    status = client.repartition(2 * PARTITIONS, wait=False)
    assert status["running"], status
    with contextlib.suppress(TimeoutError):
        wait_for("a source switched", lambda: client.repartition_status()["switched"] >= 1, 30.0, 0.01)
    status = client.repartition_status()
    print(f"cluster shut down mid-repartition: {status}", flush=True)
    assert status["running"], f"the repartition ended before the cut: {status}"


def lose_disk(data_dir: str, before: dict[int, dict[str, object]]) -> str:
    """Delete the disk of the node that led the most partitions; its name."""
    led = collections.Counter(str(row["leader_node"]) for row in before.values())
    node = led.most_common(1)[0][0]
    shutil.rmtree(node_disk(data_dir, node))
    print(f"{node} comes back without its disk (it led {led[node]} of {PARTITIONS} partitions)", flush=True)
    return node


def second_life(
    data_dir: str, loads: list[GroupLoad], before: dict[int, dict[str, object]], lost: str | None,
    topics: Any, mid_grow: bool,
) -> None:
    """`before`: the partitions' rows at the end of the first life (as many as it grew to;
    with `mid_grow`, those of before the growth)."""
    with simulated_cluster(WORKERS, NAMESPACE, "unused-", data_dir=data_dir, named=True) as (cluster, path):
        assert GcsKvStore(NAMESPACE, path).load() is None, "the new cluster's GCS is not new"
        client = actors.start(settings=settings_for(path), namespace=NAMESPACE, address=cluster.address)
        wait_for("every partition led and fully replicated again", lambda: fully_replicated(client), 120.0)
        if mid_grow:
            # The plan completes (it was recorded in a state file) or rolled back (it was
            # not); in both cases a repartition then reaches the doubled count.
            status = client.repartition_status()
            print(f"after the restart: {status}", flush=True)
            wait_for("the resumed plan done", lambda: not client.repartition_status()["running"], 120.0)
            if client.repartition_status()["partitions"] != 2 * PARTITIONS:
                client.repartition(2 * PARTITIONS, timeout_s=120.0)
            wait_for("every partition fully replicated", lambda: fully_replicated(client), 120.0)
        after = rows(client)
        expected = list(range(2 * PARTITIONS)) if mid_grow else sorted(before)
        assert sorted(after) == expected, (sorted(after), expected)
        for p, row in ((p, after[p]) for p in before):
            # Where a lost disk held the only record of a replica's node, another live node has it.
            same = len if lost else sorted
            assert same(row["replicas"]) == same(before[p]["replicas"]), (p, before[p], row)
            assert row["epoch"] > before[p]["epoch"] and not row.get("held"), (p, before[p], row)
        total = check_nothing_lost(loads)
        assert (client.describe_topics(), client.topic_ids(), client.end_offsets()) == topics
        actors.stop(NAMESPACE)
    print(f"Ray cluster restarted (GCS lost): {len(before)} partitions recovered from the replicas' "
          f"disks under their node names; {total} commits acknowledged, none lost", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lose-disk", action="store_true", help="a node comes back without its disk")
    parser.add_argument("--grow", action="store_true", help="the partition count grew before the restart")
    parser.add_argument("--mid-grow", action="store_true", help="the restart cuts a growth under way")
    args = parser.parse_args(argv)
    data_dir = tempfile.mkdtemp(prefix="raygroups-cluster-restart-")
    try:
        loads, before, topics = first_life(data_dir, args.grow, args.mid_grow)
        lost = lose_disk(data_dir, before) if args.lose_disk else None
        second_life(data_dir, loads, before, lost, topics, args.mid_grow)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
