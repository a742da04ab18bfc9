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
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

TopicPartition = tuple[str, int]
HISTORY_SAMPLES = 256  # end-offset samples kept per partition (the oldest go first)
WINDOW_COMMITS = 10  # commits kept per group partition for health (Burrow's window is 10 commits)


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


def lag_ms(
    committed: int, samples: list[tuple[int, int]], now_ms: int, ends: list[int] | None = None
) -> tuple[int | None, bool]:
    """(lag in ms, at_least) of `committed` against `samples` [(at_ms, end)] in time order
    (`ends`: their end offsets, if the caller keeps them apart, for a bisect in C)."""
    if not samples:
        return None, False
    if committed >= samples[-1][1]:
        return 0, False
    wanted = committed + 1  # the end offset once the message at `committed` exists
    if ends is None:
        i = bisect.bisect_left(samples, wanted, key=_end_of)
    else:
        i = bisect.bisect_left(ends, wanted)
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


# A committed offset as kept: [offset, at_ms, lag then, window], the window the earlier
# commits flat, at_ms, offset, lag (-1: unknown) in turn, None until a second commit
# (trimmed to WINDOW_COMMITS once twice as long). Plain lists of ints, no window for a key
# committed once, no tuple per commit: every container made per key or commit costs
# allocation and the garbage collector's time on every later commit.
_OFFSET, _AT, _LAG, _WINDOW = 0, 1, 2, 3
# (topic, partition, committed, end, lag, lag_ms, ahead, at_least, health): PartitionLag's fields
Row = tuple[str, int, int, int | None, int | None, int | None, bool, bool, Health]


