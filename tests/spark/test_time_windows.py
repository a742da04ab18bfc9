"""Window sizes chosen from the span of the data (pure, no Spark)."""

from __future__ import annotations

import pytest

from spark_bridge.time_windows import (
    DAY_MS,
    HOUR_MS,
    ROUND_WINDOWS_MS,
    SECOND_MS,
    choose_window_ms,
    describe_window,
    windows_in,
)

T0 = 1_700_000_000_000


def test_a_30_second_demo_gets_sub_second_windows_and_many_points() -> None:
    window_ms = choose_window_ms(T0, T0 + 30 * SECOND_MS)

    assert window_ms == 200
    assert 50 <= windows_in(T0, T0 + 30 * SECOND_MS, window_ms) <= 200


def test_a_week_gets_hourly_windows() -> None:
    week_ms = 7 * DAY_MS

    assert choose_window_ms(T0, T0 + week_ms) == HOUR_MS


@pytest.mark.parametrize("span_ms", [0, 1, 999, 8_000, 3_600_000, 90 * DAY_MS, 1_000 * DAY_MS])
def test_the_choice_is_the_smallest_round_window_within_the_limit(span_ms: int) -> None:
    window_ms = choose_window_ms(T0, T0 + span_ms, max_points=120)

    assert windows_in(T0, T0 + span_ms, window_ms) <= 120
    smaller = [w for w in ROUND_WINDOWS_MS if w < window_ms]
    assert all(windows_in(T0, T0 + span_ms, w) > 120 for w in smaller)
    if window_ms > DAY_MS:
        assert window_ms % DAY_MS == 0 and windows_in(T0, T0 + span_ms, window_ms - DAY_MS) > 120


def test_a_span_that_ends_before_it_starts_is_refused() -> None:
    with pytest.raises(ValueError, match="ends before"):
        choose_window_ms(T0, T0 - 1)


def test_window_sizes_read_naturally() -> None:
    assert [describe_window(w) for w in (200, 1_500, 30 * SECOND_MS, HOUR_MS, 2 * DAY_MS)] == [
        "200 ms", "1500 ms", "30 s", "1 h", "2 d",
    ]
