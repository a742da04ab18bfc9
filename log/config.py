"""Settings of the offsets log, Kafka's names in snake case, Kafka's defaults.

`offsets_segment_bytes` and `offsets_load_buffer_size` are Kafka's
`offsets.topic.segment.bytes` and `offsets.load.buffer.size`;
`offsets_delete_retention_ms` is the offsets topic's `delete.retention.ms`.
`fsync=False` relaxes durability: appends are acknowledged once in the page
cache, which survives a process crash but not a machine crash.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LogConfig:
    offsets_segment_bytes: int = 100 * MIB
    offsets_load_buffer_size: int = 5 * MIB
    offsets_delete_retention_ms: int = 86_400_000
    fsync: bool = True
    # Records per batch when snapshots and compaction rewrite data: big
    # enough that per-batch costs vanish, small enough to bound memory.
    snapshot_batch_records: int = 10_000

    def __post_init__(self) -> None:
        for name in ("offsets_segment_bytes", "offsets_load_buffer_size", "snapshot_batch_records"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        retention = self.offsets_delete_retention_ms
        if not isinstance(retention, int) or isinstance(retention, bool) or retention < 0:
            raise ValueError(f"offsets_delete_retention_ms must be an int >= 0, got {retention!r}")
