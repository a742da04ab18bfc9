"""The topic registry's state survives its node and its own death (issue 45, item 1).

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster):
`python -m tests.ray.registry_scenario CASE` with CASE one of:
- `registry-node`: the registry runs on the node that leads offsets
  partition 0 (where its state lives); that node is removed and its disk
  deleted while a reporter sends end offsets and consumers commit. Ray
  restarts the registry on another node, partition 0 fails over, and every
  topic, topic id and acknowledged end-offset sample is there.
- `killed-mid-write`: the registry is killed again and again while a
  reporter sends end offsets; every acknowledged sample is there, and the
  topics are unchanged.
Exits non-zero if a check fails.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import actors
from actors.client.retry import CoordinatorUnavailableError
from actors.client.topic_registry import TopicRegistry
from actors.client.topics import TopicError, registry_for, stop_topic_registry
from actors.core.settings import TOPIC_REGISTRY_NAME, ServiceSettings
from actors.core.singleton import detached_singleton
from actors.demo.sim_cluster import (
    fully_replicated,
    quick_failover_settings,
    remove_with_disk,
    wait_for,
    worker_node,
)
from actors.demo.sim_cluster import status_rows as rows

from tests.ray.cluster_support import run_case
from tests.ray.replication_scenario import check_nothing_lost, groups_on, start_load

NAMESPACE = "raygroups-replication"  # replication_scenario's load helpers connect there
TOPIC, PARTITIONS = "orders", 6
BASE_MS = time.time_ns() // 1_000_000  # within the history's retention


@dataclass
class Reporter:
    """Reports end offset n of every partition at time BASE_MS + n, n = 1, 2, ...: the
    acknowledged n are the samples that must survive."""

    acked: list[int] = field(default_factory=list)
    errors: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> threading.Thread:
        client = actors.connect(namespace=NAMESPACE, timeout_s=60.0)

        def report() -> None:
            n = 0
            while not self.stop.is_set():
                n += 1
                try:
                    client.set_end_offsets({(TOPIC, p): n for p in range(PARTITIONS)}, at_ms=BASE_MS + n)
                except (CoordinatorUnavailableError, TopicError, ray.exceptions.RayError):
                    self.errors += 1
                    continue
                self.acked.append(n)

        thread = threading.Thread(target=report, daemon=True)
        thread.start()
        return thread

    def wait_for_more(self, count: int) -> None:
        seen = len(self.acked)
        wait_for(f"{count} more acknowledged reports", lambda: len(self.acked) >= seen + count, 90)


def check_registry(client: actors.Client, ids: dict[str, object], reporter: Reporter) -> None:
    assert client.describe_topics() == {TOPIC: PARTITIONS}, client.describe_topics()
    assert client.topic_ids() == ids, (client.topic_ids(), ids)
    history = set(client.end_offset_history([TOPIC]))
    wanted = [(TOPIC, p, BASE_MS + n, n) for n in reporter.acked for p in range(PARTITIONS)]
    lost = [sample for sample in wanted if sample not in history]
    assert not lost, f"acknowledged samples lost: {lost[:10]} ({len(lost)})"
    ends = client.end_offsets([TOPIC])
    assert all(end >= reporter.acked[-1] for end in ends.values()), (ends, reporter.acked[-1])


def registry_node(cluster: Cluster, data_dir: str) -> None:
    client = actors.start(settings=settings_for(data_dir), namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    victim = registry_on_a_worker(cluster, client, data_dir)
    if victim in rows(client)[0]["isr"] and rows(client)[0]["leader_node"] != victim:
        client.reassign(0, victim)  # the registry's node leads partition 0 too: the worst case
    client.create_topic(TOPIC, PARTITIONS)
    ids = client.topic_ids()
    reporter = Reporter()
    thread = reporter.run()
    loads, stop, committers = start_load(groups_on(client, 0) + groups_on(client, 1))
    reporter.wait_for_more(20)
    remove_with_disk(cluster, worker_node(cluster, victim), data_dir)
    wait_for("a new leader of partition 0", lambda: rows(client)[0].get("leader_node") not in (None, victim))
    reporter.wait_for_more(20)
    reporter.stop.set()
    stop.set()
    thread.join(timeout=90)
    committers.join(timeout=30)
    check_registry(client, ids, reporter)
    registry_node_now = ray.get(registry_for(client.controller).node_id.remote())
    assert registry_node_now != victim, registry_node_now
    commits = check_nothing_lost(loads)
    print(f"registry's node removed with its disk: {len(reporter.acked)} reports acknowledged "
          f"({reporter.errors} retried), none lost; {commits} commits, none lost", flush=True)


def killed_mid_write(cluster: Cluster, data_dir: str) -> None:
    client = actors.start(settings=settings_for(data_dir), namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    client.create_topic(TOPIC, PARTITIONS)
    ids = client.topic_ids()
    reporter = Reporter()
    thread = reporter.run()
    for _ in range(5):
        reporter.wait_for_more(10)
        ray.kill(registry_for(client.controller), no_restart=False)  # Ray restarts it
    reporter.wait_for_more(10)
    reporter.stop.set()
    thread.join(timeout=90)
    check_registry(client, ids, reporter)
    print(f"registry killed 5 times mid-write: {len(reporter.acked)} reports acknowledged "
          f"({reporter.errors} retried), none lost", flush=True)


def settings_for(data_dir: str) -> ServiceSettings:
    return quick_failover_settings(data_dir, NAMESPACE, 4)


def registry_on_a_worker(cluster: Cluster, client: actors.Client, data_dir: str) -> str:
    """The worker node the registry runs on, after starting it again until Ray places it on
    one (Ray places it where it likes; a head node cannot be removed from the cluster)."""
    workers = sorted(w.node_id for w in cluster.worker_nodes)
    for attempt in range(20):
        registry = ray.get_actor(TOPIC_REGISTRY_NAME, namespace=NAMESPACE)
        node = str(ray.get(registry.node_id.remote()))
        if node in workers:
            return node
        stop_topic_registry(NAMESPACE)
        strategy = NodeAffinitySchedulingStrategy(workers[attempt % len(workers)], soft=True)
        handle = detached_singleton(TopicRegistry, TOPIC_REGISTRY_NAME, settings_for(data_dir),
                                    scheduling_strategy=strategy)
        ray.get(handle.node_id.remote())
    raise AssertionError("Ray never placed the topic registry on a worker node")


CASES = {"registry-node": registry_node, "killed-mid-write": killed_mid_write}


def main() -> int:
    return run_case(CASES, NAMESPACE, "raygroups-registry-")


if __name__ == "__main__":
    sys.exit(main())
