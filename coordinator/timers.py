"""Keyed timers: the shard's replacement for Kafka's purgatories.

Scheduling a key replaces its previous timer; cancelling removes it. Nothing
fires by itself: the driver calls `pop_expired(now_ms)` and the shard
dispatches each expired timer. Keys are tuples such as
("heartbeat", group_id, member_id) rather than joined strings, so ids that
contain the separator cannot collide.

Implementation: a heap with lazy deletion; a superseded entry stays in the
heap until it surfaces or the heap is rebuilt when stale entries dominate.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Any, NamedTuple

TimerKey = tuple[Hashable, ...]


class Timer(NamedTuple):
    deadline_ms: int
    seq: int
    key: TimerKey
    payload: Any


class TimerQueue:
    def __init__(self) -> None:
        self._heap: list[Timer] = []
        self._live: dict[TimerKey, Timer] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: TimerKey) -> bool:
        return key in self._live

    def schedule(self, key: TimerKey, deadline_ms: int, payload: Any = None) -> None:
        self._seq += 1
        timer = Timer(deadline_ms, self._seq, key, payload)
        self._live[key] = timer
        heapq.heappush(self._heap, timer)
        if len(self._heap) > 2 * len(self._live) + 1024:
            self._heap = list(self._live.values())
            heapq.heapify(self._heap)

    def cancel(self, key: TimerKey) -> None:
        self._live.pop(key, None)

    def get(self, key: TimerKey) -> Timer | None:
        return self._live.get(key)

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()

    def next_deadline_ms(self) -> int | None:
        heap = self._heap
        while heap and self._live.get(heap[0].key) is not heap[0]:
            heapq.heappop(heap)
        return heap[0].deadline_ms if heap else None

    def pop_expired(self, now_ms: int) -> Timer | None:
        """Remove and return the earliest timer due at `now_ms`, if any."""
        heap = self._heap
        while heap:
            top = heap[0]
            if self._live.get(top.key) is not top:
                heapq.heappop(heap)
                continue
            if top.deadline_ms > now_ms:
                return None
            heapq.heappop(heap)
            del self._live[top.key]
            return top
        return None

    def keys(self) -> list[TimerKey]:
        return list(self._live)
