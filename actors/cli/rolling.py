"""`raygroups rolling-restart`: restart the whole service one node at a time while it runs (issue 48).

    raygroups rolling-restart [--runtime-env JSON] [--settings KEY=VALUE ...] [--no-wait]
    raygroups rolling-restart --resume
    raygroups rolling-restart --stop
    raygroups rolling-restart --status

The controller drives it (`actors.controller.rolling`): per node, leadership off it, its
replicas restarted (with `--runtime-env`, Ray's runtime environment, and `--settings`,
online or rolling keys, VALUE as JSON), back in the ISR before the next; then the
controller, the topic registry and the Kafka gateways deployed with the service (one at
a time, each serving again at its address before the next). While a node's exit would
leave a partition below min ISR, or a node is down, or a replica is being recreated, it
waits (WAITING says for what; the command prints it as it changes) and goes on by
itself. It stops for good only when a node's new replicas do not come back on a healthy
cluster (new code or settings that do not start), a gateway that does not serve again
after 3 tries, or on `--stop`; `--resume` (or a new roll) goes on.
Exit 0 when done (or started, `--no-wait`; or `--status`, `--stop`), 1 when refused or
stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from actors.cli.tables import one_line, print_table
from actors.client.client import Client
from actors.core.setting_keys import SettingError, parse_assignment

COLUMNS = ["VERSION", "PHASE", "NODES-DONE", "NODE-RESTARTED", "WAITING", "STOPPED", "SETTINGS",
           "RUNTIME-ENV", "CONTROLLER-VERSION"]


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "rolling-restart", parents=[common],
        help="restart every replica one node at a time, then the controller, the registry, the gateways",
        description="Restart the service while it runs, as a Kafka cluster is rolled one broker at "
        "a time: per node, leadership moved off it, its replicas restarted with the new runtime "
        "environment and settings, back in the ISR before the next node; then the controller, "
        "the topic registry and the deployed Kafka gateways, one at a time (docs/operations.md). "
        "Waits, saying why, rather than take a partition "
        "below min ISR, and goes on by itself once the cluster healed; stops for good only when "
        "new replicas or a gateway do not come back, or on --stop; --resume goes on.",
    )
    p.add_argument("--runtime-env", metavar="JSON", help="Ray runtime_env of the new replicas (JSON object)")
    p.add_argument("--settings", nargs="+", default=[], metavar="KEY=VALUE",
                   help="settings the restarted actors start with (online or rolling keys)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--resume", action="store_true", help="go on with a stopped rolling restart")
    what.add_argument("--stop", action="store_true", help="stop the rolling restart under way for good")
    what.add_argument("--status", action="store_true", help="show the last rolling restart and return")
    p.add_argument("--no-wait", action="store_true", help="return once it has started")


def cmd_rolling_restart(client: Client, args: argparse.Namespace) -> int:
    if args.status:
        _print(client.rolling_status(), args.json)
        return 0
    if args.stop:
        try:
            _print(client.rolling_stop(), args.json)
        except Exception as exc:  # RollRefused (none under way), wrapped in Ray's error
            print(f"rolling-restart --stop refused: {one_line(exc)}", file=sys.stderr)
            return 1
        return 0
    try:
        runtime_env = None if args.runtime_env is None else json.loads(args.runtime_env)
        settings = dict(parse_assignment(item) for item in args.settings)
    except (ValueError, SettingError) as exc:
        print(f"rolling-restart refused: {exc}", file=sys.stderr)
        return 2
    if args.resume and (runtime_env is not None or settings):
        print("rolling-restart: --resume goes on with the recorded plan; give no --runtime-env or "
              "--settings", file=sys.stderr)
        return 2
    try:
        status = client.rolling_restart(runtime_env, settings, resume=args.resume, wait=not args.no_wait,
                                        progress=_progress)
    except Exception as exc:  # a refusal (RollRefused) arrives wrapped in Ray's error
        print(f"rolling-restart refused: {one_line(exc)}", file=sys.stderr)
        return 1
    _print(status, args.json)
    if status.get("stopped"):
        print(f"rolling restart stopped: {status['stopped']}; fix it, then: raygroups rolling-restart "
              "--resume (or a new rolling-restart)", file=sys.stderr)
        return 1
    return 0


def _print(status: dict[str, Any], as_json: bool) -> None:
    if status.get("phase") is None:
        print_table("rolling restart", COLUMNS, [], as_json)
        return
    row = [
        status["version"], status["phase"], f"{status['nodes_done']}/{status['nodes_total']}",
        status["restarted"], status.get("waiting"), status["stopped"], json.dumps(status["settings"]),
        None if status["runtime_env"] is None else json.dumps(status["runtime_env"]),
        status.get("controller_version"),
    ]
    print_table("rolling restart", COLUMNS, [row], as_json)


def _progress(status: dict[str, Any]) -> None:
    if status.get("waiting"):
        label = "paused" if status.get("paused") else "waiting"
        print(f"rolling restart {label}: {status['waiting']}", file=sys.stderr)


ROLLING_COMMANDS = {"rolling-restart": cmd_rolling_restart}
