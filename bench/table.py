"""The figures tables every benchmark prints, by the CLI's rules (actors/cli/tables.py).

Rules (the CLI's, plus a title line):
- On a terminal: the title, then a rich table. No cell is ever cut: a value
  too wide for the terminal wraps or folds onto more lines of its cell,
  never an ellipsis.
- Not a terminal (a pipe, a file, CI): the title on a line of its own, then
  plain text at full width whatever the terminal size (COLUMNS included): a
  header line of column names and one line per row, columns left-aligned
  and at least two spaces apart; "-" for a missing value.
- Notes after a table (a caption, the baselines) are lines of their own,
  never wrapped by us.
- Figures go to stdout, and only figures: progress goes to stderr, and Ray's
  messages to the driver go to a log file while Ray runs (bench/driver_log.py).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from actors.cli import tables


@dataclass(frozen=True)
class Row:
    figure: str
    value: float
    unit: str
    ratio: float | None = None
    note: str = ""

    def cells(self, ratio_digits: int) -> list[str]:
        """The row as printed: large values without decimals, small ones with three."""
        value = f"{self.value:,.0f}" if self.value >= 100 else f"{self.value:,.3f}"
        ratio = "" if self.ratio is None else f"{self.ratio:.{ratio_digits}f}"
        return [self.figure, value, self.unit, ratio, self.note]


def print_table(
    title: str, rows: list[Row], ratio_header: str, ratio_digits: int = 2, *, out: Console | None = None
) -> None:
    """The figures table: figure, value, unit, ratio to its baseline, note."""
    print_figures(
        title,
        ("figure", "value", "unit", ratio_header, "note"),
        [row.cells(ratio_digits) for row in rows],
        out=out,
    )


def print_figures(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    notes: Iterable[str] = (),
    out: Console | None = None,
) -> None:
    """Any table of figures (module docstring): `title`, the table, then `notes`, on
    `out` (default: the CLI's stdout console)."""
    target = out or tables.console
    write_line(target, title)
    # The title is printed above, the same way on a terminal and off it.
    tables.print_table("", columns, rows, False, out=target)
    for note in notes:
        write_line(target, note)


def write_line(target: Console, text: str) -> None:
    """One line as it is: no markup, no highlighting, never wrapped or cut by rich."""
    if target.is_terminal:
        target.print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        target.file.write(text + "\n")
        target.file.flush()


def progress(text: str) -> None:
    """A line of progress, on stderr: stdout holds the figures only."""
    print(text, file=sys.stderr, flush=True)
