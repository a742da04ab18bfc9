"""The analytics report: every job's table as CSV and Parquet, plus PNG plots.

Owns the files of `raygroups report --out DIR`. Rules:
- Tables are computed by Spark and written by the driver, one `<name>.csv`
  and one `<name>.parquet` per table, so the files land where the command
  runs (executors may be on other machines). The results are aggregates
  (per group and partition, or per group and window), small enough to
  collect, and are sorted on the driver: a Spark sort costs one more job.
- The over-time tables use one window size: the caller's, or the one
  `time_windows.choose_window_ms` picks from the data's span (so a
  30-second run and a week of history both give curves of many points).
- Plots (`report_plots`): `lag_over_time.png`, `commit_rate.png` and
  `rebalances.png` (classic generations and consumer group epochs), one
  line per group for the `top_groups` groups with the most lag (then the
  most commits); the tables hold every group.
- `report.html` (`report_html`) shows every table and plot on one
  self-contained page.
- Nothing here reads the clock: `now_ms` comes from the caller.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from spark_bridge import jobs, report_plots
from spark_bridge.end_offsets import EndOffsets
from spark_bridge.report_html import render_page
from spark_bridge.report_plots import Span
from spark_bridge.time_windows import choose_window_ms, describe_window

DEFAULT_TOP_GROUPS = 10
PAGE_FILE = "report.html"
# Kafka's offsets.retention.minutes default (7 days): a group idle that long loses its offsets.
DEFAULT_IDLE_THRESHOLD_MS = 7 * 24 * 3600 * 1000
_ARROW_TYPES = {
    "int": pa.int32(), "bigint": pa.int64(), "string": pa.string(), "boolean": pa.bool_(),
    "double": pa.float64(),
}
_ORDER = {
    "committed_offsets": ["group_id", "topic", "topic_partition"],
    "lag": ["group_id", "topic", "topic_partition"],
    "lag_over_time": ["group_id", "window_start_ms"],
    "commit_rate": ["group_id", "window_start_ms"],
    "rebalance_history": ["group_id", "log_partition", "log_offset"],
    "idle_groups": ["group_id"],
    "expired_groups": ["group_id"],
}


class Table(NamedTuple):
    """A collected result: column names, rows and Spark type names."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    types: list[str]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


@dataclass(frozen=True, slots=True)
class ReportSettings:
    now_ms: int
    window_ms: int = jobs.DEFAULT_WINDOW_MS
    idle_threshold_ms: int = DEFAULT_IDLE_THRESHOLD_MS
    top_groups: int = DEFAULT_TOP_GROUPS
    # Where lag is measured to, said in the plot and on the page.
    end_offsets_source: str = "end offsets supplied"


def data_window(
    log_df: DataFrame, end_offsets: EndOffsets | None, window_ms: int | None
) -> tuple[int, tuple[int, int] | None]:
    """The window size (`window_ms`, or chosen from the data's span) and that span (None: no commits)."""
    span = jobs.data_span(log_df, end_offsets)
    if window_ms is not None:
        return window_ms, span
    return (jobs.DEFAULT_WINDOW_MS if span is None else choose_window_ms(*span)), span


def build_tables(
    log_df: DataFrame, end_offsets: EndOffsets | None, settings: ReportSettings
) -> dict[str, DataFrame]:
    """Every report table, by file name."""
    tables = {
        "committed_offsets": jobs.committed_offsets(log_df),
        "lag": jobs.consumer_lag(log_df, end_offsets),
        "lag_over_time": jobs.lag_over_time(log_df, end_offsets, settings.window_ms),
        "commit_rate": jobs.commit_rate(log_df, settings.window_ms),
        "rebalance_history": jobs.rebalance_history(log_df),
        "idle_groups": jobs.idle_groups(log_df, settings.now_ms, settings.idle_threshold_ms),
        "expired_groups": jobs.expired_groups(log_df),
    }
    return tables


