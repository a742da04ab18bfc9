"""`raygroups status` shows a refusing partition, why, and exits 1 for it; with
replicas, each partition's leader node, replicas, ISR, high watermark and
follower lags, and exits 1 for an offline partition."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import pytest

from actors.cli.admin import cmd_capacity, cmd_status
from actors.cli.status_table import BASE_COLUMNS, CAPACITY_COLUMNS

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


def test_status_table_names_the_refusing_partition(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd_status(StatusClient(ROWS[:1]), argparse.Namespace(json=False)) == 0  # type: ignore[arg-type]
    capsys.readouterr()
    assert cmd_status(StatusClient(ROWS), argparse.Namespace(json=False)) == 1  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert dict(zip(table_line(out, "PARTITION"), table_line(out, 2)))["FAILURE"] == FAILURE, "printed whole"
    assert "partitions [2] refuse to serve" in err and "refuse" not in out


# Ray node ids are 56 hex characters; the table shows their first 8.
N1, N2, N3 = ("a1" * 28), ("b2" * 28), ("c3" * 28)


def replicated_row(partition: int, **changes: Any) -> dict[str, Any]:
    """A controller status row of a replicated partition, its leader's `info()` merged in."""
    row: dict[str, Any] = {
        "partition": partition, "epoch": 4, "state": "ACTIVE", "refused": False, "failure": None,
        "node_id": N1, "groups": 2, "members": 5, "requests_per_s": 12.5, "durable_end": 120, "load_ms": 3.0,
        "replicas": [N1, N2, N3], "isr": [N1, N2, N3], "leader_node": N1, "offline": False,
        "under_replicated": False, "high_watermark": 103,
        "followers": {N2: {"log_end": 120, "lag": 0}, N3: {"log_end": 103, "lag": 17}},
    }
    return {**row, **changes}


def offline_row(partition: int) -> dict[str, Any]:
    """No leader: the controller's row alone (no `info()` to merge)."""
    return {
        "partition": partition, "epoch": 6, "state": "NO LEADER", "refused": False, "failure": None,
        "replicas": [N1, N2, N3], "isr": [N3], "leader_node": None, "offline": True,
        "under_replicated": True,
    }


REPLICATED_ROWS = [
    replicated_row(0),
    replicated_row(1, isr=[N1, N2], under_replicated=True, followers={N2: {"log_end": 9, "lag": 0},
                                                                      N3: {"log_end": None, "lag": None}}),
    offline_row(2),
]


