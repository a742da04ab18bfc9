"""`raygroups rolling-restart`'s arguments and answers, over a stub client (no Ray): JSON
and KEY=VALUE parsed at the boundary, refusals and a stopped roll exit 1 with the reason,
what a roll waits for printed as it changes, `--stop`."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from actors.cli.rolling import add_parser, cmd_rolling_restart

DONE = {
    "running": False, "version": 1, "phase": "done", "nodes": ["a", "b"], "done": ["a", "b"],
    "restarted": None, "stopped": None, "settings": {"commit_timeout_ms": 7000},
    "runtime_env": {"pip": ["x"]}, "nodes_done": 2, "nodes_total": 2, "controller_version": "0.2.0",
}


class StubClient:
    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    def rolling_restart(
        self, runtime_env: Any, settings: Any, resume: bool, wait: bool, progress: Any = None
    ) -> dict[str, Any]:
        self.calls.append((runtime_env, settings, resume, wait))
        if isinstance(self.answer, Exception):
            raise self.answer
        if progress is not None:
            progress({**DONE, "running": True, "waiting": "node b is not live", "paused": True})
        return self.answer

    def rolling_stop(self) -> dict[str, Any]:
        self.calls.append(("stop",))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def rolling_status(self) -> dict[str, Any]:
        return DONE


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true")
    add_parser(parser.add_subparsers(dest="command"), common)
    return parser.parse_args(["rolling-restart", "--json", *argv])


def test_runtime_env_and_settings_reach_the_client_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    client = StubClient(DONE)
    args = parse("--runtime-env", '{"pip": ["x"]}', "--settings", "commit_timeout_ms=7000", "fsync=false")
    assert cmd_rolling_restart(client, args) == 0  # type: ignore[arg-type]
    assert client.calls == [({"pip": ["x"]}, {"commit_timeout_ms": 7000, "fsync": False}, False, True)]
    [row] = json.loads(capsys.readouterr().out)
    assert row["PHASE"] == "done" and row["NODES-DONE"] == "2/2" and row["CONTROLLER-VERSION"] == "0.2.0"


def test_bad_json_and_resume_with_new_values_are_refused_before_any_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = StubClient(DONE)
    assert cmd_rolling_restart(client, parse("--runtime-env", "{pip")) == 2  # type: ignore[arg-type]
    assert cmd_rolling_restart(client, parse("--settings", "novalue")) == 2  # type: ignore[arg-type]
    assert cmd_rolling_restart(client, parse("--resume", "--settings", "fsync=true")) == 2  # type: ignore[arg-type]
    assert client.calls == []
    assert "refused" in capsys.readouterr().err


def test_a_refusal_and_a_stopped_roll_exit_1_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    refused = StubClient(ValueError("not now: partition 2: below min ISR 2"))
    assert cmd_rolling_restart(refused, parse()) == 1  # type: ignore[arg-type]
    assert "below min ISR 2" in capsys.readouterr().err
    stopped = StubClient({**DONE, "running": False, "phase": "replicas", "stopped": "node b is not live"})
    assert cmd_rolling_restart(stopped, parse("--resume")) == 1  # type: ignore[arg-type]
    assert stopped.calls == [(None, {}, True, True)]
    assert "node b is not live" in capsys.readouterr().err


def test_what_it_waits_for_is_printed_and_stop_asks_the_controller(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = StubClient(DONE)
    assert cmd_rolling_restart(client, parse()) == 0  # type: ignore[arg-type]
    assert "rolling restart paused: node b is not live" in capsys.readouterr().err
    stopped = {**DONE, "phase": "replicas", "stopped": "stopped by an operator (rolling-restart --stop)"}
    stopper = StubClient(stopped)
    assert cmd_rolling_restart(stopper, parse("--stop")) == 0  # type: ignore[arg-type]
    [row] = json.loads(capsys.readouterr().out)
    assert stopper.calls == [("stop",)] and row["STOPPED"].startswith("stopped by an operator")
    with pytest.raises(SystemExit):  # one of --resume, --stop, --status
        parse("--stop", "--resume")
    nothing = StubClient(ValueError("no rolling restart under way"))
    assert cmd_rolling_restart(nothing, parse("--stop")) == 1  # type: ignore[arg-type]
    assert "no rolling restart under way" in capsys.readouterr().err
