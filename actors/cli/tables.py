"""Every table the `raygroups` CLI prints, and the progress it shows: one place, one set of rules.

Rules:
- `--json`: a list of objects, one per row, keyed by column name, values as
  given (never shortened, None stays null).
- On a terminal: a rich table with its title. No cell is ever cut: a value
  too wide for the terminal wraps or folds onto more lines of its cell, never
  an ellipsis.
- Not a terminal (a pipe, a file, CI): plain text as kafka-consumer-groups.sh
  prints it, at full width whatever the terminal size: a header line of
  column names, then one line per row, each column left-aligned and
  separated from the next by at least two spaces; no title, no box
  characters; "-" for a missing value (None or empty, Kafka's
  MISSING_COLUMN_VALUE). A line break inside a value becomes a space, so a
  row stays one line for grep, and `awk -F'  +'` splits even cells that
  hold blanks. Several tables (one per group, as Kafka prints them) are
  separated by a blank line.
- Progress (`progress`, `track`) is drawn on stderr and only when stderr is a
  terminal; anywhere else it is a no-op, so captured output holds results only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ray.exceptions import RayTaskError
from rich import box
from rich.console import Console
from rich.table import Table

# The CLI's stdout; tests replace it (or pass `out`) to render for a given terminal.
console = Console()
MISSING = "-"
COLUMN_GAP = "  "
# On a terminal: the box's blank between columns plus one of padding.
COLUMN_SEPARATION = 2
# Narrower than this, a folded value is unreadable: plain lines are printed instead.
MIN_COLUMN_WIDTH = 4
T = TypeVar("T")


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    as_json: bool,
    *,
    out: Console | None = None,
) -> None:
    """Print one table: JSON, a rich table on a terminal, else plain aligned text (module docstring)."""
    print_tables(columns, [(title, rows)], as_json, out=out)


def print_tables(
    columns: Sequence[str],
    sections: Sequence[tuple[str, Sequence[Sequence[Any]]]],
    as_json: bool,
    *,
    out: Console | None = None,
) -> None:
    """Print tables of the same columns, one per (title, rows) section: with `as_json` one
    list of every section's rows; otherwise a table per section that has rows."""
    target = out or console
    if as_json:
        every = [dict(zip(columns, row)) for _, rows in sections for row in rows]
        target.file.write(json.dumps(every, indent=1, default=str) + "\n")
        return
    shown = [(title, rows) for title, rows in sections if rows] or list(sections[:1])
    for index, (title, rows) in enumerate(shown):
        cells = [[cell_text(value) for value in row] for row in rows]
        table = rich_table(title, columns, cells, target.width) if target.is_terminal else None
        if table is not None:
            target.print(table)
            continue
        if index:
            target.file.write("\n")
        target.file.write("".join(line + "\n" for line in plain_lines(columns, cells)))
    target.file.flush()


def cell_text(value: Any) -> str:
    """A cell as printed: "-" when missing, one line."""
    if value is None or value == "":
        return MISSING
    return " ".join(str(value).splitlines())


def plain_lines(columns: Sequence[str], cells: Sequence[Sequence[str]]) -> list[str]:
    """The header and one line per row, each column as wide as its widest cell."""
    widths = [max([len(name), *(len(row[i]) for row in cells)]) for i, name in enumerate(columns)]
    return [
        COLUMN_GAP.join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
        for line in [list(columns), *cells]
    ]


def rich_table(
    title: str, columns: Sequence[str], cells: Sequence[Sequence[str]], width: int
) -> Table | None:
    """A table at most `width` wide, for a terminal (`column_widths`), values wrapped or
    folded onto more lines where their column is narrower. None when the columns cannot
    each keep `MIN_COLUMN_WIDTH`: the caller prints plain lines then."""
    widths = column_widths(columns, cells, width - COLUMN_SEPARATION * (len(columns) - 1))
    if widths is None:
        return None
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
        padding=(0, 0, 0, COLUMN_SEPARATION - 1), pad_edge=False,
    )
    for name, column_width in zip(columns, widths):
        header = _break_header(name, column_width)
        table.add_column(header, width=column_width, overflow="fold", no_wrap=False)
    for row in cells:
        table.add_row(*row)
    return table


