"""`raygroups config`: read the service's settings and change them online (issue 48).

    raygroups config get [KEY...] [--json]
    raygroups config set KEY=VALUE [KEY=VALUE...]

`get` prints every setting (or those named): the value in force, the value
the service started with, what set it (start, online, or the rolling restart
whose `--settings` did: the controller answers, from its plan and the
registry's online changes), and how it changes (online; rolling: needs a
rolling restart; fixed), with why. `set` changes online settings, all or
none (VALUE is JSON: `6000`, `true`, `1.5`, else a string), applied by every
leader within a second and kept as replicated service state
(`Client.set_config`, `actors/core/setting_keys.py`). A key that is unknown,
not changeable online or out of range is refused with the reason, exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from actors.cli.tables import print_table
from actors.client.client import Client
from actors.core.setting_keys import SettingError, parse_assignment

COLUMNS = ["KEY", "VALUE", "START-VALUE", "SET-BY", "CHANGE", "WHY"]


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "config", parents=[common], help="show the service's settings or change them online",
        description="Show settings (`get`) or change online ones (`set KEY=VALUE...`).",
    )
    p.add_argument("action", choices=("get", "set"))
    p.add_argument("items", nargs="*", metavar="KEY | KEY=VALUE")


def cmd_config(client: Client, args: argparse.Namespace) -> int:
    try:
        if args.action == "get":
            rows = client.config(args.items)
            print_table("settings", COLUMNS, [_row(r) for r in rows], args.json)
            return 0
        if not args.items:
            print("config set needs KEY=VALUE", file=sys.stderr)
            return 2
        client.set_config(dict(parse_assignment(item) for item in args.items))
    except SettingError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    print("changed: " + ", ".join(args.items))
    return 0


def _row(row: dict[str, Any]) -> list[Any]:
    return [row["key"], _text(row["value"]), _text(row["start"]), row.get("set_by", "start"), row["change"],
            row["why"]]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


CONFIG_COMMANDS = {"config": cmd_config}
