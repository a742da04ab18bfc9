"""The embedded service the Ray benchmarks run against: a local Ray cluster of
its own, the service in a temporary data directory, all gone afterwards."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray

import actors
from actors.client.client import Client
from coordinator import CoordinatorConfig

PARTITIONS = 4


@contextmanager
def embedded_service(
    num_cpus: int, config: CoordinatorConfig, **service: Any
) -> Iterator[tuple[Client, str]]:
    """(client, data directory) of a fresh service with `PARTITIONS` partitions; `service`:
    more of `actors.start`'s arguments (the partition count too)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-")
    try:
        actors.init_local_ray(num_cpus=num_cpus)
        started = {"num_partitions": PARTITIONS, "coordinator_config": config, **service}
        yield actors.start(data_dir, **started), data_dir
    finally:
        actors.stop()
        ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)