class LagTracker:
    """Committed offsets per group, end offsets per partition, and each group's lag sum."""

    def __init__(self, window_ms: int = 300_000) -> None:
        self.window_ms = window_ms
        self.committed: dict[str, dict[TopicPartition, list[Any]]] = {}
        self.samples: dict[TopicPartition, list[tuple[int, int]]] = {}
        self._ends: dict[TopicPartition, list[int]] = {}  # the samples' end offsets, for bisect
        self.readers: dict[TopicPartition, set[str]] = {}  # who committed to a partition
        self.totals: dict[str, int] = {}  # each group's lag over the partitions with an end

    # ------------------------------------------------------------- inputs

    def on_commit(self, group_id: str, tp: TopicPartition, offset: int, now_ms: int) -> None:
        offsets = self.committed.get(group_id)
        if offsets is None:
            offsets = self.committed[group_id] = {}
            self.totals[group_id] = 0
        samples = self.samples.get(tp)
        kept = offsets.get(tp)
        if samples:
            end = samples[-1][1]
            now = end - offset if end > offset else 0
            if kept is not None:
                before = kept[0]
                self.totals[group_id] += now - (end - before if end > before else 0)
            else:
                self.totals[group_id] += now
        else:
            now = None
        if kept is None:
            offsets[tp] = [offset, now_ms, now, None]
            readers = self.readers.get(tp)
            if readers is None:
                readers = self.readers[tp] = set()
            readers.add(group_id)
            return
        before_lag = kept[2]
        window = kept[3]
        if window is None:
            kept[3] = [kept[1], kept[0], -1 if before_lag is None else before_lag]
        else:
            window += (kept[1], kept[0], -1 if before_lag is None else before_lag)
            if len(window) >= 6 * WINDOW_COMMITS:
                del window[: -3 * WINDOW_COMMITS]
        kept[0] = offset
        kept[1] = now_ms
        kept[2] = now

    def on_commits(self, group_id: str, keys: list[Any], values: list[Any]) -> None:
        """`on_commit` for one commit's offsets of a group (offset records' keys and values:
        (group, topic, partition), (offset, ..., commit time)), with the lookups done once."""
        on_commit = self.on_commit
        offsets = self.committed.get(group_id)
        if offsets is None:
            for key, value in zip(keys, values):
                on_commit(group_id, (key[1], key[2]), value[0], value[3])
            return
        samples_of = self.samples.get
        change = 0
        for key, value in zip(keys, values):
            tp = (key[1], key[2])
            kept = offsets.get(tp)
            if kept is None:
                self.totals[group_id] += change
                change = 0
                on_commit(group_id, tp, value[0], value[3])
                continue
            offset = value[0]
            samples = samples_of(tp)
            if samples:
                end = samples[-1][1]
                now = end - offset if end > offset else 0
                before = kept[0]
                change += now - (end - before if end > before else 0)
            else:
                now = None
            window = kept[3]
            if window is None:
                kept[3] = [kept[1], kept[0], -1 if kept[2] is None else kept[2]]
            else:
                window += (kept[1], kept[0], -1 if kept[2] is None else kept[2])
                if len(window) >= 6 * WINDOW_COMMITS:
                    del window[: -3 * WINDOW_COMMITS]
            kept[0] = offset
            kept[1] = value[3]
            kept[2] = now
        self.totals[group_id] += change

    def on_offset_deleted(self, group_id: str, tp: TopicPartition) -> None:
        kept = self.committed.get(group_id, {}).pop(tp, None)
        if kept is None:
            return
        self.totals[group_id] -= lag_messages(kept[_OFFSET], self.end(tp)) or 0
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
        ends = self._ends.setdefault(tp, [])
        samples.append((at_ms, end))
        ends.append(end)
        if len(samples) > HISTORY_SAMPLES:
            del samples[: len(samples) - HISTORY_SAMPLES], ends[: len(ends) - HISTORY_SAMPLES]
        if before == end:
            return
        for group_id in self.readers.get(tp, ()):
            offset = self.committed[group_id][tp][_OFFSET]
            change = (lag_messages(offset, end) or 0) - (lag_messages(offset, before) or 0)
            self.totals[group_id] += change

    def load_ends(self, samples: dict[TopicPartition, list[tuple[int, int]]]) -> None:
        """Replace every end-offset history (a whole view, after a load or a restarted
        registry): each group's sum is recomputed once, O(committed offsets)."""
        self.samples = {tp: list(kept[-HISTORY_SAMPLES:]) for tp, kept in samples.items() if kept}
        self._ends = {tp: [end for _, end in kept] for tp, kept in self.samples.items()}
        for group_id, offsets in self.committed.items():
            self.totals[group_id] = sum(
                lag_messages(kept[_OFFSET], self.end(tp)) or 0 for tp, kept in offsets.items()
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

    def rows(self, group_id: str, now_ms: int) -> list[Row] | None:
        """The group's partitions as plain rows (PartitionLag's fields), sorted; None: no such group."""
        offsets = self.committed.get(group_id)
        if offsets is None:
            return None
        return [self._row(tp, kept, now_ms) for tp, kept in sorted(offsets.items())]

    def group_lag(self, group_id: str, now_ms: int) -> GroupLag | None:
        rows = self.rows(group_id, now_ms)
        if rows is None:
            return None
        return self.summary(group_id, rows, tuple(PartitionLag(*row) for row in rows))

    def summary(self, group_id: str, rows: list[Row], partitions: tuple[PartitionLag, ...] = ()) -> GroupLag:
        """The group's GroupLag from its `rows` (`partitions`: its PartitionLags, or none)."""
        with_end = any(row[3] is not None for row in rows)
        lags_ms = [row[5] for row in rows if row[5] is not None]
        health = max((row[8] for row in rows), default=Health.OK)
        total = self.totals[group_id] if with_end else None
        return GroupLag(group_id, partitions, total, max(lags_ms, default=None), health)

    def export(
        self, now_ms: int, partitions_max: int, group_ids: Iterable[str] | None = None
    ) -> tuple[list[GroupLag], list[tuple[str, PartitionLag]], int]:
        """What the metrics show: every group's lag (of `group_ids`, if given: a caller
        exporting in chunks), the `partitions_max` partitions (group, partition) with the
        most lag in messages (the operator's cardinality cap), and how many partitions lag
        in all. The groups come without their partitions."""
        groups: list[GroupLag] = []
        lagging: list[tuple[int, str, Row]] = []
        for group_id in self.committed if group_ids is None else group_ids:
            if group_id not in self.committed:
                continue
            rows = self.rows(group_id, now_ms) or []
            groups.append(self.summary(group_id, rows))
            if partitions_max > 0:
                lagging.extend((row[4], group_id, row) for row in rows if row[4])
        top = heapq.nlargest(partitions_max, lagging, key=_first) if partitions_max > 0 else []
        return groups, [(group_id, PartitionLag(*row)) for _, group_id, row in top], len(lagging)

    def _row(self, tp: TopicPartition, kept: list[Any], now_ms: int) -> Row:
        offset = kept[_OFFSET]
        samples = self.samples.get(tp)
        if not samples:
            health = self._health(kept, None, now_ms)
            return (tp[0], tp[1], offset, None, None, None, False, False, health)
        end = samples[-1][1]
        lag = end - offset if end > offset else 0
        ms, at_least = lag_ms(offset, samples, now_ms, self._ends.get(tp))
        return (tp[0], tp[1], offset, end, lag, ms, offset > end, at_least, self._health(kept, lag, now_ms))

    def _health(self, kept: list[Any], lag: int | None, now_ms: int) -> Health:
        since = now_ms - self.window_ms
        if kept[_WINDOW] is None:  # committed once: no rewind, stall or growth to see
            return Health.STOPPED if lag and kept[_AT] < since else Health.OK
        flat = (kept[_WINDOW] or [])[-3 * (WINDOW_COMMITS - 1):]
        earlier = zip(flat[0::3], flat[1::3], [None if lag < 0 else lag for lag in flat[2::3]])
        window = [s for s in earlier if s[0] >= since]
        if kept[_AT] >= since:
            window.append((kept[_AT], kept[_OFFSET], kept[_LAG]))
        offsets = [offset for _, offset, _ in window]
        if any(later < earlier for earlier, later in zip(offsets, offsets[1:])):
            return Health.REWIND
        if not lag or any(sample_lag == 0 for _, _, sample_lag in window):
            return Health.OK
        if kept[_AT] < since:
            return Health.STOPPED
        if len(window) >= 2 and len(set(offsets)) == 1:
            return Health.STALLED
        lags = [sample_lag or 0 for _, _, sample_lag in window]
        if len(lags) >= 3 and all(later > earlier for earlier, later in zip(lags, lags[1:])):
            return Health.WARN
        return Health.OK


def _first(item: tuple[int, str, Row]) -> int:
    return item[0]
