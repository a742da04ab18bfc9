"""Live consumer lag and group health: commits and end offsets kept as they arrive, judged when asked.

The coordinator sees every commit as it happens, and the topic registry every
end offset producers report: this module keeps both as they arrive (a commit
appends its offset and time to its partition's window, a report its sample),
and a question about a group costs that group's partitions, never a scan of
every group (DESIGN section 10). Lag, the group's sum and health are computed
when asked (a question, the metrics timer), not on each commit: the commit
path is the leader's hottest, and a commit is far more frequent than a look.

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
window is the last WINDOW_COMMITS commits within `window_ms`; each one's lag
is `lag_as_of` its time, so an end reported late with the producers' earlier
timestamp still counts; the end history keeps the samples a window needs):
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
from itertools import repeat
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


def end_as_of(samples: list[tuple[int, int]], at_ms: int, times: list[int] | None = None) -> int | None:
    """The end offset in effect at `at_ms`: the latest of `samples` [(at_ms, end)] (in time
    order) at or before it; None before the first (`times`: the samples' times, if the
    caller keeps them apart, for a bisect in C)."""
    if times is None:
        i = bisect.bisect_right(samples, at_ms, key=_time_of)
    else:
        i = bisect.bisect_right(times, at_ms)
    return samples[i - 1][1] if i else None


def lag_as_of(
    committed: int, samples: list[tuple[int, int]], at_ms: int, times: list[int] | None = None
) -> int | None:
    """Lag in messages at `at_ms` of the offset committed by then."""
    return lag_messages(committed, end_as_of(samples, at_ms, times))


def lags_as_of(commits: list[tuple[int, int]], times: list[int], ends: list[int]) -> list[int | None]:
    """`lag_as_of` of each (offset, at_ms) of `commits`, against samples kept as their times
    and end offsets apart: the same figures, without three calls per commit."""
    found = map(bisect.bisect_right, repeat(times), [at_ms for _, at_ms in commits])
    return [max(ends[i - 1] - offset, 0) if i else None for (offset, _), i in zip(commits, found)]


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


# A committed offset as kept: its window, the commits themselves flat, offset and time in
# turn, oldest first, the last pair the offset committed now. A commit appends two ints and
# nothing else (no object the garbage collector must walk stays behind it): the lag of each
# commit then is `lag_as_of` its time, found from the end-offset history when a question
# is asked, and a group's sum is its rows' sum. Windows grow to `TRIM_COMMITS` commits and
# are cut to their last `WINDOW_COMMITS` in place: the commit path is the leader's hottest
# (DESIGN section 9).
TRIM_COMMITS = 3 * WINDOW_COMMITS
_TRIM_INTS, _WINDOW_INTS = 2 * TRIM_COMMITS, 2 * WINDOW_COMMITS
HISTORY_SAMPLES_MAX = 4_096  # a hostile reporter's bound: samples a window needs past HISTORY_SAMPLES
# (topic, partition, committed, end, lag, lag_ms, ahead, at_least, health): PartitionLag's fields
Row = tuple[str, int, int, int | None, int | None, int | None, bool, bool, Health]
OffsetKey = tuple[str, str, int]  # group, topic, partition (an OffsetCommitKey is one)


class _Windows(dict[OffsetKey, list[Any]]):
    """One group's windows by (group, topic, partition); a new key's window is made on first use."""

    __slots__ = ()

    def __missing__(self, key: OffsetKey) -> list[Any]:
        window: list[Any] = []
        self[key] = window
        return window


class LagTracker:
    """Each group's recent commits per partition and each partition's end-offset history.

    Work per commit is an append (DESIGN section 9); lag in messages and seconds, the
    group's sum and health are computed when asked, from the group's partitions only."""

    def __init__(self, window_ms: int = 300_000) -> None:
        self.window_ms = window_ms
        self.committed: dict[str, _Windows] = {}
        self.samples: dict[TopicPartition, list[tuple[int, int]]] = {}
        self._ends: dict[TopicPartition, list[int]] = {}  # the samples' end offsets, for bisect
        self._times: dict[TopicPartition, list[int]] = {}  # and their times

    # ------------------------------------------------------------- inputs

    def on_commit(self, group_id: str, tp: TopicPartition, offset: int, now_ms: int) -> None:
        self.on_commit_record((group_id, tp[0], tp[1]), (offset, 0, "", now_ms))

    def on_commit_record(self, key: OffsetKey, value: Any) -> None:
        """An offset record (a key (group, topic, partition), a value ([0] offset, [3] time))."""
        windows = self.committed.get(key[0])
        if windows is None:
            windows = self.committed[key[0]] = _Windows()
        window = windows[key]
        window += value[0:4:3]
        if len(window) > _TRIM_INTS:
            del window[:-_WINDOW_INTS]

    def on_commits(self, group_id: str, keys: list[Any], values: list[Any]) -> None:
        """`on_commit_record` for one commit's offsets of a group (distinct keys)."""
        windows = self.committed.get(group_id)
        if windows is None:
            windows = self.committed[group_id] = _Windows()
        for key, value in zip(keys, values):
            window = windows[key]
            window += value[0:4:3]
            if len(window) > _TRIM_INTS:
                del window[:-_WINDOW_INTS]

    def on_offset_deleted(self, group_id: str, tp: TopicPartition) -> None:
        windows = self.committed.get(group_id)
        if windows is None or windows.pop((group_id, tp[0], tp[1]), None) is None:
            return
        if not windows:
            del self.committed[group_id]

    def on_group_deleted(self, group_id: str) -> None:
        self.committed.pop(group_id, None)

    def on_end(self, tp: TopicPartition, end: int, at_ms: int) -> None:
        """A reported end offset (ends and times never go back: the registry refuses that)."""
        samples = self.samples.setdefault(tp, [])
        ends = self._ends.setdefault(tp, [])
        times = self._times.setdefault(tp, [])
        samples.append((at_ms, end))
        ends.append(end)
        times.append(at_ms)
        if len(samples) > HISTORY_SAMPLES + WINDOW_COMMITS:
            cut = self._history_cut(times, at_ms)
            del samples[:cut], ends[:cut], times[:cut]

    def _history_cut(self, times: list[int], now_ms: int) -> int:
        """How many of the oldest samples can go: beyond HISTORY_SAMPLES, those older than the
        one in effect a window ago (the commits of a window are judged against it), but at
        most HISTORY_SAMPLES_MAX kept."""
        in_effect = bisect.bisect_right(times, now_ms - self.window_ms) - 1
        cut = min(len(times) - HISTORY_SAMPLES, max(in_effect, 0))
        return max(cut, len(times) - HISTORY_SAMPLES_MAX)

    def load_ends(self, samples: dict[TopicPartition, list[tuple[int, int]]]) -> None:
        """Replace every end-offset history (a whole view, after a load or a restarted
        registry); nothing else depends on it until a question."""
        self.samples = {tp: list(kept[-HISTORY_SAMPLES_MAX:]) for tp, kept in samples.items() if kept}
        self._ends = {tp: [end for _, end in kept] for tp, kept in self.samples.items()}
        self._times = {tp: [at_ms for at_ms, _ in kept] for tp, kept in self.samples.items()}

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
        windows = self.committed.get(group_id)
        if windows is None:
            return None
        # Inline, not a call or two per row: a question about every group, and the metrics
        # export, are a row per committed offset of the partition (DESIGN section 9).
        since = now_ms - self.window_ms
        samples_of, ends_of = self.samples, self._ends
        rows: list[Row] = []
        for key, window in sorted(windows.items(), key=_first_of):
            tp = (key[1], key[2])
            offset = window[-2]
            samples = samples_of.get(tp)
            if not samples:
                health = Health.OK if len(window) == 2 else self.window_health(window, None, tp, now_ms)
                rows.append((key[1], key[2], offset, None, None, None, False, False, health))
                continue
            end = samples[-1][1]
            ms: int | None
            if offset >= end:
                lag, ms, at_least = 0, 0, False
            else:
                lag = end - offset
                ms, at_least = lag_ms(offset, samples, now_ms, ends_of[tp])
            if len(window) == 2:  # committed once: `window_health`'s first rule, without the call
                health = Health.STOPPED if lag and window[-1] < since else Health.OK
            else:
                health = self.window_health(window, lag, tp, now_ms)
            rows.append((key[1], key[2], offset, end, lag, ms, offset > end, at_least, health))
        return rows

    def lag_sum(self, group_id: str) -> int | None:
        """The group's lag in messages over its partitions with a known end; None: no such
        group, or no end known (the cheap question: no seconds, no health)."""
        windows = self.committed.get(group_id)
        total: int | None = None
        for key, window in (windows or {}).items():
            samples = self.samples.get((key[1], key[2]))
            if samples:
                total = (total or 0) + max(samples[-1][1] - window[-2], 0)
        return total

    def group_lag(self, group_id: str, now_ms: int) -> GroupLag | None:
        rows = self.rows(group_id, now_ms)
        if rows is None:
            return None
        return self.summary(group_id, rows, tuple(PartitionLag(*row) for row in rows))

    def summary(self, group_id: str, rows: list[Row], partitions: tuple[PartitionLag, ...] = ()) -> GroupLag:
        """The group's GroupLag from its `rows` (`partitions`: its PartitionLags, or none)."""
        lags = [row[4] for row in rows if row[4] is not None]
        lags_ms = [row[5] for row in rows if row[5] is not None]
        health = max((row[8] for row in rows), default=Health.OK)
        return GroupLag(group_id, partitions, sum(lags) if lags else None, max(lags_ms, default=None), health)

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

    def sample_ends(self, tp: TopicPartition) -> list[int]:
        """The end offsets of `tp`'s samples, apart (a bisect in C); empty when none."""
        return self._ends.get(tp, [])

    def window_health(self, window: list[Any], lag: int | None, tp: TopicPartition, now_ms: int) -> Health:
        """The health of one committed offset, from its `window` (the module's rules)."""
        since = now_ms - self.window_ms
        last_at = window[-1]
        if len(window) == 2:  # committed once: no rewind, stall or growth to see
            return Health.STOPPED if lag and last_at < since else Health.OK
        times = self._times.get(tp)
        flat = window[-_WINDOW_INTS:]
        recent = [(offset, at) for offset, at in zip(flat[0::2], flat[1::2]) if at >= since]
        offsets = [offset for offset, _ in recent]
        if any(later < earlier for earlier, later in zip(offsets, offsets[1:])):
            return Health.REWIND
        if not lag:
            return Health.OK
        # Each commit's lag then: the offset against the end as of its time (one definition).
        lags = lags_as_of(recent, times, self._ends[tp]) if times else [None] * len(recent)
        if 0 in lags:
            return Health.OK
        if last_at < since:
            return Health.STOPPED
        if len(recent) >= 2 and len(set(offsets)) == 1:
            return Health.STALLED
        grown = [commit_lag or 0 for commit_lag in lags]
        if len(grown) >= 3 and all(later > earlier for earlier, later in zip(grown, grown[1:])):
            return Health.WARN
        return Health.OK


def _first_of(item: tuple[OffsetKey, list[Any]]) -> OffsetKey:
    return item[0]


def _first(item: tuple[int, str, Row]) -> int:
    return item[0]
