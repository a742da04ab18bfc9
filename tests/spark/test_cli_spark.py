"""`raygroups lag` and `raygroups report` computed by the test session's Spark."""

from __future__ import annotations

import argparse
import base64
import csv
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from actors.cli.tables import print_table
from spark_bridge import cli
from spark_bridge.end_offsets import EndOffsetHistory
from spark_bridge.report_plots import PLOT_FILES

from tests.spark.histories import END_OFFSETS, HISTORY, write_history

pytestmark = pytest.mark.spark
TABLES = (
    "committed_offsets", "lag", "lag_over_time", "commit_rate", "rebalance_history", "idle_groups",
    "expired_groups",
)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="raygroups")
    cli.add_parsers(parser.add_subparsers(dest="command", required=True), print_table=print_table)
    return parser.parse_args(argv)


def write_ends(path: Path) -> None:
    ends: dict[str, dict[str, int]] = {}
    for (topic, partition), end in END_OFFSETS.items():
        ends.setdefault(topic, {})[str(partition)] = end
    path.write_text(json.dumps(ends))


def test_lag_prints_the_describe_table(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_history(str(tmp_path), HISTORY)
    args = parse(["lag", "--data-dir", str(tmp_path)])

    rows = cli.lag_rows(spark, args, None)
    assert cli.print_lag(args, rows) == cli.EXIT_OK

    out, err = capsys.readouterr()  # not a terminal: plain text, one line per row
    lines = [line.split() for line in out.splitlines()]
    assert lines[:5] == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"],
        ["billing", "orders", "0", "18", "25", "7"],
        ["billing", "payments", "0", "3", "3", "0"],
        ["orders-app", "orders", "0", "25", "25", "0"],
        ["orders-app", "orders", "1", "30", "30", "0"],
    ]
    assert "highest committed offset per partition" in err, "the source is a note: stderr"

    json_args = parse(["lag", "orders-app", "--data-dir", str(tmp_path), "--json", "--end-offsets", "e.json"])
    ends = {key: end for key, end in END_OFFSETS.items() if key != ("orders", 1)}
    assert cli.print_lag(json_args, cli.lag_rows(spark, json_args, ends)) == cli.EXIT_OK
    assert json.loads(capsys.readouterr().out) == {
        "end_offsets": "file e.json",
        "partitions": [
            {"group": "orders-app", "topic": "orders", "partition": 0, "current_offset": 25,
             "log_end_offset": 40, "lag": 15},
            {"group": "orders-app", "topic": "orders", "partition": 1, "current_offset": 30,
             "log_end_offset": None, "lag": None},
        ],
    }


def test_lag_of_an_unknown_group(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_history(str(tmp_path), HISTORY)
    args = parse(["lag", "nobody", "--data-dir", str(tmp_path), "--json"])

    assert cli.print_lag(args, cli.lag_rows(spark, args, None)) == cli.EXIT_NO_GROUP
    assert "'nobody' has no committed offsets" in capsys.readouterr().err


def test_report_writes_tables_plots_and_one_page(spark: SparkSession, tmp_path: Path) -> None:
    data_dir, out = tmp_path / "data", tmp_path / "report"
    write_history(str(data_dir), HISTORY)
    write_ends(tmp_path / "ends.json")
    args = parse(["report", "--data-dir", str(data_dir), "--out", str(out), "--end-offsets",
                  str(tmp_path / "ends.json"), "--window-ms", "60000"])

    counts = cli.run_report(spark, args, END_OFFSETS)

    assert counts == {
        "committed_offsets": 4, "lag": 4, "lag_over_time": 7, "commit_rate": 6, "rebalance_history": 4,
        "idle_groups": 2, "expired_groups": 2,
    }
    for name in TABLES:
        with open(out / f"{name}.csv", newline="") as file:
            assert len(list(csv.reader(file))) == counts[name] + 1
        assert pq.read_table(out / f"{name}.parquet").num_rows == counts[name]
    with open(out / "lag.csv", newline="") as file:
        lag = list(csv.DictReader(file))
    assert [(r["group_id"], r["topic"], r["topic_partition"], r["lag"]) for r in lag] == [
        ("billing", "orders", "0", "22"), ("billing", "payments", "0", "0"),
        ("orders-app", "orders", "0", "15"), ("orders-app", "orders", "1", "0"),
    ]
    pngs = {plot: (out / plot).read_bytes() for plot in PLOT_FILES}
    assert list(pngs) == ["lag_over_time.png", "commit_rate.png", "rebalances.png"]
    assert all(png[:8] == b"\x89PNG\r\n\x1a\n" for png in pngs.values())
    assert_self_contained_page((out / "report.html").read_text(encoding="utf-8"), pngs)


def assert_self_contained_page(page: str, pngs: dict[str, bytes]) -> None:
    """Every plot embedded as a data URI, every table shown, nothing loaded from elsewhere."""
    for png in pngs.values():
        assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in page
    for name in TABLES:
        assert f'<h3 id="{name}">' in page
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", page), "the page refers to a file or URL"
    assert "<link" not in page and "<script" not in page


def test_lag_is_measured_against_the_service_registry_by_default(tmp_path: Path) -> None:
    samples = [("orders", 0, 1_000, 40), ("orders", 0, 2_000, 45)]
    asked: list[str] = []

    def service_ends(args: argparse.Namespace) -> list[tuple[str, int, int, int]]:
        asked.append(args.command)
        return samples

    parser = argparse.ArgumentParser(prog="raygroups")
    cli.add_parsers(
        parser.add_subparsers(dest="command", required=True), None, service_ends, print_table=print_table
    )
    report = parser.parse_args(["report", "--out", str(tmp_path)])
    lag = parser.parse_args(["lag"])
    offline = parser.parse_args(["lag", "--data-dir", str(tmp_path)])
    from_file = parser.parse_args(["lag", "--end-offsets", str(tmp_path / "ends.json")])
    write_ends(tmp_path / "ends.json")

    assert cli._end_offsets(report, latest_only=False) == EndOffsetHistory.of(samples)
    assert cli.end_offsets_source(report) == cli.REGISTRY_HISTORY
    assert cli._end_offsets(lag, latest_only=True) == EndOffsetHistory.of(samples)
    assert cli.end_offsets_source(lag) == cli.REGISTRY_LATEST
    # A copied directory is offline: no service is asked, the highest commits stand in.
    assert cli._end_offsets(offline, latest_only=True) is None
    assert cli.end_offsets_source(offline) == cli.FROM_COMMITS
    assert cli._end_offsets(from_file, latest_only=True) == END_OFFSETS
    assert asked == ["report", "lag"]

    samples.clear()  # a registry nobody reported to: the highest commits again, and said so
    assert cli._end_offsets(lag, latest_only=True) is None
    assert cli.end_offsets_source(lag) == cli.FROM_COMMITS
