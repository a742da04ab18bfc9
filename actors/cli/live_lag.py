"""Live lag rows for `raygroups lag --live`, `describe` and `list`: the coordinator's, no Spark.

`Client.lag` asks every partition leader for the lag its tracker keeps
(coordinator/lag.py); this module turns the answer into the rows the CLI
prints: `raygroups lag`'s rows (spark_bridge/cli.py prints them, beside
Spark's, so both commands print one table), plus `lag_ms`, each partition's
`health` and `ahead` (committed past the reported end: lag 0, flagged).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterable
from typing import Any

from coordinator.lag import GroupLag

LagKey = tuple[str, str, int]  # group, topic, partition


def lag_rows(groups: Iterable[GroupLag]) -> list[dict[str, Any]]:
    """One row per committed offset, sorted by group, topic and partition."""
    return [
        {
            "group_id": group.group_id, "topic": p.topic, "topic_partition": p.partition,
            "current_offset": p.committed, "log_end_offset": p.end, "lag": p.lag, "lag_ms": p.lag_ms,
            "health": p.health.name, "ahead": p.ahead,
        }
        for group in groups
        for p in group.partitions
    ]


def service_live_lag(args: argparse.Namespace) -> list[dict[str, Any]]:
    """`lag --live`: the running service's live lag of `args.groups` (every group when none)."""
    import actors
    from actors.core.settings import DEFAULT_NAMESPACE

    client = actors.connect(args.ray_address, namespace=args.namespace or DEFAULT_NAMESPACE)
    # Every leader asked at once (the sync `Client.lag` asks them one after another).
    return lag_rows(asyncio.run(client.lag_async(args.groups or None)))
