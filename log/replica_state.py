"""`partition-state.json`: the partition's state as a replicated leader knew it, beside its log;
and `epoch-replicas.json`: the replica set of the newest epoch a replica was told to follow.

A leader of a replicated offsets partition records here the controller's
committed state it leads with (replicas, ISR, itself, leader and partition
epochs, the service's partition count and replication factor, and the routing
of a repartition when one ever ran). A full
restart of the Ray cluster loses the controller's metadata (Ray's GCS);
these files are what it is rebuilt from (`actors/controller/forgotten_logs.py`).

Rules: one JSON object `{"version": 1, ...}`, replaced atomically
(`fsutil.atomic_write_json`: temp file, fsync, rename, directory fsync), so a
reader sees the old state or the new one, never a torn one. A missing file
is None (no leader wrote here); an unreadable one is refused rather than
guessed, as the leader-epoch file is. When and why a leader writes it is the
leader's business (`actors/partition/leader.py`).

`epoch-replicas.json` (`{"version": 1, "leader_epoch": N, "replicas": [...]}`,
written the same way) is a follower's: the replica set of the leader epoch the
controller told it to follow, written before it answers that role (a leader's
state file holds its own). So after a full restart any surviving replica of
an epoch says which replicas that epoch had, even when the leader's disk is
gone (KIP-966's eligible leader replicas persist the same fact), and a
replica that only lagged is told from one that was removed
(`actors/controller/forgotten_logs.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from log.errors import CorruptLogError
from log.fsutil import atomic_write_json, read_versioned_json

STATE_FILE = "partition-state.json"
STATE_FILE_VERSION = 1
EPOCH_REPLICAS_FILE = "epoch-replicas.json"
EPOCH_REPLICAS_VERSION = 1


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One partition's committed state, as its leader `leader` knew it."""

    replicas: tuple[str, ...]
    isr: tuple[str, ...]
    leader: str
    leader_epoch: int
    partition_epoch: int
    num_partitions: int
    replication_factor: int
    # The routing the leader owned groups by (`coordinator.routing.Routing.encode()`),
    # "" when the partition count never changed: a full restart resumes or ends a
    # repartition from it (`actors/controller/forgotten_logs.py`).
    routing: str = ""

    @property
    def version(self) -> tuple[int, int]:
        """Which of two states is newer: the leader epoch, then the partition epoch."""
        return self.leader_epoch, self.partition_epoch


def write_replica_state(directory: str, state: ReplicaState, fsync: bool = True) -> None:
    data = {
        "version": STATE_FILE_VERSION,
        "replicas": list(state.replicas),
        "isr": list(state.isr),
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "partition_epoch": state.partition_epoch,
        "num_partitions": state.num_partitions,
        "replication_factor": state.replication_factor,
        **({"routing": state.routing} if state.routing else {}),
    }
    atomic_write_json(os.path.join(directory, STATE_FILE), data, fsync)


def read_replica_state(directory: str) -> ReplicaState | None:
    path = os.path.join(directory, STATE_FILE)
    state = read_versioned_json(path, STATE_FILE_VERSION, "partition state file", _parse)
    consistent = state is None or (set(state.isr) <= set(state.replicas) and state.leader in state.replicas)
    if not consistent:
        raise CorruptLogError(path, 0, None, f"inconsistent partition state: {state}")
    return state


def write_epoch_replicas(
    directory: str, leader_epoch: int, replicas: tuple[str, ...], fsync: bool = True
) -> None:
    data = {"version": EPOCH_REPLICAS_VERSION, "leader_epoch": leader_epoch, "replicas": list(replicas)}
    atomic_write_json(os.path.join(directory, EPOCH_REPLICAS_FILE), data, fsync)


def read_epoch_replicas(directory: str) -> tuple[int, tuple[str, ...]] | None:
    """(leader epoch, its replica set) as last recorded here; None when never recorded."""
    path = os.path.join(directory, EPOCH_REPLICAS_FILE)
    return read_versioned_json(
        path, EPOCH_REPLICAS_VERSION, "epoch replicas file",
        lambda data: (_int(data["leader_epoch"]), tuple(_names(data["replicas"]))),
    )


def _parse(data: dict[str, Any]) -> ReplicaState:
    return ReplicaState(
        replicas=tuple(_names(data["replicas"])),
        isr=tuple(_names(data["isr"])),
        leader=_name(data["leader"]),
        leader_epoch=_int(data["leader_epoch"]),
        partition_epoch=_int(data["partition_epoch"]),
        num_partitions=_int(data["num_partitions"]),
        replication_factor=_int(data["replication_factor"]),
        routing=_routing(data.get("routing", "")),
    )


def _routing(value: object) -> str:
    if not isinstance(value, str) or len(value) > 65_536 or not value.isascii():
        raise TypeError(f"an encoded routing expected, got {value!r:.80}")
    return value


def _names(value: object) -> list[str]:
    if not isinstance(value, list):
        raise TypeError(f"a list of names expected, got {value!r}")
    return [_name(v) for v in value]


def _name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"a node name expected, got {value!r}")
    return value


def _int(value: object) -> int:
    if type(value) is not int:
        raise TypeError(f"an integer expected, got {value!r}")
    return value
