"""`raygroups status` shows a refusing partition, why, and exits 1 for it."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from rich.console import Console

from actors import admin_cli
from actors.admin_cli import cmd_status

FAILURE = "log directory /data/offsets-2 missing on node abc123: the partition acknowledged up to 12"


class StatusClient:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def status(self) -> list[dict[str, Any]]:
        return self.rows


ROWS = [
    {"partition": 1, "epoch": 3, "state": "ACTIVE", "refused": False, "failure": None},
    {"partition": 2, "epoch": 5, "state": "FAILED", "refused": True, "failure": FAILURE},
]


def test_status_json_has_refused_and_the_whole_failure(capsys: pytest.CaptureFixture[str]) -> None:
    code = cmd_status(StatusClient(ROWS), argparse.Namespace(json=True))  # type: ignore[arg-type]
    rows = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [(r["PARTITION"], r["REFUSED"], r["FAILURE"]) for r in rows] == [
        (1, "no", None),
        (2, "yes", FAILURE),
    ]


def test_status_table_names_the_refusing_partition(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin_cli, "console", Console(width=250))
    assert cmd_status(StatusClient(ROWS[:1]), argparse.Namespace(json=False)) == 0  # type: ignore[arg-type]
    capsys.readouterr()
    assert cmd_status(StatusClient(ROWS), argparse.Namespace(json=False)) == 1  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "REFUSED" in out and "offsets-2" in out and "partitions [2] refuse to serve" in out
