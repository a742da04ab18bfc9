"""Live lag and health (coordinator/lag.py): the definitions, the incremental sums
against a recomputation, and Burrow's rules with a manual clock."""

from __future__ import annotations

import random

import pytest

from coordinator.lag import Health, LagTracker, lag_messages, lag_ms

MINUTE = 60_000


def test_lag_in_messages_is_never_negative_and_unknown_without_an_end() -> None:
    assert lag_messages(40, 100) == 60
    assert lag_messages(120, 100) == 0
    assert lag_messages(40, None) is None


@pytest.mark.parametrize(
    ("committed", "want"),
    [(200, (0, False)), (250, (0, False)), (50, (2_490, False)), (100, (1_990, False)), (99, (2_000, False))],
)
def test_lag_in_time_interpolates_when_the_committed_message_was_produced(
    committed: int, want: tuple[int, bool]
) -> None:
    samples = [(0, 0), (1_000, 100), (2_000, 200)]
    assert lag_ms(committed, samples, now_ms=3_000) == want


def test_lag_in_time_older_than_every_sample_is_a_lower_bound() -> None:
    assert lag_ms(50, [(1_000, 100), (2_000, 200)], now_ms=3_000) == (2_000, True)
    assert lag_ms(50, [], now_ms=3_000) == (None, False)


@pytest.mark.parametrize("seed", range(20))
def test_incremental_sums_equal_a_recomputation(seed: int) -> None:
    rng = random.Random(seed)
    tracker = LagTracker()
    ends: dict[tuple[str, int], int] = {}
    now = 0
    for _ in range(400):
        now += rng.randrange(1_000)
        tp = ("t", rng.randrange(4))
        roll = rng.random()
        if roll < 0.3:
            ends[tp] = ends.get(tp, 0) + rng.randrange(50)
            tracker.on_end(tp, ends[tp], now)
        elif roll < 0.9:
            tracker.on_commit(f"g{rng.randrange(5)}", tp, rng.randrange(300), now)
        elif roll < 0.95:
            tracker.on_offset_deleted(f"g{rng.randrange(5)}", tp)
        else:
            tracker.on_group_deleted(f"g{rng.randrange(5)}")
    for group_id in tracker.groups():
        lag = tracker.group_lag(group_id, now)
        assert lag is not None
        known = [lag_messages(p.committed, ends.get((p.topic, p.partition))) for p in lag.partitions]
        with_end = [k for k in known if k is not None]
        assert lag.lag == (sum(with_end) if with_end else None)
        assert tracker.lag_sum(group_id) == lag.lag  # the lag watches' cheap sum
    assert tracker.lag_sum("no-such-group") is None


def tracker_with_end(end: int) -> LagTracker:
    tracker = LagTracker(window_ms=5 * MINUTE)
    tracker.on_end(("t", 0), end, 0)
    return tracker


def health(tracker: LagTracker, now_ms: int) -> Health:
    lag = tracker.group_lag("g", now_ms)
    assert lag is not None
    return lag.health


def test_a_consumer_that_keeps_up_is_ok_and_one_that_falls_behind_warns() -> None:
    tracker = tracker_with_end(100)
    for i, offset in enumerate((10, 40, 70, 100)):
        tracker.on_commit("g", ("t", 0), offset, i * MINUTE)
    assert health(tracker, 4 * MINUTE) is Health.OK
    behind = LagTracker(window_ms=5 * MINUTE)
    for i in range(4):
        behind.on_end(("t", 0), 100 * (i + 1), i * MINUTE)
        behind.on_commit("g", ("t", 0), 10 * (i + 1), i * MINUTE)
    lag = behind.group_lag("g", 4 * MINUTE)
    assert lag is not None and lag.health is Health.WARN and lag.lag == 360


def test_the_same_offset_again_and_again_with_lag_is_stalled() -> None:
    tracker = tracker_with_end(100)
    for i in range(3):
        tracker.on_commit("g", ("t", 0), 40, i * MINUTE)
    assert health(tracker, 3 * MINUTE) is Health.STALLED


def test_no_commit_for_a_window_with_lag_is_stopped_without_lag_ok() -> None:
    tracker = tracker_with_end(100)
    tracker.on_commit("g", ("t", 0), 40, 0)
    assert health(tracker, 4 * MINUTE) is Health.OK
    assert health(tracker, 6 * MINUTE) is Health.STOPPED
    tracker.on_commit("g", ("t", 0), 100, 7 * MINUTE)
    assert health(tracker, 20 * MINUTE) is Health.OK, "caught up: nothing to consume"


