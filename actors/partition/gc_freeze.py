"""Keeping a replica's long-lived state out of the cyclic collector's full collections.

CPython's full (generation 2) collection traverses every tracked object: a
replica of 100,000 offsets-only groups (10 offsets each) tracks some 3.6 M
objects and one collection costs about 0.5 s of the partition's thread (5 s
at 1 M groups), long enough to miss probes and shrink the ISR. The state is
long-lived and nearly acyclic (groups, offsets, records die by reference
counting), so the collector gains nothing from traversing it. `gc.freeze()`
moves every tracked object to the permanent generation, which no collection
traverses. Rules:
- `FreezePolicy` (pure) decides: freeze when the replica's records (its log
  end offset, a cheap proxy for the tracked state) grew by `GROWTH_RATIO` of
  what they were at the last freeze, or by `GROWTH_RECORDS_MAX` (so that the
  unfrozen part, the most a full collection traverses, stays bounded), and
  by at least `GROWTH_RECORDS_MIN` (a small replica is cheap to collect).
  A log that shrank (a truncation, a new log) only moves the base.
- `GcFreezer` (one per actor, on `PartitionHost.gc`) applies it on the
  partition's thread at moments off the request path: a leader's gauge tick
  (every 2 s), a follower's push once applied, and after every load or
  promotion (`freeze_now`). A freeze first collects the young generations
  (`gc.collect(1)`, milliseconds) so that recent garbage is not pinned,
  then splices every generation into the permanent one (O(1) in CPython
  3.11). Nothing is ever unfrozen.
- The trade-off: cyclic garbage already in the old generation when a freeze
  comes is never collected (its objects are freed only if the cycle is
  broken). Measured on a shard filled by 100,000 commits through the real
  request path, a full collection before the freeze finds none of it
  (docs/capacity.md): the state and what the request path leaves are acyclic.
- `GcPauses` times generation-2 collections through `gc.callbacks` (one
  callback per process, installed once): their count and the longest, in
  wall time (what the loop waits) and in the collecting thread's CPU (what
  the collection costs, whatever else the host runs), shown with the
  freezes' in the replica's `info()` as `gc`.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GROWTH_RATIO = 0.25
GROWTH_RECORDS_MAX = 200_000
GROWTH_RECORDS_MIN = 10_000


@dataclass(slots=True)
class FreezePolicy:
    """When to freeze, from the replica's record count (module rules). Pure."""

    frozen_at: int = 0  # the record count at the last freeze
    ratio: float = GROWTH_RATIO
    records_max: int = GROWTH_RECORDS_MAX
    records_min: int = GROWTH_RECORDS_MIN

    def due(self, records: int) -> bool:
        """True if a freeze is due at `records`; a count below the base moves the base."""
        if records < self.frozen_at:
            self.frozen_at = records
            return False
        growth = records - self.frozen_at
        if growth < self.records_min:
            return False
        return growth >= self.records_max or growth >= self.ratio * self.frozen_at

    def frozen(self, records: int) -> None:
        self.frozen_at = records


class GcPauses:
    """Generation-2 collections of this process: how many, and the longest (module rules)."""

    def __init__(self) -> None:
        self.full_collections = 0
        self.longest_ms = 0.0  # wall time: what the partition's loop waits
        self.longest_cpu_ms = 0.0  # the collecting thread's CPU: the same on a host not shared
        self._started = self._started_cpu = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started, self._started_cpu = time.perf_counter(), time.thread_time()
        elif self._started:
            self.full_collections += 1
            self.longest_ms = max(self.longest_ms, (time.perf_counter() - self._started) * 1000)
            self.longest_cpu_ms = max(self.longest_cpu_ms, (time.thread_time() - self._started_cpu) * 1000)
            self._started = 0.0


_PAUSES: GcPauses | None = None


def process_pauses() -> GcPauses:
    """This process's one `GcPauses`, installed in `gc.callbacks` on first use."""
    global _PAUSES
    if _PAUSES is None:
        _PAUSES = GcPauses()
        gc.callbacks.append(_PAUSES)
    return _PAUSES


class GcFreezer:
    """Freezes the replica's state as it grows (module rules); one per partition actor."""

    def __init__(self, records: Callable[[], int]) -> None:
        self._records = records
        self.policy = FreezePolicy()
        self.pauses = process_pauses()
        self.freezes = 0
        self.longest_freeze_ms = 0.0
        self.longest_freeze_cpu_ms = 0.0

    def tick(self) -> bool:
        """Freeze if the policy says so; True if it froze."""
        records = self._records()
        if not self.policy.due(records):
            return False
        self._freeze(records)
        return True

    def freeze_now(self) -> None:
        """A load or a promotion is done: what it built lives long."""
        self._freeze(self._records())

    def _freeze(self, records: int) -> None:
        started, started_cpu = time.perf_counter(), time.thread_time()
        gc.collect(1)
        gc.freeze()
        wall_ms, cpu_ms = (time.perf_counter() - started) * 1000, (time.thread_time() - started_cpu) * 1000
        self.longest_freeze_ms = max(self.longest_freeze_ms, wall_ms)
        self.longest_freeze_cpu_ms = max(self.longest_freeze_cpu_ms, cpu_ms)
        self.freezes += 1
        self.policy.frozen(records)

    def describe(self) -> dict[str, Any]:
        pauses = self.pauses
        return {
            "full_collections": pauses.full_collections,
            "longest_ms": round(pauses.longest_ms, 1),
            "longest_cpu_ms": round(pauses.longest_cpu_ms, 1),
            "freezes": self.freezes,
            "frozen_at_records": self.policy.frozen_at,
            "longest_freeze_ms": round(self.longest_freeze_ms, 1),
            "longest_freeze_cpu_ms": round(self.longest_freeze_cpu_ms, 1),
        }
