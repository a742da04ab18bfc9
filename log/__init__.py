"""The offsets log: one append-only, compacted log per offsets partition.

Layout and byte format: log/FORMAT.md. Modules, one job each:
codec (records <-> msgpack payload), batch (header + CRC), segment (files,
chunked reads), scan (reading across segments), recovery (crash repair on
open), partition (the writer; its `sync` is the group commit the partition
actor's flush task drives), reader (read-only view), loader (replay into a
Shard), compaction, snapshot, epoch (leader epoch fencing), fsutil
(durable file steps), gcpause (collector paused around bulk decoding).

Imports point one way: log -> coordinator (records only; the loader takes
anything with `replay_many`, such as `coordinator.Shard`).
"""

import os

from log.codec import DecodedPayload, decode_payload, decode_records, encode_payload
from log.compaction import CompactionStats, compact
from log.config import LogConfig
from log.epoch import read_leader_epoch
from log.errors import (
    CorruptLogError,
    FencedEpochError,
    LogError,
    LogFailedError,
    LogLockedError,
    UnsupportedVersionError,
)
from log.loader import LoadStats, MaterializedState, Replayable, load_into, materialize
from log.partition import PartitionLog
from log.reader import LogBatch, LogReader
from log.snapshot import Snapshot, write_snapshot


def partition_dir(data_dir: str | os.PathLike[str], partition: int) -> str:
    """`<data_dir>/offsets-<partition>`: where partition `partition` keeps its log."""
    return os.path.join(str(data_dir), f"offsets-{partition}")


__all__ = [
    "CompactionStats",
    "CorruptLogError",
    "DecodedPayload",
    "FencedEpochError",
    "LoadStats",
    "LogBatch",
    "LogConfig",
    "LogError",
    "LogFailedError",
    "LogLockedError",
    "LogReader",
    "MaterializedState",
    "PartitionLog",
    "Replayable",
    "Snapshot",
    "UnsupportedVersionError",
    "compact",
    "decode_payload",
    "decode_records",
    "encode_payload",
    "load_into",
    "materialize",
    "partition_dir",
    "read_leader_epoch",
    "write_snapshot",
]