def test_an_offset_committed_once_is_stopped_only_with_lag_after_a_window() -> None:
    caught_up = tracker_with_end(100)
    caught_up.on_commit("g", ("t", 0), 100, 0)
    assert health(caught_up, 6 * MINUTE) is Health.OK
    unknown = LagTracker(window_ms=5 * MINUTE)  # no end reported: lag unknown, never judged
    unknown.on_commit("g", ("t", 0), 40, 0)
    assert health(unknown, 6 * MINUTE) is Health.OK
    lagging = tracker_with_end(100)
    lagging.on_commit("g", ("t", 0), 40, MINUTE)
    assert [health(lagging, t * MINUTE) for t in (1, 6, 7)] == [Health.OK, Health.OK, Health.STOPPED]


def test_a_commit_that_goes_back_is_a_rewind_for_a_window() -> None:
    tracker = tracker_with_end(100)
    tracker.on_commit("g", ("t", 0), 60, 0)
    tracker.on_commit("g", ("t", 0), 20, MINUTE)
    assert health(tracker, 2 * MINUTE) is Health.REWIND
    tracker.on_commit("g", ("t", 0), 30, 7 * MINUTE)
    assert health(tracker, 7 * MINUTE) is Health.OK


def test_a_partition_without_an_end_has_unknown_lag_not_zero() -> None:
    tracker = LagTracker()
    tracker.on_commit("g", ("t", 0), 40, 0)
    lag = tracker.group_lag("g", 0)
    assert lag is not None and lag.lag is None and lag.partitions[0].lag is None
    tracker.on_end(("t", 0), 30, 1)
    lag = tracker.group_lag("g", 1)
    assert lag is not None and lag.lag == 0 and lag.partitions[0].ahead


def test_the_export_has_every_group_and_only_the_partitions_with_most_lag() -> None:
    tracker = LagTracker()
    for p in range(4):
        tracker.on_end(("t", p), 100, 0)
    for g, offsets in {"a": (90, 10), "b": (100, 50), "c": (0, 100)}.items():
        for p, offset in enumerate(offsets):
            tracker.on_commit(g, ("t", p), offset, 0)
    groups, partitions, lagging = tracker.export(0, partitions_max=2)
    assert lagging == 4
    assert sorted((g.group_id, g.lag) for g in groups) == [("a", 100), ("b", 50), ("c", 100)]
    assert [(g, p.partition, p.lag) for g, p in partitions] == [("c", 0, 100), ("a", 1, 90)]
    assert tracker.export(0, partitions_max=0)[1] == [], "a cap of 0: no per-partition series"


def test_the_end_as_of_a_time_is_the_latest_sample_at_or_before_it() -> None:
    from coordinator.lag import end_as_of, lag_as_of

    samples = [(1_000, 20), (70_000, 30), (130_000, 60)]
    assert [end_as_of(samples, t) for t in (999, 1_000, 69_999, 70_000, 200_000)] == [None, 20, 20, 30, 60]
    assert lag_as_of(15, samples, 60_000) == 5
    assert lag_as_of(35, samples, 100_000) == 0, "past the end then: never negative"
    assert lag_as_of(15, samples, 500) is None, "no end yet: unknown"


@pytest.mark.parametrize("seed", range(5))
def test_a_commits_offsets_at_once_are_its_offsets_one_by_one(seed: int) -> None:
    from coordinator.records import OffsetCommitKey, OffsetCommitValue

    rng = random.Random(seed)
    one_by_one, at_once = LagTracker(), LagTracker()
    for tracker in (one_by_one, at_once):
        tracker.on_end(("t", 0), 500, 0)
        tracker.on_end(("t", 1), 300, 0)
    for n in range(60):
        tps = rng.sample([("t", 0), ("t", 1), ("u", 0)], rng.randrange(1, 4))
        keys = [OffsetCommitKey("g", *tp) for tp in tps]
        values = [OffsetCommitValue(rng.randrange(600), 1, "", n * 1_000) for _ in tps]
        for key, value in zip(keys, values):
            one_by_one.on_commit("g", (key.topic, key.partition), value.offset, value.commit_timestamp_ms)
        at_once.on_commits("g", keys, values)
        assert at_once.group_lag("g", n * 1_000) == one_by_one.group_lag("g", n * 1_000)
        assert at_once.rows("g", n * 1_000) == one_by_one.rows("g", n * 1_000)


