"""`raygroups elect-leader [--unclean] PARTITION`: parsing, the unclean warning and
its confirmation, the printed result, and a refused election as a one-line error.

The controller call is replaced by a recorder (`request_election` is the one
function of the command that talks to Ray)."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from ray.exceptions import RayTaskError

from actors.cli import admin
from actors.cli.admin import cmd_elect_leader
from actors.cli.main import build_parser

N2 = "b2" * 28


class Elections:
    """Records the elections asked for and answers as the controller would."""

    def __init__(self, error: Exception | None = None) -> None:
        self.asked: list[tuple[int, bool]] = []
        self.error = error

    def __call__(self, client: Any, partition: int, unclean: bool, node: str | None = None) -> dict[str, Any]:
        self.asked.append((partition, unclean))
        if self.error is not None:
            raise self.error
        return {"partition": partition, "leader": N2, "leader_epoch": 7, "isr": [N2], "unclean": unclean}


@pytest.fixture
def elections(monkeypatch: pytest.MonkeyPatch) -> Elections:
    recorder = Elections()
    monkeypatch.setattr(admin, "request_election", recorder)
    return recorder


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["elect-leader", *argv])


def never_asked(prompt: str) -> str:
    raise AssertionError(f"asked {prompt!r}")


def test_parsing() -> None:
    args = parse("--unclean", "3", "--json")
    parsed = (args.command, args.partition, args.unclean, args.yes, args.json)
    assert parsed == ("elect-leader", 3, True, False, True)
    assert (parse("4").unclean, parse("4").yes) == (False, False)
    assert admin.ADMIN_COMMANDS["elect-leader"] is cmd_elect_leader


def test_a_clean_election_asks_nothing_and_prints_the_new_leader(
    elections: Elections, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd_elect_leader(None, parse("5", "--json"), ask=never_asked) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert elections.asked == [(5, False)]
    expected = {"PARTITION": 5, "LEADER": N2, "LEADER-EPOCH": 7, "ISR": [N2], "UNCLEAN": "no"}
    assert json.loads(out) == [expected]
    assert err == ""


def test_the_table_shortens_node_ids(elections: Elections, capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd_elect_leader(None, parse("5"), ask=never_asked) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "b2b2b2b2" in out and N2 not in out


@pytest.mark.parametrize("answer", [None, "", "n", "no way"])  # None: no terminal to ask at
def test_unclean_without_a_confirmation_warns_and_elects_nothing(
    answer: str | None, elections: Elections, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd_elect_leader(None, parse("--unclean", "2"), ask=lambda _: answer) == 1  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert "WARNING" in err and "acknowledged" in err and "partition 2" in err
    assert "Aborted" in err and "--yes" in err and out == ""
    assert elections.asked == []


def test_unclean_confirmed_at_the_terminal(elections: Elections, capsys: pytest.CaptureFixture[str]) -> None:
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return " Y\n"

    assert cmd_elect_leader(None, parse("--unclean", "2", "--json"), ask=ask) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert elections.asked == [(2, True)] and len(prompts) == 1 and "partition 2" in prompts[0]
    assert "WARNING" in err
    assert json.loads(out)[0]["UNCLEAN"] == "yes"


def test_unclean_with_yes_warns_but_does_not_ask(
    elections: Elections, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cmd_elect_leader(None, parse("--unclean", "--yes", "2"), ask=never_asked) == 0  # type: ignore[arg-type]
    assert elections.asked == [(2, True)]
    assert "WARNING" in capsys.readouterr().err


def test_a_refused_election_is_one_line_on_stderr(
    elections: Elections, capsys: pytest.CaptureFixture[str]
) -> None:
    cause = ValueError("partition 9: no eligible replica\n(ISR [] is empty)")
    traceback = "Traceback (most recent call last):\n  ...\nValueError: ..."
    remote = RayTaskError("Controller.elect_leader", traceback, cause)  # type: ignore[no-untyped-call]
    remote = remote.as_instanceof_cause()  # type: ignore[no-untyped-call]
    for error in (remote, ValueError("partition 40 does not exist")):
        elections.error = error
        assert cmd_elect_leader(None, parse("9", "--json"), ask=never_asked) == 1  # type: ignore[arg-type]
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "Error: partition 40 does not exist" in err
    elections.error = remote
    cmd_elect_leader(None, parse("9"), ask=never_asked)  # type: ignore[arg-type]
    assert capsys.readouterr().err == "Error: partition 9: no eligible replica (ISR [] is empty)\n"
