"""`raygroups lag --live`'s rows straight from the leaders' answers (actors/cli/live_lag.py):
the plain rows (LiveRows) as the same dicts as through `GroupLag`s, and the leaders' JSON text
(LiveJson) the same JSON as `raygroups lag --json` writes for those rows."""

from __future__ import annotations

import pytest

from actors.cli import live_lag
from actors.cli.live_lag import LiveJson, LiveRows, lag_rows
from coordinator.lag import Health, LagTracker
from coordinator.lag_json import json_lines
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


NOW = 12_500


def tracker_texts() -> tuple[LagTracker, list[tuple[str, str]]]:
    """A tracker with PARTITIONS' kinds of rows (escaped names, no end, ahead, WARN,
    REWIND, STOPPED) and the leader's texts of its groups (coordinator/lag_json.py)."""
    tracker = LagTracker(window_ms=10_000)
    tracker.on_end(("orders", 0), 100, 0)
    tracker.on_end(('qu"o\u00e9te', 0), 10, 0)
    tracker.on_end(("orders", 3), 60, 0)
    for at, offset in ((10_000, 10), (11_000, 20), (12_000, 30)):
        tracker.on_end(("orders", 0), 100 + 30 * at // 1_000, at)
        tracker.on_commit("a", ("orders", 0), offset, at)  # falling behind: WARN
    tracker.on_commit("a", ('qu"o\u00e9te', 0), 9, 0)  # no commit for a window: STOPPED
    tracker.on_commit("b\\n", ("gone", 0), 7, 0)
    tracker.on_commit("c", ("orders", 3), 80, 11_000)
    tracker.on_commit("c", ("orders", 3), 70, 12_000)  # ahead of the end, and back: REWIND
    return tracker, list(json_lines(tracker, sorted(tracker.committed), NOW))


def test_the_leaders_json_is_what_raygroups_lag_json_writes_for_the_same_rows() -> None:
    tracker, texts = tracker_texts()
    rows = lag_rows(tracker.group_lag(g, NOW) for g, _ in texts)  # type: ignore[misc]
    assert {row["health"] for row in rows} >= {"WARN", "REWIND", "STOPPED"} and any(r["ahead"] for r in rows)
    live = LiveJson(texts)
    assert live.json_partitions() == cli._json_lines([cli._lag_json(row, live=True) for row in rows])
    assert len(live) == len(rows) == len(live.json_partitions().splitlines()) - 2, "one row a line"
    assert list(live) == rows and live[1] == rows[1], "read back, the same dicts"
    assert live.group_ids() == {"a", "b\\n", "c"}
    assert LiveJson([]).json_partitions() == "[]" == cli._json_lines([])


def test_the_json_of_a_million_rows_interleaves_the_leaders_groups_in_order() -> None:
    """What `Client.lag_json_async` does with the leaders' answers: their groups in order."""
    tracker, texts = tracker_texts()
    shuffled = [texts[2], texts[0], texts[1]]
    assert LiveJson(sorted(shuffled)).json_partitions() == LiveJson(texts).json_partitions()


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
