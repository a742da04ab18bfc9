"""The `raygroups` admin commands against a running service."""

from __future__ import annotations

import json

import pytest

from actors.cli.main import main
from actors.client.client import Client
from coordinator import Errors

from tests.ray.helpers import form_group

pytestmark = pytest.mark.ray


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_list_describe_status(service: Client, capsys: pytest.CaptureFixture[str]) -> None:
    (leader, follower), gen = form_group(service, "cli-live", 2)
    service.commit_offsets("cli-live", {("t", 0): 7}, gen, leader)
    code, listed = run_json(capsys, "list")
    listing = {
        "GROUP": "cli-live", "TYPE": "classic", "STATE": "Stable", "PROTOCOL-TYPE": "consumer", "HEALTH": "OK"
    }
    assert code == 0 and listing in listed
    code, described = run_json(capsys, "describe", "cli-live")
    assert code == 0
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"]) for r in described] == [("t", 0, 7)]
    code, members = run_json(capsys, "describe", "cli-live", "--members")
    assert {m["CONSUMER-ID"] for m in members} == {leader, follower}
    code, status = run_json(capsys, "status")
    assert code == 0 and len(status) == service.num_partitions
    assert all(p["STATE"] == "ACTIVE" for p in status)
    # Each leader's Kafka listener (gateway.direct), on loopback without SASL or TLS.
    assert all(p["KAFKA"]["host"] == "127.0.0.1" and p["KAFKA"]["port"] > 0 for p in status)
    code, load = run_json(capsys, "capacity")
    assert code == 0 and [p["PARTITION"] for p in load] == [p["PARTITION"] for p in status]
    assert all(p["LOAD"] == pytest.approx(p["REQ/S"] / p["PLANNED"], abs=1e-4) for p in load)
    assert main(["describe", "cli-nope"]) == 1


def test_delete_and_reassign(service: Client, capsys: pytest.CaptureFixture[str]) -> None:
    service.commit_offsets("cli-del", {("t", 0): 1})
    code, deleted = run_json(capsys, "delete", "cli-del")
    assert code == 0 and deleted == [{"GROUP": "cli-del", "RESULT": "NONE"}]
    assert service.describe_groups(["cli-del"])[0].state == "Dead"
    partition = service.partition_for("cli-moved")
    service.commit_offsets("cli-moved", {("t", 0): 4})
    before = service.status()[partition]["epoch"]
    code, moved = run_json(capsys, "reassign", str(partition))
    assert moved == [{"PARTITION": partition, "NEW-EPOCH": before + 1}]
    assert service.fetch_offsets("cli-moved").offsets() == {("t", 0): 4}
    assert service.delete_groups(["cli-moved"]) == {"cli-moved": Errors.NONE}
