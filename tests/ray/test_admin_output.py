"""`raygroups list`, `status`, `capacity` and `delete` against the running service print every value
whole, on an 80-column terminal and off a terminal (plain lines for grep and awk)."""

from __future__ import annotations

import pytest

from actors.cli import tables
from actors.cli.main import main
from actors.client.client import Client

from tests.actors.table_support import column_texts, output, piped, plain_records, terminal

pytestmark = pytest.mark.ray
GROUP = "admin-output-group-with-a-rather-long-name-to-fold"


def printed(monkeypatch: pytest.MonkeyPatch, console: object, *argv: str) -> tuple[int, str]:
    monkeypatch.setattr(tables, "console", console)
    code = main(list(argv))
    return code, output(console)  # type: ignore[arg-type]


def test_list_and_status_in_both_output_modes(service: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    service.commit_offsets(GROUP, {("admin-output-topic", 0): 3})
    code, text = printed(monkeypatch, piped(), "list")
    assert code == 0
    listed = {"GROUP": GROUP, "TYPE": "classic", "STATE": "Empty", "PROTOCOL-TYPE": "-", "HEALTH": "OK"}
    assert listed in plain_records(text)
    code, text = printed(monkeypatch, terminal(80), "list")
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    assert any(GROUP in column for column in column_texts(text.split("\n", 1)[1]))

    code, text = printed(monkeypatch, piped(), "status")
    rows = plain_records(text)
    assert code == 0 and len(rows) == service.num_partitions
    nodes = {row["node_id"][:8] for row in service.status()}
    assert {row["NODE"] for row in rows} == nodes and {row["STATE"] for row in rows} == {"ACTIVE"}
    code, text = printed(monkeypatch, terminal(80), "status")
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    columns = column_texts(text.split("\n", 1)[1])
    assert all(any(node in column for column in columns) for node in nodes)
    code, text = printed(monkeypatch, terminal(80), "capacity")
    assert code == 0 and "…" not in text and all(len(line) <= 80 for line in text.splitlines())


def test_delete_in_both_output_modes(service: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    for console in (piped(), terminal(80)):
        service.commit_offsets(GROUP, {("admin-output-topic", 0): 3})
        code, text = printed(monkeypatch, console, "delete", GROUP)
        assert code == 0 and "…" not in text
        if console.is_terminal:
            assert any(GROUP in column for column in column_texts(text.split("\n", 1)[1]))
        else:
            assert plain_records(text) == [{"GROUP": GROUP, "RESULT": "NONE"}]
