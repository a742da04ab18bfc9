"""Time windows of the analytics, chosen from the span of the data.

Owns the choice of `window_ms` when the user gives none. Rules:
- Windows are round sizes (`ROUND_WINDOWS_MS`: 100 ms .. 1 day), so axes
  and tables read naturally; the smallest one that cuts the span into at
  most `max_points` windows wins. With the default 200: a 30-second demo
  gets 200 ms windows (150 points), an hour gets 30 s windows, a week
  gets hourly ones (168 points).
- A span longer than `max_points` days gets whole days, beyond the list.
- Pure: no Spark, no clock; the span comes from the caller.
"""

from __future__ import annotations

SECOND_MS = 1_000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
ROUND_WINDOWS_MS = (
    100, 200, 500,
    SECOND_MS, 2 * SECOND_MS, 5 * SECOND_MS, 10 * SECOND_MS, 15 * SECOND_MS, 30 * SECOND_MS,
    MINUTE_MS, 2 * MINUTE_MS, 5 * MINUTE_MS, 10 * MINUTE_MS, 15 * MINUTE_MS, 30 * MINUTE_MS,
    HOUR_MS, 2 * HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS, DAY_MS,
)
DEFAULT_MAX_POINTS = 200


def windows_in(first_ms: int, last_ms: int, window_ms: int) -> int:
    """How many epoch-aligned windows of `window_ms` the times first..last touch."""
    return (last_ms // window_ms) - (first_ms // window_ms) + 1


def choose_window_ms(first_ms: int, last_ms: int, max_points: int = DEFAULT_MAX_POINTS) -> int:
    """The smallest round window that gives at most `max_points` windows over first..last."""
    if last_ms < first_ms:
        raise ValueError(f"the span ends before it starts: {first_ms} .. {last_ms}")
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points}")
    for window_ms in ROUND_WINDOWS_MS:
        if windows_in(first_ms, last_ms, window_ms) <= max_points:
            return window_ms
    days = -(-(last_ms - first_ms + 1) // (DAY_MS * max_points))
    # One day more than the plain quotient may be needed: the span's ends fall mid-window.
    while windows_in(first_ms, last_ms, days * DAY_MS) > max_points:
        days += 1
    return days * DAY_MS


def describe_window(window_ms: int) -> str:
    """`200 ms`, `30 s`, `1 h`, `2 d`: the window size for titles and labels."""
    for unit_ms, unit in ((DAY_MS, "d"), (HOUR_MS, "h"), (MINUTE_MS, "min"), (SECOND_MS, "s")):
        if window_ms >= unit_ms and window_ms % unit_ms == 0:
            return f"{window_ms // unit_ms} {unit}"
    return f"{window_ms} ms"
