"""Benchmark output follows the CLI's rules (bench/table.py, actors/cli/tables.py): piped,
every table is plain text at full width, whatever COLUMNS says, never cut; and Ray's
messages to the driver go to a log file, not among the figures (bench/driver_log.py).
No Ray: the tables are rendered from rows, Ray's printing thread is stood in for."""

from __future__ import annotations

import io
import os
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console

from actors.cli import tables
from bench import table
from bench.driver_log import log_file
from bench.table import Row

# Wider than any terminal, with long words a terminal table would fold or cut.
WIDE_ROWS = [
    Row(
        "failover, 100,000 groups, 1,000,000 records: commits served again after the crash",
        341.25,
        "ms",
        0.84,
        "target < 1 s; ratio: x the smaller state; replica_reassign_delay_s=2.0",
    ),
    Row(
        "  catch-up of the new replica",
        321_887.0,
        "records/s",
        0.41,
        "50,955 records; 0.91 s from the move to in the ISR (actor start included)",
    ),
    Row("commits, replication factor 1", 9_095.0, "commits/s", None, ""),
    Row("OffsetFetch/s, reads unconfirmed", 12_282.0, "fetches/s", 1.0, "x" * 150),
]
TITLE = "replication on a simulated cluster, 2 cores, 2026-11-25"


def pipe_console() -> Console:
    """The console bench prints to when stdout is a pipe: not a terminal."""
    return Console(file=io.StringIO())


def assert_whole(text: str, rows: list[list[str]]) -> None:
    """Every row on a line of its own with every cell whole, and no ellipsis anywhere."""
    assert "…" not in text
    lines = text.splitlines()
    for cells in rows:
        matching = [line for line in lines if line.startswith(cells[0])]
        assert len(matching) == 1, (cells[0], text)
        for cell in cells:
            assert (cell or tables.MISSING) in matching[0], (cell, matching[0])


def test_a_piped_figures_table_is_whole_at_full_width_under_a_narrow_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    out = pipe_console()
    assert out.width == 60  # the narrow terminal the table must not be cut to
    table.print_table(TITLE, WIDE_ROWS, "ratio", 2, out=out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    lines = text.splitlines()
    assert lines[0] == TITLE
    assert lines[1].split() == ["figure", "value", "unit", "ratio", "note"]
    assert max(len(line) for line in lines) > 200
    rows = [row.cells(2) for row in WIDE_ROWS]
    assert_whole(text, rows)
    assert rows[0][1:4] == ["341", "ms", "0.84"]  # the printed forms checked above
    assert rows[2][3] == ""  # missing: printed "-"
    # No box drawing: plain text only.
    assert not set(text) & set("┏━┃│┡╇└─")


def test_the_default_output_is_stdout_and_plain_when_stdout_is_a_pipe(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    # The console bench uses by default, as a piped run of a benchmark has it.
    monkeypatch.setattr(tables, "console", Console())
    table.print_table(TITLE, WIDE_ROWS, "ratio", 2)
    table.progress("throughput done")
    captured = capfd.readouterr()
    assert_whole(captured.out, [row.cells(2) for row in WIDE_ROWS])
    assert "throughput done" not in captured.out
    assert captured.err == "throughput done\n"


def test_any_figures_table_and_its_notes_are_whole_when_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    out = pipe_console()
    columns = ["phase", "figure", "range (eager)", "cooperative-sticky (cooperative)"]
    rows = [
        ["form", "time to a stable assignment", "1,234 ms (÷ 12.3, ÷ 4.56)", "2,345 ms (÷ 23.4, ÷ 5.67)"],
        ["one leaves", "pause per revoked partition, mean", "987 ms (÷ 9.9, ÷ 3.21)", "-"],
    ]
    note = "baselines: 100 sequential no-op sync-actor calls 100 ms; " * 4
    table.print_figures("100 GroupMembers in 4 Ray actors", columns, rows, notes=[note], out=out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert_whole(text, rows)
    assert text.splitlines()[-1] == note
    # The columns split again on two blanks, as the CLI's plain tables do.
    body = text.splitlines()[2:4]
    assert [line.split("  ")[0] for line in body] == ["form", "one leaves"]


def test_on_a_narrow_terminal_a_figures_table_folds_and_is_never_cut() -> None:
    out = Console(file=io.StringIO(), force_terminal=True, width=60, color_system=None)
    table.print_table(TITLE, WIDE_ROWS, "ratio", 2, out=out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 60
    # Every character of every note is there, folded onto more lines of its cell.
    assert text.count("x") >= 150


def test_rays_messages_to_the_driver_go_to_a_log_file_named_on_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "ray.log")
    message = "\x1b[33m(raylet)\x1b[0m Raylet is terminated. [state-dump] NodeManager:"

    def ray_listener() -> None:
        # As ray._private.worker.print_to_stdstream does: sys.stdout looked up at print time.
        print(message, file=sys.stdout)

    with log_file("bench-test", path) as named:
        listener = threading.Thread(target=ray_listener)
        listener.start()
        listener.join()
    table.print_table(TITLE, WIDE_ROWS[:1], "ratio", 2, out=Console(file=sys.stdout))
    captured = capfd.readouterr()
    assert named == path
    assert "raylet" not in captured.out and "state-dump" not in captured.out
    assert WIDE_ROWS[0].figure in captured.out
    with open(path, encoding="utf-8") as log:
        assert log.read() == message + "\n"
    assert captured.err == f"bench-test: Ray's messages to the driver (1 line): {path}\n"


def test_the_log_is_named_even_when_the_run_fails_and_removed_when_empty(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    failed = str(tmp_path / "failed.log")
    with pytest.raises(RuntimeError), log_file("bench-test", failed):
        print("(raylet) The node with node id: n1 has been marked dead")
        raise RuntimeError("the benchmark failed")
    assert failed in capfd.readouterr().err
    assert os.path.exists(failed)
    quiet = str(tmp_path / "quiet.log")
    with log_file("bench-test", quiet):
        pass
    assert capfd.readouterr().err == ""
    assert not os.path.exists(quiet)


def test_every_benchmark_imports() -> None:
    """Benchmarks run outside the suite: at least their imports must hold when modules move."""
    import importlib
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parent.parent / "bench").glob("*.py")):
        importlib.import_module(f"bench.{path.stem}")
