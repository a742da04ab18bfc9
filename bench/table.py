"""The figures table every benchmark prints: value, unit, ratio to its baseline."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table


@dataclass(frozen=True)
class Row:
    figure: str
    value: float
    unit: str
    ratio: float | None = None
    note: str = ""


def print_table(title: str, rows: list[Row], ratio_header: str, ratio_digits: int = 2) -> None:
    table = Table(title=title)
    for column in ("figure", "value", "unit", ratio_header, "note"):
        table.add_column(column, justify="right" if column in ("value", ratio_header) else "left")
    for row in rows:
        value = f"{row.value:,.0f}" if row.value >= 100 else f"{row.value:,.3f}"
        ratio = "" if row.ratio is None else f"{row.ratio:.{ratio_digits}f}"
        table.add_row(row.figure, value, row.unit, ratio, row.note)
    Console(width=160).print(table)
