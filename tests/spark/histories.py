"""Offsets logs for the Spark bridge tests, written by the real log layer.

`write_history` appends batches to `<data_dir>/offsets-<p>/` with
`log.partition.PartitionLog`, each at its own batch timestamp. `HISTORY`
is the constructed history the job tests assert exact results on; the
expected tables are written out next to it, in the job tests.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from log.config import LogConfig
from log.partition import PartitionLog

EPOCH = 1
# A whole minute, so one-minute windows start at T0.
T0 = 1_699_999_980_000
FAST = LogConfig(fsync=False)

# (offsets partition, batch timestamp, records)
Batch = tuple[int, int, Sequence[Record]]


def commit(group: str, topic: str, partition: int, offset: int, at_ms: int, expire_ms: int = -1) -> Record:
    value = OffsetCommitValue(offset, EPOCH, f"meta-{offset}", at_ms, expire_ms)
    return Record(OffsetCommitKey(group, topic, partition), value)


def offset_tombstone(group: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group, topic, partition), None)


def member(member_id: str) -> MemberRecord:
    return MemberRecord(member_id, None, "client", "/10.0.0.1", 60_000, 10_000, b"sub", b"assign")


def group(group_id: str, generation: int, members: int, at_ms: int) -> Record:
    value = GroupMetadataValue(
        "consumer", generation, "range" if members else None, "m0" if members else None, at_ms,
        tuple(member(f"m{i}") for i in range(members)),
    )
    return Record(GroupMetadataKey(group_id), value)


def group_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group_id), None)


def write_history(data_dir: str, batches: Sequence[Batch], config: LogConfig = FAST) -> None:
    """Append every batch, in order, to its partition's log; closes the logs."""
    logs: dict[int, PartitionLog] = {}
    try:
        for partition, at_ms, records in batches:
            if partition not in logs:
                directory = os.path.join(data_dir, f"offsets-{partition}")
                logs[partition] = PartitionLog.open(directory, EPOCH, config)
            logs[partition].append(list(records), EPOCH, at_ms)
    finally:
        for log in logs.values():
            log.close()


# Partition 0: orders-app rebalances once and commits in two minutes;
# old-app's only offset expires. Partition 1: billing commits; gone goes
# empty, then its offset and its group are deleted.
HISTORY: list[Batch] = [
    (0, T0 + 1_000, [group("orders-app", 1, 2, T0 + 1_000)]),
    (0, T0 + 2_000, [commit("orders-app", "orders", 0, 10, T0 + 2_000),
                     commit("orders-app", "orders", 1, 20, T0 + 2_000)]),
    (0, T0 + 5_000, [commit("old-app", "logs", 0, 7, T0 + 5_000)]),
    (0, T0 + 30_000, [commit("orders-app", "orders", 0, 15, T0 + 30_000)]),
    (0, T0 + 61_000, [group("orders-app", 2, 3, T0 + 61_000)]),
    (0, T0 + 65_000, [commit("orders-app", "orders", 0, 25, T0 + 65_000),
                      commit("orders-app", "orders", 1, 30, T0 + 65_000)]),
    (0, T0 + 125_000, [offset_tombstone("old-app", "logs", 0)]),
    (1, T0 + 3_000, [group("gone", 1, 1, T0 + 3_000)]),
    (1, T0 + 4_000, [commit("gone", "orders", 0, 5, T0 + 4_000)]),
    (1, T0 + 10_000, [commit("billing", "orders", 0, 12, T0 + 10_000)]),
    (1, T0 + 20_000, [group("gone", 2, 0, T0 + 20_000)]),
    (1, T0 + 90_000, [offset_tombstone("gone", "orders", 0), group_tombstone("gone")]),
    (1, T0 + 95_000, [commit("billing", "orders", 0, 18, T0 + 95_000),
                      commit("billing", "payments", 0, 3, T0 + 95_000)]),
]
END_OFFSETS = {("orders", 0): 40, ("orders", 1): 30, ("payments", 0): 3}
