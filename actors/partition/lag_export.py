"""A leader's live lag as metrics, exported in chunks between its requests.

Every `lag_metrics_interval_s` the gauge loop exports its groups' lag
(`LagTracker.export` into `actors.core.metrics.LagMetrics`). With 10,000s of
groups that is 100s of ms of the partition's one thread (DESIGN section 9), so
it goes `CHUNK_GROUPS` groups at a time, yielding to the event loop between
chunks: requests and the controller's probes are served meanwhile. The top
groups and partitions under the caps are chosen over all chunks.
"""

from __future__ import annotations

import asyncio
import heapq

from actors.core.metrics import LagMetrics
from coordinator.lag import GroupLag, LagTracker, PartitionLag

CHUNK_GROUPS = 1_000


async def export_lag(tracker: LagTracker, metrics: LagMetrics, now_ms: int) -> None:
    group_ids = list(tracker.committed)
    groups: list[GroupLag] = []
    top: list[tuple[str, PartitionLag]] = []
    lagging = 0
    for start in range(0, len(group_ids), CHUNK_GROUPS):
        chunk, chunk_top, chunk_lagging = tracker.export(
            now_ms, metrics.partitions_max, group_ids[start : start + CHUNK_GROUPS]
        )
        groups += chunk
        top = heapq.nlargest(metrics.partitions_max, [*top, *chunk_top], key=_lag)
        lagging += chunk_lagging
        await asyncio.sleep(0)
    metrics.set_groups(groups)  # the worst under the cap: chosen over all chunks
    metrics.set_partitions(top, lagging)


def _lag(row: tuple[str, PartitionLag]) -> int:
    return row[1].lag or 0
