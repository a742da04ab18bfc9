"""Writing a backup's files and restoring them as replica logs: the disk side of
`raygroups backup` and `raygroups restore`, without Ray (the actors move the bytes).

Rules:
- `write_backup_file` streams a file in, hashing it as it goes, and fsyncs
  it: the manifest (`log.backup_manifest`) records what was written, never
  a second read of it.
- A restore writes into an empty data directory only (`check_empty_dir`):
  merging a backup into a live or older service's logs would mix two
  histories.
- A restored replica is the backup's files plus what a full restart of a
  replicated service expects beside a log (`actors/controller/forgotten_logs.py`):
  the leader-epoch file and checkpoint of its data, and, on the leader, the
  partition's state (`partition-state.json`: the new replicas, all in the
  ISR, the backup's leader epoch), on a follower `epoch-replicas.json`. So a
  service started on that data directory rebuilds its metadata from them,
  under the new cluster's node names, and elects each partition's leader
  with a higher epoch.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence

from log.backup_manifest import BackupError, BackupFile, PartitionBackup, file_sha256
from log.epoch import write_leader_epoch
from log.epochs import write_checkpoint
from log.fsutil import fsync_dir, write_all
from log.replica_state import ReplicaState, write_epoch_replicas, write_replica_state


def write_backup_file(path: str, chunks: Iterable[bytes]) -> BackupFile:
    """Write `chunks` to a new file at `path`, fsynced; its size and SHA-256."""
    digest, size = hashlib.sha256(), 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for chunk in chunks:
                write_all(fd, chunk)
                digest.update(chunk)
                size += len(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise BackupError(f"{path}: cannot write the backup: {exc.strerror or exc}") from exc
    return BackupFile(os.path.basename(path), size, digest.hexdigest())


def check_empty_dir(path: str) -> None:
    """Refuse a directory that exists and holds anything (module docstring)."""
    if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise BackupError(f"{path}: the target is not empty: a restore writes into a new, empty directory")


def restored_state(
    backup: PartitionBackup, replicas: Sequence[str], num_partitions: int
) -> ReplicaState:
    """The partition's state on the new nodes: `replicas[0]` leads, all in the ISR."""
    return ReplicaState(
        replicas=tuple(replicas), isr=tuple(replicas), leader=replicas[0],
        leader_epoch=restored_epoch(backup), partition_epoch=0,
        num_partitions=num_partitions, replication_factor=len(replicas),
    )


def restored_epoch(backup: PartitionBackup) -> int:
    """The leader epoch a restored replica starts from: none of its data's is higher."""
    return max([0, backup.leader_epoch, *(epoch for epoch, _ in backup.epochs)])


def finish_replica(directory: str, backup: PartitionBackup, state: ReplicaState, leader: bool) -> None:
    """Check the replica's files arrived whole, then write what a restart expects beside them."""
    for file in backup.files:
        path = os.path.join(directory, file.name)
        if os.path.getsize(path) != file.bytes or file_sha256(path) != file.sha256:
            raise BackupError(f"{path}: the copy does not match the backup's manifest")
    write_checkpoint(directory, [(epoch, start) for epoch, start in backup.epochs])
    write_leader_epoch(directory, state.leader_epoch)
    if leader:
        write_replica_state(directory, state)
    else:
        write_epoch_replicas(directory, state.leader_epoch, state.replicas)
    fsync_dir(directory)
