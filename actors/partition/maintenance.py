"""Background maintenance of a replica's log: snapshots and compaction.

Run by every replica, leader and follower alike (Kafka's log cleaner runs on
every broker for every replica it holds), on the partition's maintenance
thread, beside appends (`ServingLoops._maintenance_loop` for a leader,
`ReplicaRoles._follower_maintenance` for a follower). Rules:
- A snapshot once `snapshot_every_records` more records are committed, so
  that a load replays live state rather than history (log/snapshot.py).
- Compaction every `compaction_interval_s`, only below the replica's
  committed end: the partition's high watermark as the replica knows it
  (log/compaction.py). Records past it may still be truncated, by a deposed
  leader or a follower whose tail diverged, and must not supersede
  acknowledged ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial

from actors.core.settings import ServiceSettings
from log.compaction import compact
from log.partition import PartitionLog
from log.snapshot import write_snapshot


@dataclass(slots=True)
class MaintenanceProgress:
    """Where one role's maintenance stands: the committed end of its last
    snapshot and the time of its last compaction."""

    snapshot_at: int
    compacted_at: float = field(default_factory=time.monotonic)


async def maintain_once(
    log: PartitionLog,
    committed_end: int,
    progress: MaintenanceProgress,
    settings: ServiceSettings,
    executor: Executor,
    now_ms: Callable[[], int],
) -> None:
    """One round: a snapshot and a compaction if each is due (module rules)."""
    loop = asyncio.get_running_loop()
    if committed_end - progress.snapshot_at >= settings.snapshot_every_records:
        progress.snapshot_at = committed_end
        await loop.run_in_executor(executor, write_snapshot, log, now_ms())
    if time.monotonic() - progress.compacted_at >= settings.compaction_interval_s:
        progress.compacted_at = time.monotonic()
        await loop.run_in_executor(executor, partial(compact, log, now_ms(), committed_end))
