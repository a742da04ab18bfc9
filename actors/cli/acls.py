"""`raygroups acls`: the service's ACLs, with kafka-acls.sh's options (issue 49).

    raygroups acls --add --allow-principal User:alice --operation Read --group payments
    raygroups acls --add --deny-principal User:bob --operation All --group team- \
        --resource-pattern-type prefixed
    raygroups acls --add --allow-principal User:alice --consumer --topic orders --group payments
    raygroups acls --list [--group G] [--topic T] [--principal P]
    raygroups acls --remove --group payments [--allow-principal User:alice] [--force]

As kafka-acls.sh: `--operation` is repeatable (default All), `--allow-host` /
`--deny-host` default to every host (*), `--resource-pattern-type` is LITERAL
by default (ANY and MATCH for `--list` and `--remove`), `--consumer` adds
Read and Describe on each topic and Read on each group, `--cluster` is the
one CLUSTER resource. `--remove` asks before it deletes unless `--force`.
Each binding the service refuses is printed with Kafka's reason and the
command exits 1. The ACLs go to the service over Ray (`Client.create_acls`,
`describe_acls`, `delete_acls`), so this command needs no Kafka listener.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from actors.cli.tables import print_table
from actors.client.acls import AclError
from actors.client.client import Client
from coordinator.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from coordinator.errors import Errors

COLUMNS = ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]


def operation(text: str) -> Operation:
    """An --operation value as kafka-acls.sh takes them (Read, DescribeConfigs, ...), any case."""
    wanted = re.sub(r"[^a-z]", "", text.lower())
    for op in Operation:
        if op not in (Operation.UNKNOWN, Operation.ANY) and op.name.replace("_", "").lower() == wanted:
            return op
    raise argparse.ArgumentTypeError(f"invalid operation {text!r}")


def pattern_type(text: str) -> PatternType:
    try:
        return PatternType[text.strip().upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"invalid resource pattern type {text!r}") from None


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "acls", parents=[common], help="add, remove or list the service's ACLs (kafka-acls.sh)",
        description="Manage the service's ACLs with kafka-acls.sh's options (docs/security.md).",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    action.add_argument("--list", action="store_true")
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME", help="--list: whose")
    p.add_argument("--operation", action="append", type=operation, default=[], metavar="OP")
    p.add_argument("--group", action="append", default=[], metavar="GROUP")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC")
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", type=pattern_type, default=PatternType.LITERAL,
                   metavar="LITERAL|PREFIXED|ANY|MATCH")
    p.add_argument("--consumer", action="store_true", help="--add/--remove: what a consumer needs")
    p.add_argument("--force", action="store_true", help="--remove without asking")


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.GROUP, g) for g in args.group] + [(ResourceType.TOPIC, t) for t in args.topic]
    return found + ([(ResourceType.CLUSTER, CLUSTER_NAME)] if args.cluster else [])


def operations_for(args: argparse.Namespace, resource_type: ResourceType) -> list[Operation]:
    if args.consumer:
        topic = resource_type is ResourceType.TOPIC
        return [Operation.READ, Operation.DESCRIBE] if topic else [Operation.READ]
    return args.operation or [Operation.ALL]


def entries(args: argparse.Namespace) -> list[tuple[str, str, Permission]]:
    """(principal, host, permission) of every --allow-/--deny-principal."""
    return [(p, h, Permission.ALLOW) for p in args.allow_principal for h in args.allow_host or ["*"]] + [
        (p, h, Permission.DENY) for p in args.deny_principal for h in args.deny_host or ["*"]
    ]


def bindings(args: argparse.Namespace) -> list[AclBinding]:
    return [
        AclBinding(rtype, name, args.resource_pattern_type, principal, host, op, permission)
        for rtype, name in resources(args)
        for principal, host, permission in entries(args)
        for op in operations_for(args, rtype)
    ]


def filters(args: argparse.Namespace) -> list[AclFilter]:
    """--remove's filters: each resource's ACLs, narrowed to the principals and operations given."""
    hosts_given = bool(args.allow_host or args.deny_host)
    principals: list[tuple[str | None, str | None, Permission]] = [
        (p, h if hosts_given else None, perm) for p, h, perm in entries(args)
    ] or [(None, None, Permission.ANY)]
    return [
        AclFilter(rtype, name, args.resource_pattern_type, principal, host, op, permission)
        for rtype, name in resources(args)
        for principal, host, permission in principals
        for op in (operations_for(args, rtype) if args.operation or args.consumer else [Operation.ANY])
    ]


def rows(acls: list[AclBinding]) -> list[list[Any]]:
    return [[a.resource_type.name, a.name, a.pattern_type.name, a.principal, a.host, a.operation.name,
             a.permission.name] for a in acls]


def cmd_acls(client: Client, args: argparse.Namespace) -> int:
    if args.list:
        return _list(client, args)
    if not resources(args):
        print("name a resource: --group, --topic or --cluster", file=sys.stderr)
        return 2
    if args.add:
        return _add(client, args)
    return _remove(client, args)


def _add(client: Client, args: argparse.Namespace) -> int:
    wanted = bindings(args)
    if not wanted:
        print("--add needs --allow-principal or --deny-principal", file=sys.stderr)
        return 2
    results = client.create_acls(wanted)
    table = [[*row, e.name, m] for row, (e, m) in zip(rows(wanted), results, strict=True)]
    print_table("ACLs added", [*COLUMNS, "RESULT", "WHY"], table, args.json)
    return 0 if all(e is Errors.NONE for e, _ in results) else 1


def _list(client: Client, args: argparse.Namespace) -> int:
    pattern = args.resource_pattern_type if resources(args) else PatternType.ANY
    wanted = [AclFilter(rtype, name, pattern) for rtype, name in resources(args)] or [AclFilter()]
    found: dict[AclBinding, None] = {}
    try:
        for f in wanted:
            found.update(dict.fromkeys(client.describe_acls(f)))
    except AclError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    listed = [a for a in found if not args.principal or a.principal in args.principal]
    print_table("ACLs", COLUMNS, rows(listed), args.json)
    return 0


def _remove(client: Client, args: argparse.Namespace) -> int:
    wanted = filters(args)
    if not args.force:
        names = ", ".join(f"{r.name} {n}" for r, n in resources(args))
        if input(f"Are you sure you want to remove ACLs of {names}? (y/n) ").strip().lower() != "y":
            return 1
    results = client.delete_acls(wanted)
    removed = [a for e, _, acls in results if e is Errors.NONE for a in acls]
    print_table("ACLs removed", COLUMNS, rows(removed), args.json)
    for error, why, _ in results:
        if error is not Errors.NONE:
            print(f"refused: {error.name}: {why}", file=sys.stderr)
    return 0 if all(e is Errors.NONE for e, _, _ in results) else 1


ACL_COMMANDS = {"acls": cmd_acls}
