"""A simulated multi-node Ray cluster for the scenario scripts, which run in a
process of their own (a `ray.cluster_utils.Cluster` cannot share a process
with the test session's cluster)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import ray
from ray.cluster_utils import Cluster


@contextmanager
def simulated_cluster(workers: int, namespace: str, prefix: str) -> Iterator[tuple[Cluster, str]]:
    """A head and `workers` worker nodes of one CPU each, this process
    connected in `namespace`, and a data directory; all removed afterwards."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    data_dir = tempfile.mkdtemp(prefix=prefix)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        for _ in range(workers):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace=namespace, log_to_driver=False)
        yield cluster, data_dir
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)
