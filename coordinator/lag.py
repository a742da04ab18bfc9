"""Live consumer lag and group health, kept incrementally from commits and end offsets.

The coordinator sees every commit as it happens, and the topic registry every
end offset producers report: this module keeps lag from both as they arrive,
so a question about a group costs that group's partitions, never a scan of
every group (DESIGN section 10: signals are pushed, not polled).

One definition of lag, whoever computes it (the live path here; Spark's
jobs through `spark_bridge/lag_columns.py`, its column form, tested against
these functions):
- In messages: `end - committed`, never below 0 (a committed offset past the
  reported end is lag 0 and flagged `ahead`: the reporter is behind); None
  (unknown, not 0) for a partition no end was reported for.
- As of a time (`lag_as_of`): the offset committed by then against the end
  offset as of then, the partition's latest sample at or before that time
  (`end_as_of`); the live lag is the lag as of now.
- In seconds (`lag_ms`): how long ago the end offset passed the committed
  one, i.e. now minus the time the message at the committed offset was
  produced, interpolated between the two end-offset samples around it (as
  lag exporters do, and exact when producers report with their own
  timestamps); 0 when caught up; measured from the oldest kept sample (and
  flagged `at_least`) when the committed offset is older than every sample.

Health, per partition then the group's worst, Burrow's rules made exact (the
window is `window_ms` of commits):
- REWIND: a commit in the window moved the offset back.
- STOPPED: lag > 0 and no commit for a whole window.
- STALLED: lag > 0 and the commits of the window all repeat one offset.
- WARN: lag > 0 and it grew at every commit of the window (at least three).
- OK otherwise (a partition caught up at any commit of the window is OK).
EMPTY and DEAD are the group's state, which the caller knows.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from dataclasses import dataclass, field
from enum import IntEnum

TopicPartition = tuple[str, int]
HISTORY_SAMPLES = 256  # end-offset samples kept per partition (the oldest go first)
WINDOW_COMMITS = 32  # commits kept per group partition for health


class Health(IntEnum):
    """Worse is larger: a group's health is its worst partition's."""

    OK = 0
    WARN = 1
    REWIND = 2
    STALLED = 3
    STOPPED = 4


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int
    end: int | None
    lag: int | None
    lag_ms: int | None
    ahead: bool = False  # committed past the reported end
    at_least: bool = False  # lag_ms is a lower bound: older than every sample kept
    health: Health = Health.OK


@dataclass(frozen=True, slots=True)
class GroupLag:
    group_id: str
    partitions: tuple[PartitionLag, ...]
    lag: int | None  # over the partitions with an end; None when none has one
    lag_ms: int | None  # the largest of its partitions'
    health: Health


def lag_messages(committed: int, end: int | None) -> int | None:
    return None if end is None else max(end - committed, 0)


def end_as_of(samples: list[tuple[int, int]], at_ms: int) -> int | None:
    """The end offset in effect at `at_ms`: the latest of `samples` [(at_ms, end)] (in time
    order) at or before it; None before the first."""
    i = bisect.bisect_right(samples, at_ms, key=_time_of)
    return samples[i - 1][1] if i else None


def lag_as_of(committed: int, samples: list[tuple[int, int]], at_ms: int) -> int | None:
    """Lag in messages at `at_ms` of the offset committed by then."""
    return lag_messages(committed, end_as_of(samples, at_ms))


def lag_ms(committed: int, samples: list[tuple[int, int]], now_ms: int) -> tuple[int | None, bool]:
    """(lag in ms, at_least) of `committed` against `samples` [(at_ms, end)] in time order."""
    if not samples:
        return None, False
    if committed >= samples[-1][1]:
        return 0, False
    wanted = committed + 1  # the end offset once the message at `committed` exists
    i = bisect.bisect_left(samples, wanted, key=_end_of)
    if i == 0:
        return max(now_ms - samples[0][0], 0), True
    (at0, end0), (at1, end1) = samples[i - 1], samples[i]
    produced_at = at0 + (wanted - end0) * (at1 - at0) // (end1 - end0)
    return max(now_ms - produced_at, 0), False


def _end_of(sample: tuple[int, int]) -> int:
    return sample[1]


def _time_of(sample: tuple[int, int]) -> int:
    return sample[0]


def _lag_of(row: tuple[str, PartitionLag]) -> int:
    return row[1].lag or 0


@dataclass(slots=True)
class _Committed:
    offset: int
    at_ms: int
    window: deque[tuple[int, int, int | None]] = field(default_factory=lambda: deque(maxlen=WINDOW_COMMITS))


class LagTracker:
    """Committed offsets per group, end offsets per partition, and each group's lag sum."""

    def __init__(self, window_ms: int = 300_000) -> None:
        self.window_ms = window_ms
        self.committed: dict[str, dict[TopicPartition, _Committed]] = {}
        self.samples: dict[TopicPartition, list[tuple[int, int]]] = {}
        self.readers: dict[TopicPartition, set[str]] = {}  # who committed to a partition
        self.totals: dict[str, int] = {}  # each group's lag over the partitions with an end

    # ------------------------------------------------------------- inputs

    def on_commit(self, group_id: str, tp: TopicPartition, offset: int, now_ms: int) -> None:
        offsets = self.committed.setdefault(group_id, {})
        kept = offsets.get(tp)
        end = self.end(tp)
        before = lag_messages(kept.offset, end) if kept is not None else None
        if kept is None:
            kept = offsets[tp] = _Committed(offset, now_ms)
            self.readers.setdefault(tp, set()).add(group_id)
        kept.offset, kept.at_ms = offset, now_ms
        now = lag_messages(offset, end)
        kept.window.append((now_ms, offset, now))
        self.totals[group_id] = self.totals.get(group_id, 0) + (now or 0) - (before or 0)

    def on_offset_deleted(self, group_id: str, tp: TopicPartition) -> None:
        kept = self.committed.get(group_id, {}).pop(tp, None)
        if kept is None:
            return
        self.totals[group_id] -= lag_messages(kept.offset, self.end(tp)) or 0
        readers = self.readers.get(tp)
        if readers is not None:
            readers.discard(group_id)
        if not self.committed[group_id]:
            del self.committed[group_id], self.totals[group_id]

    def on_group_deleted(self, group_id: str) -> None:
        for tp in list(self.committed.get(group_id, {})):
            self.on_offset_deleted(group_id, tp)

    def on_end(self, tp: TopicPartition, end: int, at_ms: int) -> None:
        """A reported end offset (ends and times never go back: the registry refuses that)."""
        before = self.end(tp)
        samples = self.samples.setdefault(tp, [])
        samples.append((at_ms, end))
        if len(samples) > HISTORY_SAMPLES:
            del samples[: len(samples) - HISTORY_SAMPLES]
        if before == end:
            return
        for group_id in self.readers.get(tp, ()):
            offset = self.committed[group_id][tp].offset
            change = (lag_messages(offset, end) or 0) - (lag_messages(offset, before) or 0)
            self.totals[group_id] += change

    def load_ends(self, samples: dict[TopicPartition, list[tuple[int, int]]]) -> None:
        """Replace every end-offset history (a whole view, after a load or a restarted
        registry): each group's sum is recomputed once, O(committed offsets)."""
        self.samples = {tp: list(kept[-HISTORY_SAMPLES:]) for tp, kept in samples.items() if kept}
        for group_id, offsets in self.committed.items():
            self.totals[group_id] = sum(
                lag_messages(kept.offset, self.end(tp)) or 0 for tp, kept in offsets.items()
            )

    def forget_groups(self, group_ids: list[str]) -> None:
        """Groups the shard no longer holds (moved away, unloaded): their offsets go, ends stay."""
        for group_id in group_ids:
            self.on_group_deleted(group_id)

    # ------------------------------------------------------------- answers

    def end(self, tp: TopicPartition) -> int | None:
        samples = self.samples.get(tp)
        return samples[-1][1] if samples else None

    def groups(self) -> list[str]:
        return sorted(self.committed)

    def group_lag(self, group_id: str, now_ms: int) -> GroupLag | None:
        offsets = self.committed.get(group_id)
        if offsets is None:
            return None
        rows = tuple(self._partition(tp, kept, now_ms) for tp, kept in sorted(offsets.items()))
        with_end = [row for row in rows if row.end is not None]
        lags_ms = [row.lag_ms for row in rows if row.lag_ms is not None]
        health = max((row.health for row in rows), default=Health.OK)
        total = self.totals[group_id] if with_end else None
        return GroupLag(group_id, rows, total, max(lags_ms, default=None), health)

    def export(
        self, now_ms: int, partitions_max: int
    ) -> tuple[list[GroupLag], list[tuple[str, PartitionLag]]]:
        """What the metrics show: every group's lag, and the `partitions_max` partitions
        (group, partition) with the most lag in messages (the operator's cardinality cap)."""
        groups = [self.group_lag(group_id, now_ms) for group_id in self.committed]
        lagged = [g for g in groups if g is not None]
        if partitions_max <= 0:
            return lagged, []
        rows = ((g.group_id, p) for g in lagged for p in g.partitions if p.lag)
        return lagged, heapq.nlargest(partitions_max, rows, key=_lag_of)

    def _partition(self, tp: TopicPartition, kept: _Committed, now_ms: int) -> PartitionLag:
        end = self.end(tp)
        lag = lag_messages(kept.offset, end)
        ms, at_least = lag_ms(kept.offset, self.samples.get(tp, []), now_ms)
        ahead = end is not None and kept.offset > end
        health = self._health(kept, lag, now_ms)
        return PartitionLag(tp[0], tp[1], kept.offset, end, lag, ms, ahead, at_least, health)

    def _health(self, kept: _Committed, lag: int | None, now_ms: int) -> Health:
        since = now_ms - self.window_ms
        window = [sample for sample in kept.window if sample[0] >= since]
        offsets = [offset for _, offset, _ in window]
        if any(later < earlier for earlier, later in zip(offsets, offsets[1:])):
            return Health.REWIND
        if not lag or any(sample_lag == 0 for _, _, sample_lag in window):
            return Health.OK
        if kept.at_ms < since:
            return Health.STOPPED
        if len(window) >= 2 and len(set(offsets)) == 1:
            return Health.STALLED
        lags = [sample_lag or 0 for _, _, sample_lag in window]
        if len(lags) >= 3 and all(later > earlier for earlier, later in zip(lags, lags[1:])):
            return Health.WARN
        return Health.OK