def table_output(rows: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The exit code, the table (stdout: not a terminal, so plain text) and the notes (stderr)."""
    code = cmd_status(StatusClient(rows), argparse.Namespace(json=False))  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    return code, out, err


def table_line(out: str, partition: int | str) -> list[str]:
    """The cells of one partition's line of the plain table (the header's: "PARTITION")."""
    for line in out.splitlines():
        cells = re.split(r" {2,}", line.strip())
        if cells and cells[0] == str(partition):
            return cells
    raise AssertionError(f"no line for partition {partition} in:\n{out}")


def test_status_table_shows_replication_per_partition(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = table_output(REPLICATED_ROWS, capsys)
    header = table_line(out, "PARTITION")
    healthy, lagging, offline = (dict(zip(header, table_line(out, p))) for p in (0, 1, 2))
    assert healthy["LEADER-NODE"] == "a1a1a1a1"
    assert healthy["REPLICAS"] == healthy["ISR"] == "a1a1a1a1,b2b2b2b2,c3c3c3c3"
    assert (healthy["HWM"], healthy["LOG-END"]) == ("103", "120")
    assert healthy["FOLLOWER-LAG"] == "b2b2b2b2:0,c3c3c3c3:17"
    assert healthy["HEALTH"] == "ok"
    assert lagging["ISR"] == "a1a1a1a1,b2b2b2b2" and lagging["HEALTH"] == "UNDER-REPLICATED"
    assert lagging["FOLLOWER-LAG"] == "b2b2b2b2:0,c3c3c3c3:?"  # never heard from: no lag to show
    assert offline["HEALTH"] == "OFFLINE" and offline["LEADER-NODE"] == "-" and offline["ISR"] == "c3c3c3c3"
    assert "partitions [2] are offline" in err and "elect-leader --unclean" in err
    assert "partitions [1] are under-replicated" in err  # an offline one is named once, as offline
    assert "offline" not in out, "the notes stay out of the greppable table"
    assert code == 1


def test_status_exits_0_when_under_replicated_but_every_partition_has_a_leader(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = table_output(REPLICATED_ROWS[:2], capsys)
    assert code == 0
    assert "under-replicated" in err and "offline" not in err


def test_status_json_keeps_node_ids_lists_and_lags_whole(capsys: pytest.CaptureFixture[str]) -> None:
    code = cmd_status(StatusClient(REPLICATED_ROWS), argparse.Namespace(json=True))  # type: ignore[arg-type]
    rows = json.loads(capsys.readouterr().out)
    assert code == 1
    healthy, lagging, offline = rows
    assert healthy["LEADER-NODE"] == N1 and healthy["REPLICAS"] == [N1, N2, N3]
    assert healthy["FOLLOWER-LAG"] == {N2: 0, N3: 17} and healthy["HWM"] == 103
    assert lagging["ISR"] == [N1, N2] and lagging["FOLLOWER-LAG"] == {N2: 0, N3: None}
    assert [r["HEALTH"] for r in rows] == ["ok", "UNDER-REPLICATED", "OFFLINE"]
    assert offline["LEADER-NODE"] is None and offline["FOLLOWER-LAG"] is None


def test_status_of_replication_factor_1_keeps_the_plain_columns(capsys: pytest.CaptureFixture[str]) -> None:
    sole = replicated_row(0, replicas=[N1], isr=[N1], followers={})
    code, out, _ = table_output([sole], capsys)
    assert code == 0
    header = table_line(out, "PARTITION")
    assert header == BASE_COLUMNS
    assert dict(zip(header, table_line(out, 0)))["NODE"] == "a1a1a1a1"
    assert dict(zip(header, table_line(out, 0)))["REQ/S"] == "12.5"
    cmd_status(StatusClient([sole]), argparse.Namespace(json=True))  # type: ignore[arg-type]
    [row] = json.loads(capsys.readouterr().out)
    assert row["NODE"] == N1 and "REPLICAS" not in row


def test_status_names_a_replica_whose_disk_failed_with_its_error_and_next_retry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    disk = {
        "failed": True, "error": "append: [Errno 28] No space left on device",
        "last_error": "OSError(28, 'No space left on device')",
        "since_ms": 1_764_093_600_000, "next_retry_ms": 1_764_093_605_250, "failures": 1, "retries": 6,
    }
    rows = [replicated_row(0, isr=[N1, N2], under_replicated=True, disks={N3: disk}), replicated_row(1)]
    code, out, err = table_output(rows, capsys)
    header = table_line(out, "PARTITION")
    failed, fine = (dict(zip(header, table_line(out, p))) for p in (0, 1))
    assert failed["DISK-FAILED"] == (
        "c3c3c3c3: OSError(28, 'No space left on device') (since 18:00:00.000Z, next retry 18:00:05.250Z)"
    )
    assert fine["DISK-FAILED"] == "-" and code == 0
    cmd_status(StatusClient(rows), argparse.Namespace(json=True))  # type: ignore[arg-type]
    assert json.loads(capsys.readouterr().out)[0]["DISK-FAILED"] == {N3: disk}


def test_capacity_shows_each_leaders_rate_against_its_plan_and_names_the_hot_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        replicated_row(0, requests_per_s=1_800.0),  # past 1,500/s, the plan of a replicated partition
        replicated_row(1, replicas=[N2], isr=[N2], leader_node=None, node_id=N2, requests_per_s=1_800.0),
        offline_row(2),
    ]
    assert cmd_capacity(StatusClient(rows), argparse.Namespace(json=False)) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert table_line(out, "PARTITION") == CAPACITY_COLUMNS
    hot, single, offline = (dict(zip(CAPACITY_COLUMNS, table_line(out, p))) for p in (0, 1, 2))
    assert (hot["NODE"], hot["REPLICAS"], hot["REQ/S"], hot["PLANNED"], hot["LOAD"]) == (
        "a1a1a1a1", "3", "1800.0", "1500", "120%",
    )
    assert (single["NODE"], single["PLANNED"], single["LOAD"]) == ("b2b2b2b2", "2500", "72%")
    assert (offline["REQ/S"], offline["LOAD"]) == ("-", "-")
    assert "partitions [0] serve more requests than planned" in err
    cmd_capacity(StatusClient(rows), argparse.Namespace(json=True))  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert [r["LOAD"] for r in json.loads(out)] == [1.2, 0.72, None] and err == ""
