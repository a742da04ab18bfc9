"""The offsets log: one append-only, compacted log per offsets partition.

Layout and byte format: log/FORMAT.md. Modules, one job each:
codec (records <-> msgpack payload; consumer_codec the runs of KIP-848's
consumer group records, columns the column encodings both use), batch (header + CRC), segment (files,
chunked reads), scan (reading across segments), recovery (crash repair on
open), partition (the writer; its `sync` is the group commit the partition
actor's flush task drives), reader (read-only view), loader (replay into a
Shard), compaction, snapshot, epoch (leader epoch fencing), epochs (the
data's leader epochs and their checkpoint), shipping (raw batches a leader
ships and a follower appends), truncate (cutting a follower's diverged
tail), fsutil (durable file steps), gcpause (collector paused around bulk
decoding), columnar and column_runs (batches -> Arrow record batches for
analytics; pyarrow and numpy, never Spark).

Imports point one way: log -> coordinator (records only; the loader takes
anything with `replay_many`, such as `coordinator.Shard`).
"""

import os

from log.codec import DecodedPayload, decode_payload, decode_records, encode_payload
from log.compaction import CompactionStats, compact
from log.config import LogConfig
from log.epoch import read_leader_epoch
from log.epochs import EpochEntry
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


def replica_dir(data_dir: str | os.PathLike[str], node_id: str | int, partition: int) -> str:
    """`<data_dir>/nodes/<node_id>/offsets-<partition>`: one node's replica of a partition.

    With replication each node keeps its own log; nodes sharing one disk
    (tests, one machine) must not share a directory.
    """
    node = str(node_id)
    if not node or os.sep in node or node in (".", ".."):
        raise ValueError(f"node id {node_id!r} cannot name a directory")
    return partition_dir(os.path.join(str(data_dir), "nodes", node), partition)


__all__ = [
    "CompactionStats",
    "CorruptLogError",
    "DecodedPayload",
    "EpochEntry",
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
    "replica_dir",
    "write_snapshot",
]
