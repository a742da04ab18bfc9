"""Starting a new service from a backup, on any cluster: other node names, other sizes.

Steps: the backup is verified whole first (`log.backup_manifest.verify_backup`:
a tampered or incomplete one is refused, naming the file, before anything
is written). The live nodes are listed by name (`actors.core.node_names`);
each partition gets `replication_factor` of them, spread round-robin, the
first its leader. One writer actor per node (pinned to it: each node's disk
is its own) first checks that the data directory is empty there, on every
node before any write; then the backup's files are streamed to each
replica's directory (`log.replica_dir`: `<data_dir>/nodes/<name>/offsets-<p>`),
each chunk read once and shared by the replicas through Ray's object store,
and each replica is finished by its writer: its files' hashes checked
against the manifest, and the leader-epoch files and partition state a full
restart expects written (`log.backup_files.finish_replica`). Then the
service is started on that data directory: finding no metadata in Ray's GCS,
it rebuilds it from those state files (`actors/controller/forgotten_logs.py`)
and elects each partition's leader with a higher epoch, under the new names.

Rules: a replicated target only (2 or more nodes): a single-copy service
fences its logs by the controller's epochs, which a backup's epochs would
be above. The service must not be running in the namespace already.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.client.client import Client, controller_handle
from actors.core import node_names
from log import replica_dir
from log.backup_files import check_empty_dir, finish_replica, restored_state
from log.backup_manifest import (
    BackupError,
    Manifest,
    PartitionBackup,
    check_file_name,
    partition_path,
    verify_backup,
)
from log.replica_state import ReplicaState

CHUNK_BYTES = 4 * 1024 * 1024
# Chunks in flight per restore: bounds the object store's share of it.
IN_FLIGHT = 16


@ray.remote(num_cpus=0)
class ReplicaWriter:
    """Writes the restored replicas on its node's disk (pinned there by the restore)."""

    def __init__(self, data_dir: str, node: str) -> None:
        self.data_dir, self.node = data_dir, node

    def check_empty(self) -> None:
        check_empty_dir(self.data_dir)

    def write(self, partition: int, name: str, offset: int, data: bytes) -> None:
        directory = replica_dir(self.data_dir, self.node, partition)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, check_file_name(name))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, data, offset)
            finally:
                os.close(fd)
        except OSError as exc:
            raise BackupError(f"{path} on node {self.node}: cannot write: {exc.strerror or exc}") from exc

    def finish(self, backup: PartitionBackup, state: ReplicaState) -> None:
        directory = replica_dir(self.data_dir, self.node, backup.partition)
        os.makedirs(directory, exist_ok=True)
        for file in backup.files:
            with open(os.path.join(directory, file.name), "rb+") as handle:
                os.fsync(handle.fileno())
        finish_replica(directory, backup, state, leader=self.node == state.leader)


def placement(nodes: Sequence[str], num_partitions: int, replication_factor: int) -> dict[int, list[str]]:
    """Each partition's replicas, leader first, spread round-robin over the sorted node names."""
    names = sorted(nodes)
    return {
        p: [names[(p + i) % len(names)] for i in range(replication_factor)] for p in range(num_partitions)
    }


def restore(
    src: str, data_dir: str, *, namespace: str, address: str | None = None,
    replication_factor: int | None = None, min_insync_replicas: int | None = None,
) -> tuple[Manifest, Client]:
    """Verify the backup `src`, write it to `data_dir` on the live nodes and start the service."""
    import actors

    manifest = verify_backup(src)
    if not ray.is_initialized():
        ray.init(address=address or "auto", namespace=namespace, log_to_driver=False)
    if _running(namespace):
        raise BackupError(f"a service runs in namespace {namespace!r} already: a restore starts a new one")
    live = node_names.live_nodes()
    factor = replication_factor or min(3, len(live))
    if factor < 2 or factor > len(live):
        raise BackupError(
            f"a restore starts a replicated service: replication factor {factor} needs 2 to "
            f"{len(live)} live nodes (this cluster has {len(live)})"
        )
    data_dir = os.path.abspath(data_dir)
    writers = {
        name: ReplicaWriter.options(  # type: ignore[attr-defined]
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        ).remote(data_dir, name)
        for name, node_id in live.items()
    }
    try:
        _call(writer.check_empty.remote() for writer in writers.values())
        layout = placement(list(live), manifest.num_partitions, factor)
        try:
            for part in manifest.partitions:
                _copy_partition(src, part, [writers[n] for n in layout[part.partition]])
                state = restored_state(part, layout[part.partition], manifest.num_partitions)
                _call(writers[n].finish.remote(part, state) for n in layout[part.partition])
        except BackupError as exc:
            raise BackupError(
                f"{exc}; the restore stopped before starting a service: remove {data_dir} on every "
                "node before trying again"
            ) from exc
    finally:
        for writer in writers.values():
            ray.kill(writer)
    client = actors.start(
        data_dir, num_partitions=manifest.num_partitions, namespace=namespace, address=address,
        replication_factor=factor, min_insync_replicas=min_insync_replicas,
    )
    return manifest, client


def _copy_partition(src: str, part: PartitionBackup, writers: Sequence[Any]) -> None:
    directory = partition_path(src, part.partition)
    pending: deque[Any] = deque()
    for file in part.files:
        with open(os.path.join(directory, file.name), "rb") as handle:
            offset = 0
            while chunk := handle.read(CHUNK_BYTES):
                ref = ray.put(chunk)
                pending.extend(w.write.remote(part.partition, file.name, offset, ref) for w in writers)
                offset += len(chunk)
                while len(pending) > IN_FLIGHT:
                    _call([pending.popleft()])
    _call(pending)


def _running(namespace: str) -> bool:
    try:
        controller_handle(namespace)
    except ValueError:
        return False
    return True


def _call(refs: Any) -> list[Any]:
    """The answers of `refs`; a writer's BackupError comes out as itself, with its message."""
    try:
        return ray.get(list(refs))
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if isinstance(getattr(exc, "cause", None), Exception) else exc
        raise BackupError(str(cause)) from exc
