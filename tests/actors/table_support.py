"""Reading printed tables back in tests: the cells of plain (not a terminal) output,
and each column's text in a terminal table whose cells may fold over lines."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

import pytest
from rich.console import Console

BOX = re.compile(r"[─━│┃┏┓┗┛┡┩└┘┌┐├┤┬┴┼╇╈]")


def terminal(width: int = 80) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=width, color_system=None)


def piped() -> Console:
    return Console(file=io.StringIO())


def output(console: Console) -> str:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def plain_rows(text: str) -> list[list[str]]:
    """The cells of each non-blank line of plain output (columns: two spaces or more apart)."""
    return [re.split(r" {2,}", line.strip()) for line in text.splitlines() if line.strip()]


def plain_records(text: str) -> list[dict[str, str]]:
    """Plain output of one or more tables (a blank line between them) as header-keyed rows."""
    records: list[dict[str, str]] = []
    for block in text.strip("\n").split("\n\n"):
        header, *rows = plain_rows(block)
        records += [dict(zip(header, row, strict=True)) for row in rows]
    return records


def column_texts(text: str) -> list[str]:
    """Each column's characters top to bottom, the lines of a folded cell joined: a value
    that is whole in the table is a substring of its column's text. `text` is one
    table's lines without its title."""
    lines = [line for line in text.splitlines() if line.strip() and not BOX.search(line)]
    width = max(len(line) for line in lines)
    padded = [line.ljust(width) for line in lines]
    # Column boundaries: character positions blank on every line of the table body.
    blank = [all(line[i] == " " for line in padded) for i in range(width)]
    spans, start = [], None
    for i, is_blank in enumerate([*blank, True]):
        if not is_blank and start is None:
            start = i
        elif is_blank and start is not None:
            spans.append((start, i))
            start = None
    return ["".join(line[a:b].strip() for line in padded) for a, b in spans]


def columns_on_terminal(
    run: Callable[[], int], monkeypatch: pytest.MonkeyPatch, width: int = 80
) -> tuple[list[str], str]:
    """Run a command that prints one table on a terminal `width` wide: it exits 0 and
    no line is cut or wider; each column's text (`column_texts`) and the whole output."""
    from actors.cli import tables

    console = terminal(width)
    monkeypatch.setattr(tables, "console", console)
    assert run() == 0
    text = output(console)
    assert "…" not in text and all(len(line) <= width for line in text.splitlines())
    return column_texts(text.split("\n", 1)[1]), text
