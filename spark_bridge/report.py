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

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from spark_bridge import jobs, report_plots
from spark_bridge.end_offsets import EndOffsets
from spark_bridge.report_html import MAX_ROWS_SHOWN, render_page
from spark_bridge.report_plots import Span
from spark_bridge.time_windows import choose_window_ms, describe_window

DEFAULT_TOP_GROUPS = 10
PAGE_FILE = "report.html"
# Kafka's offsets.retention.minutes default (7 days): a group idle that long loses its offsets.
DEFAULT_IDLE_THRESHOLD_MS = 7 * 24 * 3600 * 1000
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
    """A collected result, as Arrow: nothing per row in Python until a row is looked at."""

    data: pa.Table

    @property
    def columns(self) -> list[str]:
        return list(self.data.column_names)

    @property
    def num_rows(self) -> int:
        return int(self.data.num_rows)

    def rows(self, limit: int | None = None) -> list[tuple[Any, ...]]:
        """The first `limit` rows (all: None) as tuples."""
        data = self.data if limit is None else self.data.slice(0, limit)
        return list(zip(*(column.to_pylist() for column in data.columns)))

    def dicts(self, groups: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The rows as dicts; only those of `groups` if given (the plots' few groups of many)."""
        data = self.data
        if groups is not None:
            data = data.filter(pc.is_in(data["group_id"], pa.array(list(groups), pa.string())))
        return list(data.to_pylist())


@dataclass(frozen=True, slots=True)
class ReportSettings:
    now_ms: int
    window_ms: int = jobs.DEFAULT_WINDOW_MS
    idle_threshold_ms: int = DEFAULT_IDLE_THRESHOLD_MS
    top_groups: int = DEFAULT_TOP_GROUPS
    # Where lag is measured to, said in the plot and on the page.
    end_offsets_source: str = "end offsets supplied"


def data_window(
    log_df: jobs.LogInput, end_offsets: EndOffsets | None, window_ms: int | None
) -> tuple[int, tuple[int, int] | None]:
    """The window size (`window_ms`, or chosen from the data's span) and that span (None: no commits)."""
    span = jobs.data_span(log_df, end_offsets)
    if window_ms is not None:
        return window_ms, span
    return (jobs.DEFAULT_WINDOW_MS if span is None else choose_window_ms(*span)), span


def build_tables(
    log_df: jobs.LogInput, end_offsets: EndOffsets | None, settings: ReportSettings
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
    # Spark runs jobs from several driver threads at once: the small jobs' planning and scheduling
    # overlap; each table is written while Spark computes the others.
    with ThreadPoolExecutor(max_workers=len(tables) or 1) as pool:
        futures = {pool.submit(collect_table, frame, _ORDER.get(name, ())): name
                   for name, frame in tables.items()}
        on_step(f"computing {len(tables)} tables")
        collected = {}
        for done, future in enumerate(as_completed(futures), 1):
            name = futures[future]
            table = collected[name] = future.result()
            write_csv(os.path.join(out_dir, f"{name}.csv"), table)
            write_parquet(os.path.join(out_dir, f"{name}.parquet"), table)
            on_step(f"computed and wrote {done}/{len(tables)} tables ({name})")
    collected = {name: collected[name] for name in tables}
    on_step("drawing plots, writing report.html")
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
    page = render_page(
        {n: (t.columns, t.rows(MAX_ROWS_SHOWN), t.num_rows) for n, t in collected.items()}, plots, facts,
        settings.now_ms,
    )
    with open(os.path.join(out_dir, PAGE_FILE), "w", encoding="utf-8") as file:
        file.write(page)
    return {name: table.num_rows for name, table in collected.items()}


def draw_plots(collected: dict[str, Table], span: Span, settings: ReportSettings) -> dict[str, bytes]:
    """The PNG of each plot, by file name (report_plots.PLOT_FILES)."""
    groups = top_groups(collected["lag"], collected["commit_rate"], settings.top_groups)
    lag = report_plots.lag_series(collected["lag_over_time"].dicts(groups), groups, span.window_ms)
    rates = report_plots.rate_series(collected["commit_rate"].dicts(groups), groups, span)
    rebalances = collected["rebalance_history"].dicts(groups)
    generations = report_plots.generation_series(rebalances, groups, span)
    consumer_epochs = report_plots.consumer_epoch_points(rebalances, groups)
    return dict(zip(report_plots.PLOT_FILES, (
        report_plots.draw_lag(lag, span, settings.end_offsets_source),
        report_plots.draw_commit_rate(rates, span),
        report_plots.draw_rebalances(generations, span, consumer_epochs),
    )))


def collect_table(frame: DataFrame, order: Sequence[str] = ()) -> Table:
    """The rows of `frame` as Arrow (Spark's Arrow collect: no pickled row), sorted by the
    `order` columns on the driver."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(frame.schema)
    # toPandas' own Arrow collect (PySpark 3.5 is pinned; Spark 4 names it DataFrame.toArrow).
    data = pa.Table.from_batches(frame._collect_as_arrow(), schema=schema)
    if order:
        data = data.sort_by([(name, "ascending") for name in order])
    return Table(data)


def write_csv(path: str, table: Table) -> None:
    pa_csv.write_csv(table.data, path, pa_csv.WriteOptions(quoting_style="needed"))


def write_parquet(path: str, table: Table) -> None:
    pq.write_table(table.data, path)


def top_groups(lag: Table, rates: Table, limit: int) -> list[str]:
    """`top_groups_by` over each group's sums, summed by Arrow (the tables have a row per
    group and partition, or per group and window)."""
    return top_groups_by(_group_sums(lag, "lag"), _group_sums(rates, "offset_commits"), limit)


def _group_sums(table: Table, column: str) -> list[dict[str, Any]]:
    sums = table.data.group_by("group_id").aggregate([(column, "sum")])
    return list(sums.rename_columns({f"{column}_sum": column}).to_pylist())


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
