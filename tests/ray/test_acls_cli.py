"""`raygroups acls` against the running service: kafka-acls.sh's --add, --list and --remove."""

from __future__ import annotations

import json

import pytest

from actors.cli.main import main
from actors.client.client import Client
from coordinator.acl import AclFilter

pytestmark = pytest.mark.ray


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, object]]]:
    code = main(["acls", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_add_list_and_remove_with_kafka_acls_options(
    service: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    code, added = run_json(capsys, "--add", "--allow-principal", "User:alice", "--consumer",
                           "--topic", "cli-orders", "--group", "cli-pay")
    assert code == 0 and {(a["RESOURCE-TYPE"], a["OPERATION"]) for a in added} == {
        ("TOPIC", "READ"), ("TOPIC", "DESCRIBE"), ("GROUP", "READ")}
    code, _ = run_json(capsys, "--add", "--deny-principal", "User:bob", "--operation", "DescribeConfigs",
                       "--group", "cli-", "--resource-pattern-type", "prefixed")
    assert code == 0
    code, listed = run_json(capsys, "--list", "--group", "cli-pay", "--resource-pattern-type", "match")
    assert code == 0 and {(a["PRINCIPAL"], a["PATTERN"], a["PERMISSION"]) for a in listed} == {
        ("User:alice", "LITERAL", "ALLOW"), ("User:bob", "PREFIXED", "DENY")}
    code, refused = run_json(capsys, "--add", "--allow-principal", "alice", "--group", "cli-pay")
    assert code == 1 and refused[0]["RESULT"] == "INVALID_REQUEST" and "principal" in str(refused[0]["WHY"])
    code, removed = run_json(capsys, "--remove", "--force", "--group", "cli-pay", "--topic", "cli-orders")
    assert code == 0 and len(removed) == 3
    code, _ = run_json(capsys, "--remove", "--force", "--group", "cli-",
                       "--resource-pattern-type", "prefixed")
    assert code == 0 and not [a for a in service.describe_acls(AclFilter()) if a.name.startswith("cli-")]


def test_credentials_are_issued_and_revoked(service: Client, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["credentials", "--principal", "User:cli-team", "--ttl", "1h"]) == 0
    credential = capsys.readouterr().out.strip()
    assert credential.startswith("rgc1.")
    assert main(["credentials", "--revoke", credential]) == 0
    assert capsys.readouterr().out.startswith("revoked credential ")
    assert main(["credentials", "--principal", "cli-team"]) == 1
    assert "not of the form Type:name" in capsys.readouterr().err
