"""`raygroups lag --live`'s rows straight from the leaders' plain rows (actors/cli/live_lag.py
LiveRows): the same dicts as through `GroupLag`s, and the same JSON as `raygroups lag --json`
writes for them, though written column by column."""

from __future__ import annotations

import json

import pytest

from actors.cli import live_lag
from actors.cli.live_lag import LiveRows, lag_rows
from coordinator.lag import Health
from coordinator.lag_query import AHEAD, AT_LEAST, GroupRow, PartitionRow, rows_to_groups
from spark_bridge import cli

PARTITIONS: list[PartitionRow] = [
    ("a", "orders", 0, 40, 100, 60, 1_500, 0, int(Health.WARN)),
    ("a", "orders", 1, 50, 50, 0, 0, 0, int(Health.OK)),
    ("a", 'qu"o\u00e9te', 0, 9, 10, 1, 250, AT_LEAST, int(Health.STOPPED)),
    ("b\\n", "gone", 0, 7, None, None, None, 0, int(Health.OK)),
    ("c", "orders", 3, 70, 60, 0, 0, AHEAD, int(Health.REWIND)),
]
GROUPS: list[GroupRow] = [("a", 61, 1_500, 1), ("b\\n", None, None, 0), ("c", 0, 0, 2)]


def test_the_rows_are_the_group_lags_rows() -> None:
    assert list(LiveRows(PARTITIONS)) == lag_rows(rows_to_groups(GROUPS, PARTITIONS))
    assert LiveRows(PARTITIONS)[1:3] == lag_rows(rows_to_groups(GROUPS, PARTITIONS))[1:3]
    assert LiveRows(PARTITIONS).group_ids() == {"a", "b\\n", "c"}


def test_the_json_is_the_dicts_json() -> None:
    live = LiveRows(PARTITIONS)
    written = live.json_partitions()
    assert json.loads(written) == [cli._lag_json(row, live=True) for row in live]
    assert len(written.splitlines()) == len(PARTITIONS) + 2, "one row a line"
    assert json.loads(LiveRows([]).json_partitions()) == []


def test_the_json_of_more_rows_than_a_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_lag, "_CHUNK_ROWS", 2)
    for rows in (PARTITIONS, PARTITIONS[:4], PARTITIONS[:1]):  # chunks and a rest, chunks only, a rest only
        live = LiveRows(rows)
        assert json.loads(live.json_partitions()) == [cli._lag_json(row, live=True) for row in live]
