"""The end offsets a partition leader gives its shard's live lag, read from the topic registry.

The registry nudges every leader after an end-offset report (as after a topic
change, `topics_changed`); the leader's topics loop then reads the topics and,
over the same registry handle, the samples recorded since its cursor
(`TopicRegistry.end_offsets_since`, `actors/client/end_feed.py`), and gives
them to the shard (`PartitionRuntime.update_end_offsets`). Each commit then
updates lag as the shard applies it (coordinator/lag.py).

Rules:
- After a load (a new leader, a promoted follower, a reload) the cursor is
  reset, so the first read answers the whole history and the new shard's
  tracker gets every end; a follower's tracker keeps its committed offsets
  hot by replay, so a promotion reads only the ends (one call), never the
  groups again. Until then its lag is unknown (None), never 0.
- A registry that is down or slow only delays the ends (the topics watch
  logs it); the cursor stays, so nothing is skipped. An answer the runtime
  could not apply (not serving) resets the cursor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from actors.partition.topics_watch import CALL_TIMEOUT_S, TopicsWatch
from coordinator.runtime import PartitionRuntime, Released


class EndsWatch:
    def __init__(self, topics: TopicsWatch) -> None:
        self.topics = topics
        self.cursor: Any = None

    def reset(self) -> None:
        self.cursor = None

    async def poll(self, runtime: PartitionRuntime, now_ms: Callable[[], int]) -> Released:
        """Read the samples since the cursor into `runtime`; the lag watches they answer
        (coordinator/lag_watch.py), for the host to deliver."""
        registry = self.topics.registry
        if registry is None:
            return []
        try:
            answer = await asyncio.wait_for(registry.end_offsets_since.remote(self.cursor), CALL_TIMEOUT_S)
        except Exception:  # the topics watch notices and logs a registry that does not answer
            return []
        if answer is None:
            return []
        cursor, samples, whole = answer
        released = runtime.update_end_offsets(samples, whole, now_ms())
        if released is None:
            self.cursor = None
            return []
        self.cursor = cursor
        return released
