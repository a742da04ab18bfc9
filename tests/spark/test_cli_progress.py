"""`lag` and `report` say what they are doing: one line per step on a piped stderr, and how
many records they read at what rate (no Spark: a stand-in DataFrame)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from spark_bridge.cli import read_log_timed, show_progress


class Counted:
    """Stands for a cached DataFrame of `rows` records."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def count(self) -> int:
        return self.rows


def test_piped_steps_are_one_line_each_and_the_read_says_records_and_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown: list[str] = []

    @contextmanager
    def terminal_progress(description: str) -> Iterator[Callable[[str], None]]:
        shown.append(description)
        yield shown.append

    args = argparse.Namespace(progress=terminal_progress)
    with show_progress(args, "reading the offsets log (Spark)"):
        assert read_log_timed(Counted(1_234_567)) == 1_234_567

    err = capsys.readouterr().err.splitlines()
    assert err[0] == "reading the offsets log (Spark) ..."
    assert err[1].startswith("read 1,234,567 records of the offsets log in ") and err[1].endswith("/s)")
    assert len(err) == 2
    assert shown == []  # stderr is not a terminal here: no spinner


def test_without_a_progress_display_nothing_but_the_rate_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with show_progress(argparse.Namespace(), "computing lag (Spark)"):
        read_log_timed(Counted(0))

    assert capsys.readouterr().err.startswith("read 0 records of the offsets log in ")
