"""The report's single page, `report.html`: every table and every plot together.

Rules:
- Self-contained: the plots are embedded as base64 `data:` URIs and the
  style is inline, so the file can be mailed or attached to a ticket; it
  loads nothing from anywhere.
- Every table is shown with its row count; a long one shows its first
  `MAX_ROWS_SHOWN` rows and names the CSV that holds them all. Times
  (`_ms` and `_timestamp` columns holding epoch milliseconds) read as UTC dates.
- Everything from the data is HTML-escaped: group ids and metadata are
  whatever clients sent.
- Pure: the caller gives the tables, the PNG bytes and the generation time.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

MAX_ROWS_SHOWN = 200
# Epoch milliseconds after 2001-09-09: smaller `_ms` values are durations, not times.
_EPOCH_MS_FLOOR = 1_000_000_000_000
_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
p.meta { color: #555; margin-top: 0; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 0.25em 0.8em; border-bottom: 1px solid #eee; text-align: left; white-space: nowrap; }
th { background: #f5f5f5; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
nav a { margin-right: 1em; }
"""


def render_page(
    tables: Mapping[str, tuple[Sequence[str], Sequence[Sequence[Any]], int]],
    plots: Mapping[str, bytes],
    facts: Sequence[tuple[str, str]],
    generated_ms: int,
) -> str:
    """The page: `tables` {name: (columns, first rows, row count)} (the rows shown: at most
    MAX_ROWS_SHOWN are), `plots` {file name: PNG bytes}, `facts` (label, text)."""
    generated = _time(generated_ms)
    nav = " ".join(f'<a href="#{html.escape(name)}">{html.escape(name)}</a>' for name in tables)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>raygroups offset report</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>raygroups offset report</h1>",
        f'<p class="meta">generated {html.escape(generated)}</p>',
        "<ul>" + "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in facts) + "</ul>",
        "<h2>Plots</h2>",
    ]
    for name, png in plots.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f'<div><img alt="{html.escape(name)}" src="data:image/png;base64,{data}"></div>')
    parts.append(f"<h2>Tables</h2><nav>{nav}</nav>")
    for name, (columns, rows, count) in tables.items():
        parts.append(_table(name, columns, rows, count))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _table(name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], total: int) -> str:
    shown = rows[:MAX_ROWS_SHOWN]
    count = f"{total} rows" if total == len(shown) else (
        f"first {len(shown)} of {total} rows; all of them in {name}.csv"
    )
    head = "".join(f"<th>{html.escape(column)}</th>" for column in columns)
    body = "".join(
        "<tr>" + "".join(_cell(column, value) for column, value in zip(columns, row)) + "</tr>"
        for row in shown
    )
    title = html.escape(name)
    return (f'<h3 id="{title}">{title}</h3><p class="meta">{count} ({title}.csv, {title}.parquet)</p>'
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _cell(column: str, value: Any) -> str:
    if value is None:
        return '<td class="num">-</td>'
    if isinstance(value, bool):
        return f"<td>{str(value).lower()}</td>"
    if isinstance(value, int | float):
        if column.endswith(("_ms", "_timestamp")) and isinstance(value, int) and value >= _EPOCH_MS_FLOOR:
            return f'<td title="{value}">{html.escape(_time(value))}</td>'
        text = f"{value:.3f}" if isinstance(value, float) else str(value)
        return f'<td class="num">{text}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