def column_widths(columns: Sequence[str], cells: Sequence[Sequence[str]], available: int) -> list[int] | None:
    """Widths summing to `available` at most, giving up as little as possible, in order:
    headers whole; headers broken after their hyphens; headers folded (values still
    whole), the room left going back to the headers; then the widest values folded
    (`fit_widths`)."""
    values = [max((len(row[i]) for row in cells), default=0) for i in range(len(columns))]
    candidates = [
        [max(len(name), value) for name, value in zip(columns, values)],
        [max(_header_width(name), value) for name, value in zip(columns, values)],
        [max(min(len(name), MIN_COLUMN_WIDTH), value) for name, value in zip(columns, values)],
    ]
    for index, widths in enumerate(candidates):
        if sum(widths) <= available:
            return _widen(widths, candidates[:index][::-1], available)
    return fit_widths(candidates[-1], available)


def _widen(widths: list[int], wider: list[list[int]], available: int) -> list[int]:
    """Give the room left back to folded headers: toward each wider candidate in turn."""
    widths = list(widths)
    for target in wider:
        for i, width in enumerate(target):
            widths[i] += max(0, min(width - widths[i], available - sum(widths)))
    return widths


def fit_widths(natural: Sequence[int], available: int) -> list[int] | None:
    """Column widths that sum to `available` at most: each column keeps its natural width
    up to a cap shared by all, the largest cap that fits (the narrow columns, numbers and
    names, stay whole; the widest ones fold). None if that cap is under `MIN_COLUMN_WIDTH`."""
    if sum(natural) <= available:
        return list(natural)
    remaining, left = available, len(natural)
    for width in sorted(natural):
        if width * left > remaining:
            break
        remaining, left = remaining - width, left - 1
    cap, spare = divmod(remaining, left)
    if cap < MIN_COLUMN_WIDTH:
        return None
    widths = []
    for width in natural:
        # The columns at the cap share the last few characters, first come first served.
        extra = 1 if width > cap and spare > 0 else 0
        spare -= extra
        widths.append(min(width, cap + extra))
    return widths


def _break_header(name: str, width: int) -> str:
    """The header on as few lines of `width` as breaking after its hyphens allows (a
    piece still too wide is folded by rich)."""
    lines: list[str] = []
    for piece in name.replace("-", "-\n").splitlines():
        if lines and len(lines[-1]) + len(piece) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    return "\n".join(lines)


def _header_width(name: str) -> int:
    """The width a header needs when broken after each hyphen: its longest piece."""
    return max(len(piece) for piece in name.replace("-", "-\n").splitlines())


def stderr_console() -> Console:
    return Console(stderr=True)


@contextmanager
def progress(description: str, *, err: Console | None = None) -> Iterator[Callable[[str], None]]:
    """A spinner with `description` on stderr while the block runs, when stderr is a
    terminal; yields a function that replaces the description (a no-op elsewhere)."""
    target = err or stderr_console()
    if not target.is_terminal:
        yield _ignore
        return
    with target.status(description) as status:
        yield lambda text: status.update(text)


def track(
    items: Iterable[T], description: str, *, total: int | None = None, err: Console | None = None
) -> Iterator[T]:
    """`items`, with a progress bar on stderr when it is a terminal."""
    target = err or stderr_console()
    if not target.is_terminal:
        yield from items
        return
    from rich.progress import track as rich_track

    yield from rich_track(items, description, total=total, console=target, transient=True)


def _ignore(_text: str) -> None:
    return None


def one_line(exc: Exception) -> str:
    """A service's own message for an error line, without the remote traceback Ray wraps it in."""
    cause = exc.cause if isinstance(exc, RayTaskError) else exc
    return " ".join(str(cause).split())
