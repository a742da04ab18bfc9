"""The admin commands of `raygroups`, modelled on kafka-consumer-groups.sh.

`list`, `describe GROUP`, `delete GROUP`, `reset-offsets GROUP`, `reassign
PARTITION`, `status`: each prints an aligned table, or JSON with `--json`.
They talk to a running service through `actors.connect()`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from actors.client import Client
from coordinator import Errors
from coordinator.consumer_protocol import decode_assignment
from coordinator.topic_partition import TopicPartition

console = Console()


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps([dict(zip(columns, row)) for row in rows], indent=1, default=str))
        return
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    console.print(table)


def describe_rows(client: Client, group_ids: Sequence[str]) -> list[list[Any]]:
    """GROUP TOPIC PARTITION CURRENT-OFFSET CONSUMER-ID HOST CLIENT-ID, per partition."""
    rows: list[list[Any]] = []
    for described in client.describe_groups(group_ids):
        owners: dict[tuple[str, int], Any] = {}
        for member in described.members:
            for tp in _assigned_partitions(member.assignment):
                owners[(tp.topic, tp.partition)] = member
        committed = {
            (p.topic, p.partition): p.offset for p in client.fetch_offsets(described.group_id).partitions
        }
        for topic, partition in sorted(set(committed) | set(owners)):
            member = owners.get((topic, partition))
            rows.append(
                [
                    described.group_id,
                    described.state,
                    topic,
                    partition,
                    committed.get((topic, partition)),
                    member.member_id if member else None,
                    member.client_host if member else None,
                    member.client_id if member else None,
                ]
            )
        if not committed and not owners:
            rows.append([described.group_id, described.state, None, None, None, None, None, None])
    return rows


DESCRIBE_COLUMNS = [
    "GROUP",
    "STATE",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
]


def cmd_list(client: Client, args: argparse.Namespace) -> int:
    groups = client.list_groups(args.state or ())
    print_table(
        "consumer groups",
        ["GROUP", "STATE", "PROTOCOL-TYPE"],
        [[g.group_id, g.state, g.protocol_type] for g in groups],
        args.json,
    )
    return 0


def cmd_describe(client: Client, args: argparse.Namespace) -> int:
    described = client.describe_groups(args.groups)
    if all(d.state == "Dead" for d in described):
        console.print(f"Consumer group(s) {', '.join(args.groups)} do not exist.")
        return 1
    if args.members:
        rows = [
            [
                d.group_id,
                d.state,
                d.protocol,
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                _assignment_text(m.assignment),
            ]
            for d in described
            for m in d.members
        ]
        print_table(
            "members",
            [
                "GROUP",
                "STATE",
                "PROTOCOL",
                "CONSUMER-ID",
                "GROUP-INSTANCE-ID",
                "CLIENT-ID",
                "HOST",
                "ASSIGNMENT",
            ],
            rows,
            args.json,
        )
        return 0
    print_table("consumer group offsets", DESCRIBE_COLUMNS, describe_rows(client, args.groups), args.json)
    return 0


def _assigned_partitions(assignment: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a consumer-protocol assignment; none for other payloads."""
    if not assignment:
        return ()
    try:
        return decode_assignment(assignment).partitions
    except ValueError:
        return ()


def _assignment_text(assignment: bytes) -> str:
    parts = _assigned_partitions(assignment)
    if assignment and not parts:
        return f"<{len(assignment)} bytes>"
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in parts)


def cmd_delete(client: Client, args: argparse.Namespace) -> int:
    results = client.delete_groups(args.groups)
    print_table("deletion", ["GROUP", "RESULT"], [[g, e.name] for g, e in results.items()], args.json)
    return 0 if all(e is Errors.NONE for e in results.values()) else 1


def new_offsets(current: dict[tuple[str, int], int], args: argparse.Namespace) -> dict[tuple[str, int], int]:
    """Kafka's reset specs over the group's committed partitions (earliest = 0 here)."""
    chosen = {tp: o for tp, o in current.items() if args.topic is None or tp[0] == args.topic}
    if args.to_earliest:
        return {tp: 0 for tp in chosen}
    if args.to_offset is not None:
        return {tp: args.to_offset for tp in chosen}
    return {tp: max(0, o + args.shift_by) for tp, o in chosen.items()}


