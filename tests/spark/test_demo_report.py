"""`raygroups demo` end to end, in a process of its own: the report it writes and how it ends.

The demo's producers report end offsets to the topic registry while its
consumers commit; the report reads the log through the service and measures
lag against those recorded end offsets. Checked: each plot's series (computed
from the tables the plots are drawn from, by the plots' own functions) has
more than one point, the PNGs and the self-contained page exist, and the
demo ends with the describe lag table and the page's path, no value cut.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from spark_bridge import report_plots
from spark_bridge.report_plots import Span

from tests.spark.test_cli_spark import assert_self_contained_page

pytestmark = [pytest.mark.spark, pytest.mark.ray, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
LAG_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
              "HOST", "CLIENT-ID"]


def rows(report: Path, table: str) -> list[dict[str, Any]]:
    return pq.read_table(report / f"{table}.parquet").to_pylist()  # type: ignore[no-any-return]


def span_of(report: Path) -> Span:
    """The report's span and window, from its tables: the windows' spacing and their extent."""
    starts = sorted({row["window_start_ms"] for row in rows(report, "lag_over_time")})
    window_ms = min(b - a for a, b in zip(starts, starts[1:]))
    rebalances = [row["timestamp_ms"] for row in rows(report, "rebalance_history")]
    return Span(min([*starts, *rebalances]), starts[-1] + window_ms - 1, window_ms)


def test_demo_reports_lag_against_recorded_end_offsets_and_ends_with_describe(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli.main", "demo", "--data-dir", str(data_dir), "--seconds", "6"],
        cwd=ROOT, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    report = data_dir / "report"
    page = report / "report.html"
    # The README's main job: groups survive a killed consumer and a killed partition leader.
    assert "groups recovered" in out and "is back at epoch 2, state ACTIVE" in out
    # Notes that are not the command's result go to stderr (the tables stay parseable).
    assert "lag measured against the end offsets the topic registry recorded" in done.stderr

    # It ends with describe's lag table, then the page; piped output is plain text, nothing cut.
    lines = out.rstrip("\n").splitlines()
    assert lines[-1] == f"report page (tables and plots): {page}"
    header = max(i for i, line in enumerate(lines) if line.split() == LAG_HEADER)
    table = [line.split() for line in lines[header + 1:-1]]
    assert {row[0] for row in table} == {"orders-app", "billing", "audit"} and len(table) == 16
    assert all(int(row[4]) - int(row[3]) == int(row[5]) for row in table)
    assert "…" not in out

    span = span_of(report)
    groups = ["orders-app", "billing", "audit"]
    series = {
        "lag": report_plots.lag_series(rows(report, "lag_over_time"), groups, span.window_ms),
        "commit rate": report_plots.rate_series(rows(report, "commit_rate"), groups, span),
        "rebalances": report_plots.generation_series(rows(report, "rebalance_history"), groups, span),
    }
    for plot, by_group in series.items():
        assert sorted(by_group) == sorted(groups), plot
        assert all(len(points) > 1 for points in by_group.values()), (plot, by_group)
    # The audit group reads in small batches and falls behind: its lag grows as the ends move on.
    audit = [lag for _, lag in series["lag"]["audit"]]
    assert audit[-1] > audit[0]

    pngs = {name: (report / name).read_bytes() for name in report_plots.PLOT_FILES}
    assert_self_contained_page(page.read_text(encoding="utf-8"), pngs)
