"""The report's plots: what each one draws (pure series) and how (matplotlib, PNG bytes).

Owns `lag_over_time.png`, `commit_rate.png` and `rebalances.png`. Rules:
- The series are computed by pure functions from the report's table rows
  (dicts), so what a plot draws can be checked without drawing it: one
  series per group, points (ms since the epoch, value), sorted by time.
- A window's point is drawn at the window's end: the lag of a window is
  measured as of its end, and a rate covers the window up to its end.
- Commit rates are 0 in the windows of the span where a group committed
  nothing (from its first commit on), so a group that stops shows a drop,
  not a line interpolated over the gap. They are drawn averaged over the
  last `rate_range_ms` (as Prometheus' `rate(x[range])`): commits come in
  bursts, one per poll, and a window shorter than the poll interval would
  draw a saw. A group's generation holds from one rebalance to the next
  and to the end of the span.
- The rebalances plot draws classic generations and consumer group epochs
  (KIP-848) alike, from the rebalance history's rows of both types: a group
  converted between the types is one line, and each step carries a marker
  of its type (a dot for a classic generation, a diamond for a consumer
  group epoch).
- Axes cover the data's span only (a datetime axis with concise ticks, in
  UTC); legends sit outside the axes so they never cover a curve.
- matplotlib's object API on the Agg canvas: no pyplot state, no display.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spark_bridge.rows import CONSUMER_GROUP_TYPE
from spark_bridge.time_windows import describe_window

Series = dict[str, list[tuple[int, float]]]
PLOT_FILES = ("lag_over_time.png", "commit_rate.png", "rebalances.png")
_FIGSIZE_IN = (11.0, 5.0)
_DPI = 110
# A rate is averaged over at least this, and over at least 1/_RATE_RANGES_PER_SPAN of the span.
MIN_RATE_RANGE_MS = 1_000
_RATE_RANGES_PER_SPAN = 30


@dataclass(frozen=True, slots=True)
class Span:
    """The data's time span, ms since the epoch, and the window size of the over-time tables."""

    first_ms: int
    last_ms: int
    window_ms: int

    @property
    def last_window_start_ms(self) -> int:
        return self.last_ms - self.last_ms % self.window_ms

    @property
    def rate_range_ms(self) -> int:
        """What a drawn rate is averaged over: a whole number of windows."""
        wanted = max(MIN_RATE_RANGE_MS, (self.last_ms - self.first_ms) // _RATE_RANGES_PER_SPAN)
        return -(-wanted // self.window_ms) * self.window_ms


def lag_series(rows: Iterable[Mapping[str, Any]], groups: Sequence[str], window_ms: int) -> Series:
    """Per group: (window end, lag) from `lag_over_time` rows."""
    series: Series = {group: [] for group in groups}
    for row in rows:
        if row["group_id"] in series and row["lag"] is not None:
            series[row["group_id"]].append((row["window_start_ms"] + window_ms, row["lag"]))
    return {group: sorted(points) for group, points in series.items() if points}


def rate_series(rows: Iterable[Mapping[str, Any]], groups: Sequence[str], span: Span) -> Series:
    """Per group: (window end, offset commits per second over the last `span.rate_range_ms`)
    from `commit_rate` rows, 0 in windows without commits."""
    rates: dict[str, dict[int, float]] = {group: {} for group in groups}
    for row in rows:
        if row["group_id"] in rates:
            rates[row["group_id"]][row["window_start_ms"]] = row["commits_per_second"]
    series: Series = {}
    for group, by_window in rates.items():
        if not by_window:
            continue
        starts = range(min(by_window), span.last_window_start_ms + 1, span.window_ms)
        series[group] = _moving_average(
            [(start + span.window_ms, by_window.get(start, 0.0)) for start in starts],
            span.rate_range_ms // span.window_ms,
        )
    return series


def _moving_average(points: list[tuple[int, float]], width: int) -> list[tuple[int, float]]:
    """Each point's value averaged with the `width - 1` before it; before the first point the
    group committed nothing, so the first ones count zeros (a ramp, as `rate()` draws one)."""
    averaged, total = [], 0.0
    for index, (at_ms, value) in enumerate(points):
        total += value - (points[index - width][1] if index >= width else 0.0)
        averaged.append((at_ms, total / width))
    return averaged


def generation_series(rows: Iterable[Mapping[str, Any]], groups: Sequence[str], span: Span) -> Series:
    """Per group: (time, generation) at each generation change, held to the end of the span.

    A consumer group's rows give its group epochs; a converted group's rows of both types make
    one series."""
    series: Series = {group: [] for group in groups}
    for row in rows:
        if row["group_id"] in series:
            series[row["group_id"]].append((row["timestamp_ms"], row["generation"]))
    held: Series = {}
    for group, points in series.items():
        if points:
            points.sort()
            end = max(span.last_ms, points[-1][0])
            held[group] = [*points, (end, points[-1][1])] if end > points[-1][0] else points
    return held


def consumer_epoch_points(rows: Iterable[Mapping[str, Any]], groups: Sequence[str]) -> Series:
    """Per group: the (time, epoch) points of `generation_series` that are consumer group epochs."""
    points: Series = {}
    for row in rows:
        if row["group_id"] in groups and row.get("group_type") == CONSUMER_GROUP_TYPE:
            points.setdefault(row["group_id"], []).append((row["timestamp_ms"], row["generation"]))
    return {group: sorted(found) for group, found in points.items()}


def draw_lag(series: Series, span: Span, source: str) -> bytes:
    return _draw(
        series, span, f"Consumer lag per group, as of each {describe_window(span.window_ms)} window's end",
        "lag (messages)", f"lag against the {source}",
    )


def draw_commit_rate(series: Series, span: Span) -> bytes:
    return _draw(
        series, span,
        f"Offset commits per group, per second over the last {describe_window(span.rate_range_ms)}",
        "offset commits / s", "one offset commit per partition committed",
    )


def draw_rebalances(series: Series, span: Span, consumer_epochs: Series | None = None) -> bytes:
    """`consumer_epochs` (`consumer_epoch_points`): the points drawn as consumer group epochs."""
    return _draw(
        series, span,
        "Rebalances per group: the generation (classic) or group epoch (consumer), a step per rebalance",
        "generation / group epoch",
        "markers: dot = classic generation, diamond = consumer group epoch",
        steps=True, diamonds=consumer_epochs or {},
    )


def _draw(
    series: Series, span: Span, title: str, ylabel: str, note: str, steps: bool = False,
    diamonds: Series | None = None,
) -> bytes:
    from matplotlib.dates import MINUTELY, SECONDLY, AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=_FIGSIZE_IN, dpi=_DPI, layout="constrained")
    axes = figure.add_subplot()
    for group, points in series.items():
        times = [_utc(ms) for ms, _ in points]
        values = [value for _, value in points]
        if steps:
            line = axes.step(times, values, where="post", label=group)[0]  # type: ignore[arg-type]
            _step_markers(axes, points[:-1], set((diamonds or {}).get(group, ())), line.get_color())
        else:
            axes.plot(times, values, marker="." if len(points) <= 60 else None, label=group)  # type: ignore[arg-type]
    locator = AutoDateLocator(minticks=5, maxticks=12)  # type: ignore[no-untyped-call]
    # matplotlib steps from 1 to 5 s (and min): a 12-second demo would get two ticks.
    for unit in (SECONDLY, MINUTELY):
        locator.intervald[unit] = [1, 2, 5, 10, 15, 30]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    axes.set_xlim(_utc(span.first_ms), _utc(max(span.last_ms, span.last_window_start_ms + span.window_ms)))  # type: ignore[arg-type]
    axes.set_ylim(bottom=0)
    if steps:
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title(title)
    axes.set_xlabel(f"time (UTC); {note}")
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    if series:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", title="group")
    else:
        axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _step_markers(axes: Any, points: Sequence[tuple[int, float]], diamonds: set[tuple[int, float]],
                  color: Any) -> None:
    """A dot at each point, a diamond at each of `diamonds`."""
    for marker, size, chosen in (("o", 4, False), ("D", 5, True)):
        shown = [(_utc(ms), value) for ms, value in points if ((ms, value) in diamonds) is chosen]
        if shown:
            axes.plot([t for t, _ in shown], [v for _, v in shown], marker, color=color, markersize=size)


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def utc_text(ms: int) -> str:
    """`2026-11-22 10:15:03 UTC`: a time for titles and pages."""
    return _utc(ms).strftime("%Y-%m-%d %H:%M:%S UTC")