def test_a_commits_lag_then_is_judged_as_of_its_time_when_the_ends_come_later() -> None:
    """The window keeps only offsets and times: an end reported after the commits, with the
    producers' earlier timestamps, still shows the lag each commit had then."""
    tracker = LagTracker(window_ms=5 * MINUTE)
    for i in range(4):
        tracker.on_commit("g", ("t", 0), 10 * (i + 1), i * MINUTE)
    for i in range(4):
        tracker.on_end(("t", 0), 100 * (i + 1), i * MINUTE)
    lag = tracker.group_lag("g", 4 * MINUTE)
    assert lag is not None and lag.health is Health.WARN and lag.lag == 360


def test_a_long_run_of_commits_keeps_a_bounded_window_judged_as_its_last_commits() -> None:
    from coordinator.lag import TRIM_COMMITS, WINDOW_COMMITS

    long_run, last_only = tracker_with_end(10_000), tracker_with_end(10_000)
    offsets = [5] * 1_000 + [7 * (i + 1) for i in range(WINDOW_COMMITS)]
    for i, offset in enumerate(offsets):
        long_run.on_commit("g", ("t", 0), offset, i)
        if i >= len(offsets) - WINDOW_COMMITS:
            last_only.on_commit("g", ("t", 0), offset, i)
    assert len(long_run.committed["g"][("g", "t", 0)]) <= 2 * TRIM_COMMITS
    now = len(offsets)
    assert long_run.group_lag("g", now) == last_only.group_lag("g", now)
    long_run.on_commit("g", ("t", 0), 70, now)  # once more: not yet a window of one offset
    last_only.on_commit("g", ("t", 0), 70, now)
    assert long_run.group_lag("g", now) == last_only.group_lag("g", now)
    assert long_run.group_lag("g", now).health is Health.OK  # type: ignore[union-attr]
    for t in range(1, WINDOW_COMMITS):
        long_run.on_commit("g", ("t", 0), 70, now + t)
    assert long_run.group_lag("g", now + WINDOW_COMMITS).health is Health.STALLED  # type: ignore[union-attr]


def test_the_end_history_keeps_what_the_window_needs_beyond_its_sample_count() -> None:
    """Ends reported more often than HISTORY_SAMPLES a window: the window's commits are
    still judged against the end in effect at their time (a growing lag warns)."""
    from coordinator.lag import HISTORY_SAMPLES, HISTORY_SAMPLES_MAX

    tracker = LagTracker(window_ms=5 * MINUTE)
    reports = 2 * HISTORY_SAMPLES
    step_ms = 5 * MINUTE // reports
    for n in range(reports):
        tracker.on_end(("t", 0), 1_000 * (n + 1), n * step_ms)
        if n % (reports // 4) == 0:
            tracker.on_commit("g", ("t", 0), 10 * (n + 1), n * step_ms)
    lag = tracker.group_lag("g", reports * step_ms)
    assert lag is not None and lag.health is Health.WARN
    for n in range(reports, 4 * HISTORY_SAMPLES_MAX):  # a flood within a window: bounded anyway
        tracker.on_end(("t", 0), 1_000 * (n + 1), reports * step_ms + n)
    assert len(tracker.samples[("t", 0)]) <= HISTORY_SAMPLES_MAX


@pytest.mark.parametrize("seed", range(5))
def test_the_lags_of_a_window_at_once_are_lag_as_of_each_commit(seed: int) -> None:
    from coordinator.lag import lag_as_of, lags_as_of

    rng = random.Random(seed)
    samples, at, end = [], 0, 0
    for _ in range(rng.randrange(1, 30)):
        at, end = at + rng.randrange(1, 1_000), end + rng.randrange(100)
        samples.append((at, end))
    commits = [(rng.randrange(end + 50), rng.randrange(-500, at + 500)) for _ in range(40)]
    times, ends = [t for t, _ in samples], [e for _, e in samples]
    assert lags_as_of(commits, times, ends) == [lag_as_of(offset, samples, t) for offset, t in commits]
