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


def test_pyarrow_is_hidden_only_while_connecting_and_only_when_not_imported_yet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`lag --live` keeps Ray's first serialization context from importing pyarrow (and
    numpy) for answers of plain tuples; afterwards pyarrow imports as before."""
    import sys

    arrow = sys.modules.get("pyarrow")
    monkeypatch.delitem(sys.modules, "pyarrow", raising=False)
    with live_lag.without_arrow():
        with pytest.raises(ModuleNotFoundError):
            import pyarrow  # noqa: F401
    assert "pyarrow" not in sys.modules, "visible again: the next import finds it"
    if arrow is not None:
        monkeypatch.setitem(sys.modules, "pyarrow", arrow)
        with live_lag.without_arrow():
            assert sys.modules["pyarrow"] is arrow, "already imported: left alone"


def test_only_the_program_ends_at_once_after_a_one_shot_question(monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.cli import main as cli_main

    ended: list[int] = []
    monkeypatch.setattr(cli_main, "exit_at_once", ended.append)
    parser, command_line = cli_main.build_command_line()
    # `lag --live` answered (service_live_lag marks the question one-shot), no service needed.
    command_line.runners["lag"] = lambda args: setattr(args, "exit_at_once", True) or 0
    monkeypatch.setattr(cli_main, "build_command_line", lambda: (parser, command_line))
    assert cli_main.main(["lag", "--live"]) == 0 and ended == [], "a caller of main keeps its process"
    monkeypatch.setattr("sys.argv", ["raygroups", "lag", "--live"])
    assert cli_main.main() == 0 and ended == [0], "the program itself ends at once"
