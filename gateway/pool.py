"""The memory pool of request frames: bytes reserved across every connection of one server.

Kafka's queued.max.request.bytes, for the gateway and every leader's
listener alike (`gateway.connection`). Rules:
- A reservation is taken as soon as a frame's size prefix has arrived (the
  size the header promises), and returned only once the request's answer is
  written (or the request is dropped): what is held is bounded whether the
  bytes are still arriving, parsed, or being handled.
- A reservation that does not fit waits, as a callback; the connection stops
  reading meanwhile (TCP backpressure). A release grants the waiters that
  fit, each its whole size, and wakes those alone: a large frame that does
  not fit holds back no smaller one, and nobody is woken to find there is no
  room. The waiters outside the strangers' share (logged-in clients', and
  logins') go first, then the strangers'; in each, smallest first (arrival
  order among equals), so a client's login or heartbeat is never queued
  behind strangers' frames promising the largest size, each of which would
  take all the room a closed one gives back. A waiter too big for the room
  left waits on (Kafka's pool, too, serves whoever asks when the bytes fit).
  Each queue is kept sorted, so a release looks at the waiters it wakes and
  one more per queue, however many wait (a release follows every answer).
- Frames of connections that have not logged in yet (SASL on) share at most
  `unauthenticated_capacity` of the pool, so strangers holding frames, slow
  or not, never take the room of the clients that logged in. Frames of up to
  `SMALL_FRAME_BYTES` (a login: ApiVersions, SaslHandshake, a PLAIN token)
  are outside that share, so a client can log in while strangers fill it;
  they can hold no more than max_connections small frames that way.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable

OnRoom = Callable[[], None]
SMALL_FRAME_BYTES = 1024
# A waiter: (size, arrival number, on_room); the arrival number is unique, so on_room is never compared.
_Waiter = tuple[int, int, OnRoom]


class MemoryPool:
    """Bytes of request frames held at once (module docstring)."""

    def __init__(self, capacity: int, unauthenticated_capacity: int) -> None:
        self.capacity = capacity
        self.unauthenticated_capacity = unauthenticated_capacity
        self.in_use = 0
        self.unauthenticated_in_use = 0
        # Waiters by whether they count against the strangers' share, each queue sorted.
        self._queues: dict[bool, list[_Waiter]] = {False: [], True: []}
        self._waiting: dict[OnRoom, tuple[_Waiter, bool]] = {}
        self._arrivals = itertools.count()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def reserve(self, size: int, authenticated: bool, on_room: OnRoom) -> bool:
        """True when `size` bytes are reserved now; else `on_room` is called once they are."""
        shared = _shared(size, authenticated)
        if self._fits(size, shared):
            self._take(size, shared)
            return True
        waiter = (size, next(self._arrivals), on_room)
        bisect.insort(self._queues[shared], waiter)
        self._waiting[on_room] = (waiter, shared)
        return False

    def cancel(self, on_room: OnRoom) -> None:
        """Forget a waiter (its connection closed before it got room)."""
        found = self._waiting.pop(on_room, None)
        if found is not None:
            waiter, shared = found
            self._queues[shared].remove(waiter)

    def release(self, size: int, authenticated: bool) -> None:
        """Return a reservation; grant and wake the waiters that now fit."""
        self.in_use -= size
        if _shared(size, authenticated):
            self.unauthenticated_in_use -= size
        if not self._waiting:
            return
        granted = self._grant(False) + self._grant(True)
        # Called once the queues are settled: a woken connection may reserve or release again.
        for on_room in granted:
            on_room()

    def _grant(self, shared: bool) -> list[OnRoom]:
        """Reserve for the smallest waiters of one queue while they fit (a larger one fits no better)."""
        queue, granted = self._queues[shared], []
        while queue and self._fits(queue[0][0], shared):
            size, _, on_room = queue.pop(0)
            self._take(size, shared)
            del self._waiting[on_room]
            granted.append(on_room)
        return granted

    def _fits(self, size: int, shared: bool) -> bool:
        if self.in_use + size > self.capacity:
            return False
        return not shared or self.unauthenticated_in_use + size <= self.unauthenticated_capacity

    def _take(self, size: int, shared: bool) -> None:
        self.in_use += size
        if shared:
            self.unauthenticated_in_use += size


def _shared(size: int, authenticated: bool) -> bool:
    """Whether a frame counts against the share of connections not logged in."""
    return not authenticated and size > SMALL_FRAME_BYTES
