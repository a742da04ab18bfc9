"""The memory pool of request frames: bytes reserved across every connection of one server.

Kafka's queued.max.request.bytes, for the gateway and every leader's
listener alike (`gateway.connection`). Rules:
- A reservation is taken as soon as a frame's size prefix has arrived (the
  size the header promises), and returned only once the request's answer is
  written (or the request is dropped): what is held is bounded whether the
  bytes are still arriving, parsed, or being handled.
- A reservation that does not fit waits, as a callback; the connection stops
  reading meanwhile (TCP backpressure). A release grants the waiters that
  fit, smallest first (arrival order among equals), each its whole size, and
  wakes those alone: a large frame that does not fit holds back no smaller
  one, and nobody is woken to find there is no room. Smallest first, so a
  client's login or heartbeat (tens of bytes) is never queued behind
  strangers' frames promising the largest size, each of which would take
  all the room a closed one gives back. A waiter too big for the room left
  waits on (Kafka's pool, too, serves whoever asks when the bytes fit).
- Frames of connections that have not logged in yet (SASL on) share at most
  `unauthenticated_capacity` of the pool, so strangers holding frames, slow
  or not, never take the room of the clients that logged in. Frames of up to
  `SMALL_FRAME_BYTES` (a login: ApiVersions, SaslHandshake, a PLAIN token)
  are outside that share, so a client can log in while strangers fill it;
  they can hold no more than max_connections small frames that way.
"""

from __future__ import annotations

from collections.abc import Callable

OnRoom = Callable[[], None]
SMALL_FRAME_BYTES = 1024


class MemoryPool:
    """Bytes of request frames held at once (module docstring)."""

    def __init__(self, capacity: int, unauthenticated_capacity: int) -> None:
        self.capacity = capacity
        self.unauthenticated_capacity = unauthenticated_capacity
        self.in_use = 0
        self.unauthenticated_in_use = 0
        # on_room -> (size, authenticated), in arrival order (a dict keeps it).
        self._waiters: dict[OnRoom, tuple[int, bool]] = {}

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def reserve(self, size: int, authenticated: bool, on_room: OnRoom) -> bool:
        """True when `size` bytes are reserved now; else `on_room` is called once they are."""
        if self._fits(size, authenticated):
            self._take(size, authenticated)
            return True
        self._waiters[on_room] = (size, authenticated)
        return False

    def cancel(self, on_room: OnRoom) -> None:
        """Forget a waiter (its connection closed before it got room)."""
        self._waiters.pop(on_room, None)

    def release(self, size: int, authenticated: bool) -> None:
        """Return a reservation; grant and wake the waiters that now fit."""
        self.in_use -= size
        if _shared(size, authenticated):
            self.unauthenticated_in_use -= size
        if not self._waiters:
            return
        granted: list[OnRoom] = []
        # sorted() is stable: arrival order among frames of one size.
        for on_room, (wanted, waiter_authenticated) in sorted(self._waiters.items(), key=_size):
            if self.in_use >= self.capacity:
                break
            if self._fits(wanted, waiter_authenticated):
                self._take(wanted, waiter_authenticated)
                del self._waiters[on_room]
                granted.append(on_room)
        # Called once the table is settled: a woken connection may reserve or release again.
        for on_room in granted:
            on_room()

    def _fits(self, size: int, authenticated: bool) -> bool:
        if self.in_use + size > self.capacity:
            return False
        return not _shared(size, authenticated) or (
            self.unauthenticated_in_use + size <= self.unauthenticated_capacity
        )

    def _take(self, size: int, authenticated: bool) -> None:
        self.in_use += size
        if _shared(size, authenticated):
            self.unauthenticated_in_use += size


def _size(waiter: tuple[OnRoom, tuple[int, bool]]) -> int:
    return waiter[1][0]


def _shared(size: int, authenticated: bool) -> bool:
    """Whether a frame counts against the share of connections not logged in."""
    return not authenticated and size > SMALL_FRAME_BYTES
