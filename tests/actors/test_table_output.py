"""actors.cli.tables: no value is ever cut, on an 80-column terminal or off a terminal;
JSON as it always was; progress only on a terminal. Pure: rich consoles on StringIO."""

from __future__ import annotations

import json
import re

import pytest

from actors.cli.tables import (
    MIN_COLUMN_WIDTH,
    column_widths,
    fit_widths,
    print_table,
    print_tables,
    progress,
    track,
)

from tests.actors.table_support import BOX, column_texts, output, piped, terminal

COLUMNS = [
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
    "CLIENT-ID",
]
LONG_ID = "orders-app-c0-8f14e45f-ceea-467f-a0e6-3c8e2f1c9a77"
ROWS = [
    ["orders-app-with-a-long-name", "orders-events-eu-west-1", 3, 123456, 124000, 544, LONG_ID, "10.0.12.34",
     "orders-app-c0"],
    ["billing", "payments", 11, None, 7, None, None, "", "billing-c1"],
]
def test_an_80_column_terminal_cuts_no_value() -> None:
    console = terminal(80)
    print_table("consumer group orders-app", COLUMNS, ROWS, False, out=console)
    text = output(console)
    assert "…" not in text and "..." not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    columns = column_texts(text.split("\n", 1)[1])  # without the title line
    for row in ROWS:
        for value in row:
            if value not in (None, ""):
                assert any(str(value) in column for column in columns), value
    assert "consumer group orders-app" in text.splitlines()[0]


def test_a_wide_terminal_prints_each_row_on_one_line() -> None:
    console = terminal(250)
    print_table("t", COLUMNS, ROWS, False, out=console)
    lines = output(console).splitlines()
    assert any(line.split() == COLUMNS for line in lines)
    assert any(LONG_ID in line and "orders-events-eu-west-1" in line for line in lines)


def test_off_a_terminal_plain_aligned_text_at_full_width() -> None:
    console = piped()
    print_table("consumer group orders-app", COLUMNS, ROWS, False, out=console)
    lines = output(console).splitlines()
    assert len(lines) == 3, "a header line and one line per row, no title"
    assert not BOX.search(output(console)) and "…" not in output(console)
    cells = [re.split(r" {2,}", line) for line in lines]
    assert cells[0] == COLUMNS
    assert cells[1] == [str(v) for v in ROWS[0]]
    assert cells[2] == ["billing", "payments", "11", "-", "7", "-", "-", "-", "billing-c1"]
    # Left-aligned columns: every value of a column starts where its header does.
    for name in COLUMNS:
        start = lines[0].index(name)
        assert all(line[start] != " " and (start == 0 or line[start - 1] == " ") for line in lines[1:])
    assert [line.split()[6] for line in lines[1:]] == [LONG_ID, "-"], "awk '{print $7}' reads a column"


def test_a_line_break_inside_a_value_keeps_the_row_on_one_line() -> None:
    console = piped()
    print_table("t", ["PARTITION", "FAILURE"], [[2, "log missing\non node a1"]], False, out=console)
    assert output(console).splitlines()[1].split("  ")[-1].strip() == "log missing on node a1"


def test_json_is_a_list_of_objects_with_the_values_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    print_table("t", COLUMNS, ROWS, True)
    rows = json.loads(capsys.readouterr().out)
    assert rows == [dict(zip(COLUMNS, row)) for row in ROWS]


def test_several_tables_are_separated_by_a_blank_line_and_json_joins_them() -> None:
    console = piped()
    sections = [("a", [["a", 1]]), ("empty", []), ("b", [["b", 2]])]
    print_tables(["GROUP", "N"], sections, False, out=console)
    assert output(console) == "GROUP  N\na      1\n\nGROUP  N\nb      2\n"
    console = piped()
    print_tables(["GROUP", "N"], sections, True, out=console)
    assert json.loads(output(console)) == [{"GROUP": "a", "N": 1}, {"GROUP": "b", "N": 2}]


def test_a_terminal_too_narrow_for_the_columns_gets_plain_lines() -> None:
    console = terminal(30)
    print_table("t", COLUMNS, ROWS, False, out=console)
    lines = output(console).splitlines()
    assert re.split(r" {2,}", lines[0]) == COLUMNS and LONG_ID in lines[1]


@pytest.mark.parametrize(
    ("natural", "available", "expected"),
    [
        ([5, 10, 3], 30, [5, 10, 3]),  # fits: unchanged
        ([3, 6, 50, 40], 40, [3, 6, 16, 15]),  # the narrow ones whole, the wide share the rest
        ([9, 9, 9], 20, [7, 7, 6]),  # every character used
    ],
)
def test_fit_widths(natural: list[int], available: int, expected: list[int]) -> None:
    assert fit_widths(natural, available) == expected
    assert sum(expected) <= available


def test_headers_give_way_before_values() -> None:
    columns, cells = ["GROUP", "LOG-END-OFFSET", "ID"], [["g", "1300", "x" * 30]]
    assert column_widths(columns, cells, 60) == [5, 14, 30], "room for everything"
    assert column_widths(columns, cells, 44) == [5, 9, 30], "the header broken after a hyphen"
    assert column_widths(columns, cells, 40) == [5, 5, 30], "every value whole, the header folded"
    assert column_widths(columns, cells, 30) == [4, 4, 22], "then the widest value folds"


def test_a_header_breaks_after_hyphens_on_a_terminal() -> None:
    console = terminal(170)  # room for every value, not for every header on one line
    print_table("t", COLUMNS, ROWS, False, out=console)
    words = output(console).split()
    assert "CURRENT-" in words and "OFFSET" in words and "CURRENT-OFFSET" not in words


def test_fit_widths_refuses_columns_narrower_than_the_minimum() -> None:
    assert fit_widths([20] * 5, 5 * MIN_COLUMN_WIDTH) == [MIN_COLUMN_WIDTH] * 5
    assert fit_widths([20] * 5, 5 * MIN_COLUMN_WIDTH - 1) is None


def test_progress_and_track_show_only_on_a_terminal() -> None:
    quiet = piped()
    with progress("starting Spark", err=quiet) as update:
        update("Spark up")
    assert list(track(range(3), "resetting", err=quiet)) == [0, 1, 2]
    assert output(quiet) == ""
    shown = terminal(80)
    with progress("starting Spark", err=shown) as update:
        update("running the lag job")
    assert list(track(range(3), "resetting", err=shown)) == [0, 1, 2]
    assert output(shown) != ""
