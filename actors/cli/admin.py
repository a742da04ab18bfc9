"""The admin commands of `raygroups`, modelled on kafka-consumer-groups.sh.

`list`, `describe GROUP` (its own module, `describe_cli`), `delete GROUP`,
`reset-offsets`/`delete-offsets` (`reset_cli`), `reassign PARTITION`, `status`, `elect-leader
PARTITION`: each prints a table through `table_output` (a terminal table, or
plain aligned text when not on a terminal), or JSON with `--json`. They talk
to a running service through `actors.connect()`. Warnings and errors that are
not the command's result go to stderr, so that `--json` output stays
parseable and the plain tables greppable.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import Any

import ray

# DESCRIBE_COLUMNS and describe_rows are re-exported: the demo prints the describe table.
from actors.cli.acls import ACL_COMMANDS
from actors.cli.acls import add_parser as add_acls_parser
from actors.cli.config import CONFIG_COMMANDS
from actors.cli.config import add_parser as add_config_parser
from actors.cli.credentials import CREDENTIAL_COMMANDS
from actors.cli.credentials import add_parser as add_credentials_parser
from actors.cli.describe import DESCRIBE_COLUMNS as DESCRIBE_COLUMNS
from actors.cli.describe import add_parser as add_describe_parser
from actors.cli.describe import cmd_describe
from actors.cli.describe import describe_rows as describe_rows
from actors.cli.reset import RESET_COMMANDS
from actors.cli.reset import add_parsers as add_reset_parsers
from actors.cli.rolling import ROLLING_COMMANDS
from actors.cli.rolling import add_parser as add_rolling_parser
from actors.cli.status_table import (
    capacity_table,
    failing,
    hot,
    node_text,
    nodes_text,
    status_table,
    under_replicated,
)
from actors.cli.tables import one_line, print_table
from actors.client.client import Client
from coordinator import Errors
from coordinator.messages import GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER

GROUP_TYPES = (GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER)


def cmd_list(client: Client, args: argparse.Namespace) -> int:
    """Every group with its type ("classic" or "consumer", Kafka's `--list --type`), state,
    protocol type and live health; `--state` and `--type` filter (repeatable, case-insensitive)."""
    groups = client.list_groups(args.state or (), args.type or ())
    # Live health (coordinator/lag.py) of the groups with committed offsets; "-" for the others.
    health = {g.group_id: g.health.name for g in client.lag(None, partitions=False)} if groups else {}
    print_table(
        "consumer groups",
        ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "HEALTH"],
        [[g.group_id, g.group_type, g.state, g.protocol_type, health.get(g.group_id)] for g in groups],
        args.json,
    )
    return 0


def group_type(text: str) -> str:
    """A `--type` value: Kafka's tool accepts "classic" and "consumer", in any case."""
    lowered = text.strip().lower()
    if lowered not in GROUP_TYPES:
        raise argparse.ArgumentTypeError(f"invalid type {text!r}: valid types are {', '.join(GROUP_TYPES)}")
    return lowered


def cmd_delete(client: Client, args: argparse.Namespace) -> int:
    results = client.delete_groups(args.groups)
    print_table("deletion", ["GROUP", "RESULT"], [[g, e.name] for g, e in results.items()], args.json)
    return 0 if all(e is Errors.NONE for e in results.values()) else 1


def cmd_reassign(client: Client, args: argparse.Namespace) -> int:
    epoch = client.reassign(args.partition, args.node)
    print_table("reassignment", ["PARTITION", "NEW-EPOCH"], [[args.partition, epoch]], args.json)
    return 0


def cmd_status(client: Client, args: argparse.Namespace) -> int:
    """One row per partition (columns: `status_table`). A leader that refuses to
    serve (its log is missing or behind what the partition acknowledged) says
    why; an offline partition has no leader. Either makes the command exit 1
    so scripts notice; an under-replicated one is reported but serves."""
    partitions = client.status()
    columns, rows = status_table(partitions, whole=args.json)
    print_table("offsets partitions", columns, rows, args.json)
    offline, refused = failing(partitions)
    if not args.json:
        waiting = [row.get("partition") for row in partitions if row.get("awaited_node")]
        held = {row.get("partition"): row["held"] for row in partitions if row.get("held")}
        lost_isr = [p for p in offline if p not in waiting and p not in held]
        _print_status_notes(lost_isr, waiting, refused, under_replicated(partitions))
        _print_held_notes(held)
    return 1 if offline or refused else 0


def cmd_capacity(client: Client, args: argparse.Namespace) -> int:
    """Each partition's request rate against the rate docs/capacity.md plans it at
    (`capacity_table`); a note on stderr names the hot ones and what to do."""
    partitions = client.status()
    columns, rows = capacity_table(partitions, whole=args.json)
    print_table("offsets partitions' load", columns, rows, args.json)
    over = hot(partitions)
    if over and not args.json:
        print(
            f"partitions {over} serve more requests than planned (docs/capacity.md): their groups "
            "cannot be split; lengthen their members' heartbeat intervals, or, if many groups share "
            "one, grow the partition count (raygroups repartition --partitions N)",
            file=sys.stderr,
        )
    return 0


def _print_status_notes(
    offline: list[Any], waiting: list[Any], refused: list[Any], lagging: list[Any]
) -> None:
    """On stderr, as every note that is not the command's result (the table stays greppable)."""
    if offline:
        print(
            f"partitions {offline} are offline: no replica of the ISR is alive to lead. Bring one back; "
            "as a last resort, losing acknowledged commits: raygroups elect-leader --unclean PARTITION",
            file=sys.stderr,
        )
    if waiting:
        print(
            f"partitions {waiting} are offline until their node (NODE) is back: their only copy is on "
            "its disk. Start it again; or copy the log to another node and "
            "raygroups reassign PARTITION --node NODE_ID",
            file=sys.stderr,
        )
    if refused:
        print(
            f"partitions {refused} refuse to serve: reassign each to a node that holds its log "
            "(raygroups reassign PARTITION --node NODE_ID)",
            file=sys.stderr,
        )
    if lagging:
        print(
            f"partitions {lagging} are under-replicated: their ISR is smaller than their replicas",
            file=sys.stderr,
        )


def _print_held_notes(held: Mapping[Any, str]) -> None:
    """Each partition a full restart left ambiguous: why, and the operator's choice."""
    for partition, reason in held.items():
        print(
            f"partition {partition} is held after a full restart: {reason}. Choose the replica whose "
            f"log becomes the partition's (acknowledged commits only others hold are lost): "
            f"raygroups elect-leader --unclean [--node NODE] {partition}",
            file=sys.stderr,
        )


UNCLEAN_WARNING = (
    "WARNING: an unclean election may make a replica outside the ISR the leader of partition {p}. "
    "Offset commits acknowledged to consumers that this replica lacks are lost, and the other "
    "replicas truncate their logs to the new leader's."
)
ELECTION_COLUMNS = ["PARTITION", "LEADER", "LEADER-EPOCH", "ISR", "UNCLEAN"]


def cmd_elect_leader(
    client: Client, args: argparse.Namespace, ask: Callable[[str], str | None] | None = None
) -> int:
    """Elect a leader for a partition now, from its ISR (as Kafka's preferred
    election picks the first eligible replica); `--unclean` from any live replica,
    after a warning and a confirmation (`--yes`, or an answer at the terminal)."""
    if args.unclean:
        print(UNCLEAN_WARNING.format(p=args.partition), file=sys.stderr)
        if not (args.yes or _confirmed(args.partition, ask or _ask_terminal)):
            print("Aborted: no election (pass --yes to confirm without a terminal).", file=sys.stderr)
            return 1
    try:
        result = request_election(client, args.partition, args.unclean, args.node)
    except ValueError as exc:
        print(f"Error: {one_line(exc)}", file=sys.stderr)
        return 1
    print_table("leader election", ELECTION_COLUMNS, [election_row(result, args.json)], args.json)
    return 0


def request_election(
    client: Client, partition: int, unclean: bool, node: str | None = None
) -> dict[str, Any]:
    """The controller elects and answers the partition's new leadership; the
    client's routing is refreshed so the next request finds the new leader."""
    elected = client.controller.elect_leader.remote(partition, unclean, node, credential=client.credential)
    result: dict[str, Any] = ray.get(elected)
    client.refresh()
    return result


def election_row(result: Mapping[str, Any], whole: bool) -> list[Any]:
    return [
        result.get("partition"),
        node_text(result.get("leader"), whole),
        result.get("leader_epoch"),
        nodes_text(result.get("isr"), whole),
        "yes" if result.get("unclean") else "no",
    ]


def _confirmed(partition: int, ask: Callable[[str], str | None]) -> bool:
    answer = ask(f"Elect an unclean leader for partition {partition}? [y/N] ")
    return (answer or "").strip().lower() in ("y", "yes")


def _ask_terminal(prompt: str) -> str | None:
    """The operator's answer, or None when nobody is at a terminal to give one."""
    if not sys.stdin.isatty():
        return None
    try:
        return input(prompt)
    except EOFError:
        return None


def cmd_repartition(client: Client, args: argparse.Namespace) -> int:
    """Change the offsets partition count online; waits until done unless --no-wait."""
    try:
        status = client.repartition(args.partitions, wait=not args.no_wait)
    except Exception as exc:  # a refusal (RepartitionRefused) arrives wrapped in Ray's error
        print(f"repartition refused: {one_line(exc)}", file=sys.stderr)
        return 1
    rows = [[status["partitions"], status["version"], "running" if status["running"] else "done"]]
    print_table("repartition", ["PARTITIONS", "VERSION", "STATE"], rows, args.json)
    return 0


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("list", parents=[common], help="list consumer groups")
    p.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    p.add_argument(
        "--type", action="append", type=group_type,
        help="only groups of this type: classic or consumer (repeatable)",
    )
    add_describe_parser(commands, common)
    p = commands.add_parser("delete", parents=[common], help="delete Empty consumer groups")
    p.add_argument("groups", nargs="+")
    add_reset_parsers(commands, common)
    add_acls_parser(commands, common)
    add_credentials_parser(commands, common)
    add_config_parser(commands, common)
    p = commands.add_parser("reassign", parents=[common], help="move a partition's leadership")
    p.add_argument("partition", type=int)
    p.add_argument("--node", help="Ray node id to move it to")
    commands.add_parser(
        "status", parents=[common], help="partitions, leaders, replicas, ISR, high watermarks, load state"
    )
    commands.add_parser(
        "capacity", parents=[common],
        help="each partition's requests/s against the rate the capacity guide plans it at",
    )
    p = commands.add_parser(
        "elect-leader",
        parents=[common],
        help="elect a partition's leader from its ISR (--unclean: from any live replica)",
        description="Elect a leader for PARTITION from its in-sync replicas, as "
        "kafka-leader-election does. --unclean elects any live replica, as "
        "kafka-leader-election --election-type unclean: acknowledged offset commits the new "
        "leader lacks are lost. Unlike Kafka's tool this asks for confirmation first "
        "(or --yes), because the loss cannot be undone; the service itself never elects uncleanly.",
    )
    p.add_argument("partition", type=int, metavar="PARTITION")
    p.add_argument(
        "--unclean", action="store_true", help="elect outside the ISR: may lose acknowledged commits"
    )
    p.add_argument("--yes", action="store_true", help="confirm --unclean without asking")
    p.add_argument("--node", help="with --unclean: the replica (node name) that leads")
    p = commands.add_parser(
        "repartition", parents=[common],
        help="change the offsets partition count while the service runs (a multiple or divisor of today's)",
        description="Grow the offsets partitions to --partitions (a multiple of today's count), or "
        "shrink them to a divisor, under load: each partition whose groups move hands them to their "
        "new partitions, whole, one fenced handoff each; a shrink then retires the emptied "
        "partitions (docs/capacity.md).",
    )
    p.add_argument("--partitions", type=int, required=True, help="the new count")
    p.add_argument("--no-wait", action="store_true", help="return once it has started")
    add_rolling_parser(commands, common)


ADMIN_COMMANDS = {
    "list": cmd_list,
    "describe": cmd_describe,
    "delete": cmd_delete,
    **RESET_COMMANDS,
    **ACL_COMMANDS,
    **CREDENTIAL_COMMANDS,
    **CONFIG_COMMANDS,
    "reassign": cmd_reassign,
    "status": cmd_status,
    "capacity": cmd_capacity,
    "elect-leader": cmd_elect_leader,
    "repartition": cmd_repartition,
    **ROLLING_COMMANDS,
}
