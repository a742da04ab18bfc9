"""Shared pieces of the replication-primitive tests: a log of known batches
across leader epochs, and views of a directory's segments and epochs.
"""

from __future__ import annotations

import os
from pathlib import Path

from coordinator.records import Record
from log import LogConfig, PartitionLog
from log.segment import list_dir

from tests.log.helpers import NOW_MS, commit

# Small segments: a few batches each, so histories span several segments.
SMALL = LogConfig(offsets_segment_bytes=400)
RECORDS_PER_BATCH = 2


def batch_records(index: int) -> list[Record]:
    """Batch `index`: two commits, keys cycling so later batches supersede earlier ones."""
    return [commit(f"g{index % 3}", "t", p, index * 10 + p) for p in range(RECORDS_PER_BATCH)]


def write_epochs(log: PartitionLog, epochs: list[int], first: int = 0) -> list[Record]:
    """Append batch `first + i` in leader epoch `epochs[i]`, then sync; returns the records."""
    written: list[Record] = []
    for i, epoch in enumerate(epochs):
        records = batch_records(first + i)
        log.append(records, epoch, NOW_MS + first + i)
        written += records
    log.sync()
    return written


def segment_bytes(directory: str | Path) -> list[tuple[int, bytes]]:
    """(base offset, content) of every segment, in order."""
    return [(s.base_offset, Path(s.path).read_bytes()) for s in list_dir(str(directory)).segments]


def log_bytes(directory: str | Path) -> bytes:
    return b"".join(content for _, content in segment_bytes(directory))


def checkpoint_path(directory: str | Path) -> str:
    return os.path.join(str(directory), "leader-epoch-checkpoint")
