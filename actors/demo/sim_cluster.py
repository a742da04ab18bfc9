"""A simulated multi-node Ray cluster on one machine, for the replicated demo and the scenarios.

`ray.cluster_utils.Cluster` starts a head and worker raylets as separate
processes on this host; each node gets its own directory under the data
directory (`<data_dir>/nodes/<node_id>`, where the replicas put their logs),
so removing a node and deleting that directory is losing a machine with its
disk. With `named=True` every node carries the label `raygroups.io/node`
(`actors.core.node_names`: "head", "worker-1", ...), so its replicas keep their
directories `<data_dir>/nodes/<name>` across a restart of the whole
simulated cluster on the same data directory. Rules:
- It must run in a process of its own: a `Cluster` cannot share a process
  with another Ray cluster (a test session's, for instance).
- Leaving the context shuts down the driver and every node, even after an
  error, so no Ray process outlives it. A temporary data directory (none
  given) is removed too; a given one is kept for inspection.
- Ray declares a node dead after `health_check_failure_threshold` failed
  health checks of its raylet, `health_check_period_ms` apart (defaults: 5
  and 3 s, about 15 s). Until then a crashed node's actors fail their calls
  only as Ray gives up on their connections (1-2 s). `FAST_NODE_FAILURE`
  is what the replicated demo and the benchmark use, and what cluster.yaml
  sets: a raylet that refuses connections is dead after 2 checks 200 ms
  apart; one that hangs, after 2 checks that each waited 1 s.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import ray
from ray.cluster_utils import Cluster

from actors.core.node_names import NODE_LABEL, node_name
from actors.core.settings import ServiceSettings

# Ray's node failure detection for a replicated service (module docstring).
FAST_NODE_FAILURE = {
    "health_check_period_ms": 200,
    "health_check_failure_threshold": 2,
    "health_check_timeout_ms": 1000,
}

# The names of a named simulated cluster's nodes.
HEAD_NAME = "head"


def worker_name(index: int) -> str:
    """The name of the `index`th worker (from 1) of a named simulated cluster."""
    return f"worker-{index}"


def quick_failover_settings(
    data_dir: str, namespace: str, num_partitions: int, **overrides: Any
) -> ServiceSettings:
    """A replicated service (factor 3, min ISR 2) that notices failures within
    seconds rather than Kafka's 30 s: the replicated demo's and the scenarios'."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "num_partitions": num_partitions,
        "namespace": namespace,
        "replication_factor": 3,
        "min_insync_replicas": 2,
        "probe_interval_s": 0.5,
        "probe_timeout_s": 2.0,
        "replica_lag_time_max_ms": 3_000,
        "commit_timeout_ms": 3_000,
        "standby_actors": 0,
        **overrides,
    }
    return ServiceSettings(**values)


@contextmanager
def simulated_cluster(
    workers: int,
    namespace: str,
    prefix: str,
    data_dir: str | None = None,
    system_config: dict[str, Any] | None = None,
    named: bool = False,
) -> Iterator[tuple[Cluster, str]]:
    """A head and `workers` worker nodes of one CPU each, this process
    connected in `namespace`, and a data directory (a new temporary one
    named `prefix...` when `data_dir` is None). `system_config` is Ray's,
    for the whole cluster (Ray's defaults when None); `named`: label the
    nodes with stable names (module docstring)."""
    # A throwaway single-user cluster on loopback: no auth token file.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    temporary = data_dir is None
    path = tempfile.mkdtemp(prefix=prefix) if data_dir is None else os.path.abspath(data_dir)
    os.makedirs(path, exist_ok=True)
    head: dict[str, Any] = {"num_cpus": 1, "include_dashboard": False}
    if system_config:
        head["_system_config"] = system_config
    if named:
        head["labels"] = {NODE_LABEL: HEAD_NAME}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        for i in range(1, workers + 1):
            labels = {NODE_LABEL: worker_name(i)} if named else None
            cluster.add_node(num_cpus=1, labels=labels)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace=namespace, log_to_driver=False)
        yield cluster, path
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
        if temporary:
            shutil.rmtree(path, ignore_errors=True)


def node_disk(data_dir: str, node_id: str) -> str:
    """The directory that stands for the local disk of the node named `node_id`
    (see `log.replica_dir`)."""
    return os.path.join(data_dir, "nodes", node_id)


def sim_node_name(node: Any) -> str:
    """The name of a simulated node (a `ray._private.node.Node`): its label, else its id."""
    return node_name(node._ray_params.labels, node.node_id)


def remove_with_disk(cluster: Cluster, node: Any, data_dir: str) -> None:
    """Remove a worker node and delete its disk: the machine is gone for good."""
    cluster.remove_node(node)
    shutil.rmtree(node_disk(data_dir, sim_node_name(node)), ignore_errors=True)


def worker_node(cluster: Cluster, node_id: str) -> Any:
    """The worker node (a `ray._private.node.Node`) with this id."""
    return next(w for w in cluster.worker_nodes if w.node_id == node_id)


def wait_for(what: str, ready: Callable[[], bool], timeout_s: float = 60.0, poll_s: float = 0.25) -> None:
    """Poll `ready` until it is true; a Ray error (a call that met a lost node) counts as
    not yet. Raises TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except ray.exceptions.RayError:
            pass
        time.sleep(poll_s)
    raise TimeoutError(f"timed out waiting for {what}")


def status_rows(client: Any) -> dict[int, dict[str, Any]]:
    """The service's `status()` rows by partition."""
    return {row["partition"]: row for row in client.status()}


def fully_replicated(client: Any) -> bool:
    """Every partition led, ACTIVE, and every replica in its ISR."""
    return all(
        r.get("state") == "ACTIVE" and r.get("role") == "leader" and sorted(r["isr"]) == sorted(r["replicas"])
        for r in status_rows(client).values()
    )
