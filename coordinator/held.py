"""HeldResponses: the responses a partition runtime holds, and when each may go.

A held response waits for its BARRIER (a log offset) to be committed and, if it
has one, for its FENCE (a push number) to be confirmed (`coordinator.runtime`
says why). This module only keeps them in order and hands back those whose
time came; the runtime decides barriers and fences and answers the requests.

Rules:
- Responses of Results with records (`hold_write`) have no fence, and their
  barriers grow in the order they are held (the written end only grows): a
  plain deque, released from its front.
- Other responses (`hold_read`) have lower barriers than later writes: a
  heap by barrier until the barrier is committed, then a heap by fence until
  the fence is confirmed (a fence is confirmed when the confirmed push number
  passes it, or when nothing needs confirming: None).
- Expiry (`expire`) takes the oldest first, from both decision orders. An
  entry handed back once is `done` and never again; done entries left in the
  heaps are skipped, and dropped in bulk when they are many (a barrier that
  never commits would otherwise keep every read that expired on it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from heapq import heapify, heappop, heappush
from typing import Any

Token = Hashable
# Expired entries kept in the heaps before they are dropped (then half the heaps' size).
EXPIRED_KEPT = 1024


class Held:
    """One held response, until its barrier is committed and its fence (if any) confirmed."""

    __slots__ = ("barrier", "fence", "token", "response", "since_ms", "done")

    def __init__(self, barrier: int, fence: int | None, token: Token, response: Any, since_ms: int) -> None:
        self.barrier = barrier
        self.fence = fence
        self.token = token
        self.response = response
        self.since_ms = since_ms
        self.done = False


class HeldResponses:
    def __init__(self) -> None:
        self._writes: deque[Held] = deque()
        self._reads: deque[Held] = deque()
        # (key, order, held): the order breaks ties, so entries are never compared.
        self._by_barrier: list[tuple[int, int, Held]] = []
        self._by_fence: list[tuple[int, int, Held]] = []
        self._order = 0
        self._expired_in_heaps = 0
        # The newest fence a read was held for (-1: none yet): the driver pushes while
        # its last push is not newer.
        self.fence_wanted = -1

    def clear(self) -> None:
        self._writes.clear()
        self._reads.clear()
        self._by_barrier, self._by_fence = [], []
        self._expired_in_heaps = 0

    def hold_write(self, barrier: int, token: Token, response: Any, now_ms: int) -> None:
        self._writes.append(Held(barrier, None, token, response, now_ms))

    def hold_read(
        self, barrier: int, fence: int | None, token: Token, response: Any, now_ms: int, committed: int
    ) -> None:
        held = Held(barrier, fence, token, response, now_ms)
        self._reads.append(held)
        if barrier > committed:
            self._order += 1
            heappush(self._by_barrier, (barrier, self._order, held))
        else:
            self._await_fence(held)

    def on_committed(self, end_offset: int, confirmed: int | None) -> list[Held]:
        """The log is committed up to `end_offset`: what may go now."""
        ready: list[Held] = []
        writes = self._writes
        while writes and writes[0].barrier <= end_offset:
            held = writes.popleft()
            if not held.done:
                ready.append(held)
        heap = self._by_barrier
        while heap and heap[0][0] <= end_offset:
            held = heappop(heap)[2]
            if held.done:
                continue
            fence = held.fence
            if fence is None or confirmed is None or confirmed > fence:
                ready.append(held)
            else:
                self._await_fence(held)
        return self._done(ready)

    def on_confirmed(self, confirmed: int | None) -> list[Held]:
        """Pushes up to `confirmed` are confirmed (None: nothing needs to be): what may go now."""
        ready: list[Held] = []
        heap = self._by_fence
        while heap and (confirmed is None or heap[0][0] < confirmed):
            held = heappop(heap)[2]
            if not held.done:
                ready.append(held)
        return self._done(ready)

    def expire(self, now_ms: int, timeout_ms: int) -> list[Held]:
        """Entries held `timeout_ms` or longer, oldest first in each decision order."""
        expired = self._done(self._expire(self._writes, now_ms, timeout_ms))
        reads = self._done(self._expire(self._reads, now_ms, timeout_ms))
        self._expired_in_heaps += len(reads)
        if self._expired_in_heaps > max(EXPIRED_KEPT, (len(self._by_barrier) + len(self._by_fence)) // 2):
            self._drop_expired()
        return expired + reads

    @property
    def oldest_ms(self) -> int | None:
        """When the oldest entry was held, or None."""
        self._trim()
        fronts = [held[0].since_ms for held in (self._writes, self._reads) if held]
        return min(fronts, default=None)

    # -------------------------------------------------------------- internals

    def _await_fence(self, held: Held) -> None:
        fence = held.fence
        assert fence is not None
        # A new order for every entry (those moved from the barrier heap too): two entries
        # of one fence and one order would compare their `Held`s, which raises.
        self._order += 1
        heappush(self._by_fence, (fence, self._order, held))
        if fence > self.fence_wanted:
            self.fence_wanted = fence

    def _done(self, ready: list[Held]) -> list[Held]:
        for held in ready:
            held.done = True
        if ready:
            self._trim()
        return ready

    @staticmethod
    def _expire(queue: deque[Held], now_ms: int, timeout_ms: int) -> list[Held]:
        expired: list[Held] = []
        while queue and (queue[0].done or now_ms - queue[0].since_ms >= timeout_ms):
            held = queue.popleft()
            if not held.done:
                expired.append(held)
        return expired

    def _drop_expired(self) -> None:
        self._by_barrier = [entry for entry in self._by_barrier if not entry[2].done]
        self._by_fence = [entry for entry in self._by_fence if not entry[2].done]
        heapify(self._by_barrier)
        heapify(self._by_fence)
        self._expired_in_heaps = 0

    def _trim(self) -> None:
        """Drop answered reads from the front of their decision order (writes leave
        their deque as they are answered)."""
        reads = self._reads
        while reads and reads[0].done:
            reads.popleft()
