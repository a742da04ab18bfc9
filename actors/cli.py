"""The `raygroups` command line.

One subcommand per job; `main` returns the process exit code so it can be
called from tests as well as from the console script.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raygroups",
        description="Kafka consumer groups on Ray: coordinator, CLI and offset analytics.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("demo", help="run a scripted demo scenario")
    return parser


def run_demo(args: argparse.Namespace) -> int:
    print("demo: not implemented yet")
    return 0


COMMANDS = {"demo": run_demo}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
