"""A replicated service never starts empty beside the logs of an earlier one.

The controller's metadata (which replicas exist, which is in sync) lives in
Ray's GCS (`actors/ray_store.py`). A Ray cluster restarted without GCS fault
tolerance forgets it, and its nodes come back with new node ids, so the
replica directories `<data_dir>/nodes/<node id>/offsets-<p>` of the earlier
cluster match no replica any more. Starting then would create empty
partitions beside them and answer every OffsetFetch with "no offset": the
acknowledged commits on disk would be silently ignored. So a replicated
service that finds no metadata looks on every live node for such logs and,
if any exist, refuses to start and names them; the operator moves them away
to start afresh (or keeps the GCS across restarts next time).
"""

from __future__ import annotations

import glob
import os

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.ray_store import GcsKvStore
from actors.settings import ServiceSettings

LIST_TIMEOUT_S = 60.0


class ForgottenLogsError(RuntimeError):
    """Replica logs exist, but no metadata says which of them hold what was acknowledged."""


def replica_logs(data_dir: str) -> list[str]:
    """The replica directories under `data_dir` holding at least one log segment."""
    found = glob.glob(os.path.join(data_dir, "nodes", "*", "offsets-*", "*.log"))
    return sorted({os.path.dirname(path) for path in found})


@ray.remote(num_cpus=0)
def _replica_logs_on_node(data_dir: str) -> list[str]:
    return replica_logs(data_dir)


def refuse_forgotten_logs(settings: ServiceSettings, live_nodes: list[str]) -> None:
    """Raise ForgottenLogsError when a replicated service without metadata would
    start beside replica logs on any live node (see the module docstring)."""
    if settings.replication_factor == 1:
        return
    if GcsKvStore(settings.namespace, settings.data_dir).load() is not None:
        return
    listings = ray.get(
        [
            _replica_logs_on_node.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
            ).remote(settings.data_dir)
            for node in live_nodes
        ],
        timeout=LIST_TIMEOUT_S,
    )
    found = sorted({path for listing in listings for path in listing})
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise ForgottenLogsError(
            f"replica logs of an earlier service are on disk ({shown}), but Ray's GCS holds no "
            f"metadata for namespace {settings.namespace!r} and {settings.data_dir}: the Ray "
            "cluster restarted without GCS fault tolerance. Starting would serve empty partitions "
            "beside them. Move those directories away to start afresh."
        )
