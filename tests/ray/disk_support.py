"""What the disk-fault scenarios share: a named simulated cluster whose every node
has a disk of the rig (tests/ray/disks.py), the service's view of a replica's
disk failure, and checks that collect every failure of a case instead of
stopping at the first.

A replica whose disk failed carries in its `probe()` the entry
    "disk": {"failed": True, "error": "<what failed>", "since_ms": <wall ms>,
             "next_retry_ms": <wall ms>, ...}
(`coordinator.replication.DiskHealth.describe`), and the controller's status
row of its partition (`Client.status()`, what `raygroups status` prints)
holds the same entry under `disks[<replica name>]` (`disk_failure_missing`).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import ray
from ray.cluster_utils import Cluster

import actors
from actors.demo.sim_cluster import HEAD_NAME, simulated_cluster, status_rows, worker_name

from tests.ray.disks import DEFAULT_SIZE_MIB, NodeDisks, node_disks
from tests.ray.replication_scenario import replica_actor

DISK_KEY = "disk"
DISK_FIELDS = ("error", "since_ms", "next_retry_ms")


@contextmanager
def cluster_with_disks(
    workers: int, namespace: str, root: str | None = None, size_mib: int = DEFAULT_SIZE_MIB
) -> Iterator[tuple[Cluster, NodeDisks]]:
    """A named simulated cluster (head + `workers`) whose every node directory is a
    disk of the rig; the service is stopped, Ray shut down and every disk unmounted
    on the way out, whatever happened. A SIGTERM on the way runs that too."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = [HEAD_NAME, *(worker_name(i) for i in range(1, workers + 1))]
    with node_disks(names, size_mib=size_mib, root=root) as disks:
        with simulated_cluster(workers, namespace, "unused-", data_dir=disks.data_dir, named=True) as nodes:
            cluster, _ = nodes
            try:
                yield cluster, disks
            finally:
                disks.heal_all()
                stop_service(namespace)


def stop_service(namespace: str) -> None:
    """Stop the service if one runs (its replicas close their logs)."""
    try:
        actors.stop(namespace)
    except Exception as exc:  # noqa: BLE001 - a broken service must not stop the cleanup
        print(f"stopping the service failed: {exc!r}", flush=True)


def inject(disks: NodeDisks, node: str, fault: str) -> None:
    """`fault` ("full" or "read-only") on `node`'s disk."""
    if fault == "full":
        disks.fill(node)
    elif fault == "read-only":
        disks.read_only(node)
    else:
        raise ValueError(f"unknown disk fault {fault!r}")


# ------------------------------------------------------------ disk health


def _disk_entries(row: dict[str, Any], node: str) -> Iterator[Any]:
    """The status row's disk entry for `node` (`disks`: replica -> its probe's `disk`)."""
    yield (row.get("disks") or {}).get(node)


def _failed(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and bool(entry.get("error"))
        and all(isinstance(entry.get(f), int | float) for f in DISK_FIELDS[1:])
    )


def disk_failure_missing(client: actors.Client, data_dir: str, partition: int, node: str) -> str | None:
    """None when partition's replica on `node` shows a disk failure (error, since,
    next retry) both in its probe and in the partition's status row; else what is missing."""
    missing = []
    handle, _ = replica_actor(data_dir, partition, node)
    probe = ray.get(handle.probe.remote(), timeout=5)
    if not _failed(probe.get(DISK_KEY)):
        missing.append(f"probe {DISK_KEY}={probe.get(DISK_KEY)!r} (state {probe.get('state')}, "
                       f"role {probe.get('role')}, failure {probe.get('failure')!r})")
    row = status_rows(client)[partition]
    if not any(_failed(entry) for entry in _disk_entries(row, node)):
        missing.append(f"no failed {DISK_KEY} entry for {node} in the status row {sorted(row)}")
    return "; ".join(missing) or None


def disk_failure_shown(client: actors.Client, data_dir: str, partition: int, node: str) -> bool:
    """The replica's probe and the status row no longer, or not, show a failed disk."""
    handle, _ = replica_actor(data_dir, partition, node)
    probe = ray.get(handle.probe.remote(), timeout=5)
    row = status_rows(client)[partition]
    return _failed(probe.get(DISK_KEY)) or any(_failed(entry) for entry in _disk_entries(row, node))


# ----------------------------------------------------------------- checks


class Checks:
    """A case's checks: each failure is recorded and the case goes on (healing what it
    broke, checking the rest); `done()` raises one AssertionError naming them all."""

    def __init__(self, case: str) -> None:
        self.case = case
        self.failures: list[str] = []

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failures.append(what)
            print(f"  [{self.case}] FAILED: {what}", flush=True)
        return ok

    def wait(
        self, what: str, ready: Callable[[], bool], timeout_s: float, poll_s: float = 0.2
    ) -> float | None:
        """Seconds until `ready`, or None (a failure) after `timeout_s`; Ray errors count as not yet."""
        started = time.monotonic()
        while True:
            try:
                if ready():
                    return time.monotonic() - started
            except (ray.exceptions.RayError, KeyError, AssertionError):
                pass
            if time.monotonic() - started > timeout_s:
                self.check(False, f"{what}: not within {timeout_s:.0f} s")
                return None
            time.sleep(poll_s)

    def done(self) -> None:
        if self.failures:
            raise AssertionError(f"{self.case}: " + " | ".join(self.failures))
