"""Free heap given back to the system once a partition actor settles.

CPython hands objects of over 512 bytes (and its own arenas' bookkeeping)
to the C allocator, which keeps what is freed in its arenas, one per thread
that allocated: the imports, the load and a leader's first steps (its
registry lookups on executor threads, the log's first batches on the I/O
thread) leave some 1-2 MiB free but held in an idle replica
(docs/benchmarks.md, `bench.capacity --actors`). glibc's `malloc_trim(0)`
returns every whole free page of every arena. Rules:
- `HeapSettler.settle()` is called when a replica's state changes shape (a
  load or a promotion done, following begun, a standby started); the trim
  runs `SETTLE_S` later on the event loop, once, and a later call moves it.
- Only while the process is small (resident at most `TRIM_RSS_MAX_BYTES`):
  the trim walks every free chunk under each arena's lock, 0.1 ms at
  100 MiB here but some 0.2 s in a fragmented heap of 700 MiB, and a large
  replica's freed memory is reused by its own traffic anyway.
- glibc only (`malloc_trim` found in the C library): elsewhere a no-op.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable

logger = logging.getLogger(__name__)

SETTLE_S = 2.0
TRIM_RSS_MAX_BYTES = 256 * 2**20


def _find_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc, or no C library found
        return None
    return trim


_TRIM = _find_trim()


def resident_bytes() -> int | None:
    """This process's resident memory (Linux), None where unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def release_free_heap() -> bool:
    """Trim the C allocator's arenas if this process is small enough; True when it ran."""
    resident = resident_bytes()
    if _TRIM is None or resident is None or resident > TRIM_RSS_MAX_BYTES:
        return False
    _TRIM(0)
    return True


class HeapSettler:
    """One pending trim per process part that owns it (module docstring)."""

    def __init__(self) -> None:
        self._pending: asyncio.TimerHandle | None = None

    def settle(self) -> None:
        """Trim `SETTLE_S` from now, on the running loop (at once without one)."""
        if self._pending is not None:
            self._pending.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            release_free_heap()
            return
        self._pending = loop.call_later(SETTLE_S, self._trim)

    def _trim(self) -> None:
        self._pending = None
        release_free_heap()
