"""`raygroups credentials`: issue or revoke a Ray-path credential (issue 49, docs/security.md).

    raygroups credentials --principal User:team-a --ttl 30d
    raygroups credentials --revoke rgc1.eyJ...

Issuing prints the credential, to give to the team's code
(`actors.connect(credential=...)`, `GroupMember(..., credential=...)`, or
RAYGROUPS_CREDENTIAL in its environment). `--ttl` is a number with a unit:
s, m, h or d (default 30d). `--revoke` makes every partition leader refuse
that credential from its next request on (service state, so it survives
restarts). Both go to the topic registry over Ray; they are the operator's
commands, run where the operator reaches the Ray cluster.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from actors.cli.tables import one_line
from actors.client.client import Client

_TTL = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def ttl_seconds(text: str) -> float:
    """`30d`, `12h`, `90m`, `3600s` in seconds; argparse's error otherwise."""
    matched = _TTL.fullmatch(text.strip())
    if matched is None:
        raise argparse.ArgumentTypeError(f"a ttl is a number and a unit (s, m, h, d), got {text!r}")
    return float(matched.group(1)) * _UNIT_S[matched.group(2)]


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "credentials", parents=[common], help="issue or revoke a Ray-path credential (docs/security.md)",
        description="Issue a credential of a principal for Ray callers, or revoke one.",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--principal", metavar="TYPE:NAME", help="issue a credential of this principal")
    action.add_argument("--revoke", metavar="CREDENTIAL", help="revoke this credential")
    p.add_argument("--ttl", type=ttl_seconds, default=ttl_seconds("30d"), help="how long it is valid (30d)")


def cmd_credentials(client: Client, args: argparse.Namespace) -> int:
    try:
        if args.revoke:
            print(f"revoked credential {client.revoke_credential(args.revoke)}")
        else:
            print(client.issue_credential(args.principal, args.ttl))
    except ValueError as exc:
        print(f"refused: {one_line(exc)}", file=sys.stderr)
        return 1
    return 0


CREDENTIAL_COMMANDS = {"credentials": cmd_credentials}