def cmd_reset_offsets(client: Client, args: argparse.Namespace) -> int:
    [described] = client.describe_groups([args.group])
    if described.state not in ("Empty", "Dead"):
        console.print(
            f"Error: Assignments can only be reset if the group '{args.group}' is inactive, "
            f"but the current state is {described.state}."
        )
        return 1
    current = client.fetch_offsets(args.group).offsets()
    target = new_offsets(current, args)
    rows = [[args.group, t, p, current.get((t, p)), o] for (t, p), o in sorted(target.items())]
    print_table(
        "offsets " + ("reset" if args.execute else "(dry run: add --execute)"),
        ["GROUP", "TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET"],
        rows,
        args.json,
    )
    if args.execute and target:
        response = client.commit_offsets(args.group, target)
        failed = [p for p in response.partitions if p.error is not Errors.NONE]
        if failed:
            console.print(f"Error: {failed}")
            return 1
    return 0


def cmd_reassign(client: Client, args: argparse.Namespace) -> int:
    epoch = client.reassign(args.partition, args.node)
    print_table("reassignment", ["PARTITION", "NEW-EPOCH"], [[args.partition, epoch]], args.json)
    return 0


STATUS_COLUMNS = [
    "PARTITION", "EPOCH", "STATE", "NODE", "GROUPS", "MEMBERS", "LOG-END", "LOAD-MS", "REFUSED", "FAILURE"
]
# A failure is shown whole with --json; the table keeps a line per partition.
FAILURE_WIDTH = 80


def cmd_status(client: Client, args: argparse.Namespace) -> int:
    """One row per partition; a leader that refuses to serve (its log is
    missing or behind what the partition acknowledged) says why, and the
    command then exits 1 so scripts notice."""
    partitions = client.status()
    rows = [
        [
            p.get("partition"),
            p.get("epoch"),
            p.get("state"),
            (p.get("node_id") or "")[:12],
            p.get("groups"),
            p.get("members"),
            p.get("durable_end"),
            p.get("load_ms"),
            "yes" if p.get("refused") else "no",
            _failure_text(p.get("failure"), args.json),
        ]
        for p in partitions
    ]
    print_table(
        "offsets partitions",
        STATUS_COLUMNS,
        rows,
        args.json,
    )
    refused = [p.get("partition") for p in partitions if p.get("refused")]
    if refused and not args.json:
        console.print(
            f"partitions {refused} refuse to serve: reassign each to a node that holds its log "
            "(raygroups reassign PARTITION --node NODE_ID)"
        )
    return 1 if refused else 0


def _failure_text(failure: Any, whole: bool) -> Any:
    if failure is None or whole:
        return failure
    text = str(failure)
    return text if len(text) <= FAILURE_WIDTH else text[: FAILURE_WIDTH - 3] + "..."


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("list", parents=[common], help="list consumer groups")
    p.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    p = commands.add_parser("describe", parents=[common], help="describe consumer groups")
    p.add_argument("groups", nargs="+")
    p.add_argument("--members", action="store_true", help="one row per member with its assignment")
    p = commands.add_parser("delete", parents=[common], help="delete Empty consumer groups")
    p.add_argument("groups", nargs="+")
    p = commands.add_parser("reset-offsets", parents=[common], help="reset an inactive group's offsets")
    p.add_argument("group")
    spec = p.add_mutually_exclusive_group(required=True)
    spec.add_argument("--to-earliest", action="store_true")
    spec.add_argument("--to-offset", type=int)
    spec.add_argument("--shift-by", type=int)
    p.add_argument("--topic")
    p.add_argument("--execute", action="store_true")
    p = commands.add_parser("reassign", parents=[common], help="move a partition's leadership")
    p.add_argument("partition", type=int)
    p.add_argument("--node", help="Ray node id to move it to")
    commands.add_parser("status", parents=[common], help="partitions, leaders, epochs, load state")


ADMIN_COMMANDS = {
    "list": cmd_list,
    "describe": cmd_describe,
    "delete": cmd_delete,
    "reset-offsets": cmd_reset_offsets,
    "reassign": cmd_reassign,
    "status": cmd_status,
}