def write_report(
    tables: dict[str, DataFrame], out_dir: str, settings: ReportSettings, span: tuple[int, int] | None,
    on_step: Callable[[str], None] = lambda _text: None,
) -> dict[str, int]:
    """Write every table (CSV + Parquet), the plots and the page; returns rows per table.
    `on_step` is told what is being done (progress)."""
    os.makedirs(out_dir, exist_ok=True)
    # Spark runs jobs from several driver threads at once: the small jobs' planning and scheduling overlap.
    with ThreadPoolExecutor(max_workers=len(tables) or 1) as pool:
        futures = {pool.submit(collect_table, frame, _ORDER.get(name, ())): name
                   for name, frame in tables.items()}
        on_step(f"computing {len(tables)} tables")
        collected = {}
        for done, future in enumerate(as_completed(futures), 1):
            collected[futures[future]] = future.result()
            on_step(f"computed {done}/{len(tables)} tables ({futures[future]})")
    collected = {name: collected[name] for name in tables}
    on_step("writing tables, plots and report.html")
    for name, table in collected.items():
        write_csv(os.path.join(out_dir, f"{name}.csv"), table)
        write_parquet(os.path.join(out_dir, f"{name}.parquet"), table)
    first_ms, last_ms = span or (settings.now_ms, settings.now_ms)
    plots = draw_plots(collected, Span(first_ms, last_ms, settings.window_ms), settings)
    for name, png in plots.items():
        with open(os.path.join(out_dir, name), "wb") as file:
            file.write(png)
    facts = [
        ("data", f"{report_plots.utc_text(first_ms)} to {report_plots.utc_text(last_ms)}"
                 if span else "no offset commits in the log"),
        ("time windows", describe_window(settings.window_ms)),
        ("lag measured against", settings.end_offsets_source),
        ("files", f"every table as CSV and Parquet next to this page, in {os.path.abspath(out_dir)}"),
    ]
    page = render_page({n: (t.columns, t.rows) for n, t in collected.items()}, plots, facts, settings.now_ms)
    with open(os.path.join(out_dir, PAGE_FILE), "w", encoding="utf-8") as file:
        file.write(page)
    return {name: len(table.rows) for name, table in collected.items()}


def draw_plots(collected: dict[str, Table], span: Span, settings: ReportSettings) -> dict[str, bytes]:
    """The PNG of each plot, by file name (report_plots.PLOT_FILES)."""
    lag_rows = collected["lag_over_time"].dicts()
    rate_rows = collected["commit_rate"].dicts()
    groups = top_groups_by(collected["lag"].dicts(), rate_rows, settings.top_groups)
    lag = report_plots.lag_series(lag_rows, groups, span.window_ms)
    rates = report_plots.rate_series(rate_rows, groups, span)
    rebalances = collected["rebalance_history"].dicts()
    generations = report_plots.generation_series(rebalances, groups, span)
    consumer_epochs = report_plots.consumer_epoch_points(rebalances, groups)
    return dict(zip(report_plots.PLOT_FILES, (
        report_plots.draw_lag(lag, span, settings.end_offsets_source),
        report_plots.draw_commit_rate(rates, span),
        report_plots.draw_rebalances(generations, span, consumer_epochs),
    )))


def collect_table(frame: DataFrame, order: Sequence[str] = ()) -> Table:
    """The rows of `frame`, sorted by the `order` columns (non-null keys) on the driver."""
    types = [field.dataType.simpleString() for field in frame.schema.fields]
    positions = [frame.columns.index(name) for name in order]
    rows = sorted((tuple(row) for row in frame.collect()), key=lambda row: [row[i] for i in positions])
    return Table(frame.columns, rows, types)


def write_csv(path: str, table: Table) -> None:
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(table.columns)
        writer.writerows(table.rows)


def write_parquet(path: str, table: Table) -> None:
    fields = [(name, _ARROW_TYPES.get(kind, pa.string())) for name, kind in zip(table.columns, table.types)]
    schema = pa.schema(fields)
    data = {name: [row[i] for row in table.rows] for i, name in enumerate(table.columns)}
    pq.write_table(pa.Table.from_pydict(data, schema=schema), path)


def top_groups_by(lag_rows: list[dict[str, Any]], rate_rows: list[dict[str, Any]], limit: int) -> list[str]:
    """The `limit` groups with the most total lag, ties broken by commits, then by name."""
    lag: dict[str, int] = {}
    for row in lag_rows:
        lag[row["group_id"]] = lag.get(row["group_id"], 0) + (row["lag"] or 0)
    commits: dict[str, int] = {}
    for row in rate_rows:
        commits[row["group_id"]] = commits.get(row["group_id"], 0) + row["offset_commits"]
    groups = set(lag) | set(commits)
    return sorted(groups, key=lambda g: (-lag.get(g, 0), -commits.get(g, 0), g))[:limit]
