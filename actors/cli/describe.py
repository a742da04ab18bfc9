"""`raygroups describe`: kafka-consumer-groups.sh --describe, live from the service.

Groups of both types (classic and KIP-848 consumer groups, `group_views.py`),
three views with the columns of Kafka 4.x's ConsumerGroupCommand, one table
per group in name order (`--all-groups`: every group the service lists):
- offsets (default, or `--offsets`): GROUP TOPIC PARTITION CURRENT-OFFSET
  LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID. First the partitions each
  member is assigned (members holding the most partitions first), then the
  partitions with a committed offset that no member holds ("-" for the
  consumer). A committed partition's CURRENT-OFFSET, LOG-END-OFFSET and LAG
  are the coordinator's live lag (`Client.lag`, coordinator/lag.py), the
  figures `raygroups lag --live` prints: the registry's latest end offset
  ("-" where none was reported: unknown), and LAG end minus current, never
  below 0 (an end offset reported before the commit gives 0, flagged
  `ahead` by `lag --live`; Kafka's `getLag` would print it negative). An
  assigned partition without a commit shows the registry's end offset.
- `--members [--verbose]`: GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST
  CLIENT-ID #PARTITIONS, and with `--verbose` CURRENT-EPOCH
  CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT: a consumer group's
  member epoch and what it owns, the group's target assignment epoch and
  what the target gives the member; "-" for the epochs and the target of a
  classic group's members, as Kafka prints them. Assignments are written as
  modern Kafka writes them (`orders:0,1;payments:2`): no blank, so each
  stays one awk field. UPGRADED (true for a consumer-protocol member) is
  added when a consumer group has members of both protocols (online
  migration). GROUP-INSTANCE-ID appears when a member has one; `--json`
  always has every column.
- `--state [--verbose]`: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE
  [GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH] #MEMBERS HEALTH (the live health of
  its committed offsets, coordinator/lag.py; "-" without any). The coordinator is the
  offsets partition that owns the group and the Ray node its leader runs on,
  `offsets-<p>@<node>` (Kafka: the broker `host:port (id)`). A consumer
  group's strategy is its server assignor (uniform, range); the two epochs
  come with `--verbose`, "-" for a classic group (`--json`: always, null).

Kafka's notes go to stderr so that tables and `--json` stay clean: "Consumer
group 'G' has no active members." (Empty), "Warning: Consumer group 'G' is
rebalancing." (PreparingRebalance, CompletingRebalance, Assigning,
Reconciling), and for a group that does not exist "Error: Consumer group 'G'
does not exist.", which also makes the command exit 1 (the other groups are
still described).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from actors.cli.group_views import DEAD, GroupView, MemberView, describe_views, partitions_text
from actors.cli.status_table import node_text
from actors.cli.tables import print_tables
from actors.client.client import Client
from coordinator.lag import PartitionLag

DESCRIBE_COLUMNS = [
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
    "CLIENT-ID",
]
MEMBER_COLUMNS = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
VERBOSE_MEMBER_COLUMNS = ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
UPGRADED_COLUMN = "UPGRADED"
STATE_COLUMNS = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS", "HEALTH"]
EPOCH_COLUMNS = ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
EXIT_OK, EXIT_NO_GROUP, EXIT_USAGE = 0, 1, 2
Sections = list[tuple[str, list[list[Any]]]]


def cmd_describe(client: Client, args: argparse.Namespace) -> int:
    """`raygroups describe GROUP... | --all-groups [--offsets | --members | --state] [--verbose]`."""
    if bool(args.groups) == bool(args.all_groups):
        print("Error: describe takes GROUP names or --all-groups, one of the two.", file=sys.stderr)
        return EXIT_USAGE
    described = describe_views(client, _group_ids(client, args))
    missing = [d.group_id for d in described if d.state == DEAD]
    live = [d for d in described if d.state != DEAD]
    for group in described:
        _note(group)
    if args.members:
        columns, sections = member_sections(live, bool(args.json), args.verbose)
    elif args.state:
        health = {g.group_id: g.health.name for g in client.lag([g.group_id for g in live], partitions=False)}
        columns, sections = state_sections(
            live, client.status(), client.partition_for, whole=bool(args.json), verbose=args.verbose,
            health=health,
        )
    else:
        columns, sections = DESCRIBE_COLUMNS, offset_sections(client, live)
    if any(rows for _, rows in sections) or args.json:
        print_tables(columns, sections, args.json)
    return EXIT_NO_GROUP if missing and not args.all_groups else EXIT_OK


def _group_ids(client: Client, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [listed.group_id for listed in client.list_groups()]
    return list(dict.fromkeys(args.groups))


def _note(group: GroupView) -> None:
    """Kafka's `shouldPrintMemberState` notes, on stderr."""
    if group.state == DEAD:
        print(f"Error: Consumer group '{group.group_id}' does not exist.", file=sys.stderr)
    elif group.state == "Empty":
        print(f"Consumer group '{group.group_id}' has no active members.", file=sys.stderr)
    elif group.state in REBALANCING:
        print(f"Warning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr)


# ------------------------------------------------------------------ offsets


def describe_rows(client: Client, group_ids: Sequence[str]) -> list[list[Any]]:
    """The offsets view of these groups as one list of rows (DESCRIBE_COLUMNS)."""
    live = [d for d in describe_views(client, group_ids) if d.state != DEAD]
    return [row for _, rows in offset_sections(client, live) for row in rows]


def offset_sections(client: Client, groups: Sequence[GroupView]) -> Sections:
    lagged = {g.group_id: g for g in client.lag([g.group_id for g in groups])} if groups else {}
    committed: dict[str, dict[tuple[str, int], PartitionLag]] = {
        g.group_id: {(p.topic, p.partition): p for p in lagged[g.group_id].partitions} if g.group_id in lagged
        else {}
        for g in groups
    }
    uncommitted = {
        tp.topic for g in groups for m in g.members for tp in m.assignment
        if (tp.topic, tp.partition) not in committed[g.group_id]
    }
    known = client.end_offsets(sorted(uncommitted)) if uncommitted else {}
    ends = {(tp.topic, tp.partition): end for tp, end in known.items()}
    return [(f"group {g.group_id}", group_offset_rows(g, committed[g.group_id], ends)) for g in groups]


def group_offset_rows(
    group: GroupView, committed: Mapping[tuple[str, int], PartitionLag], ends: Mapping[tuple[str, int], int]
) -> list[list[Any]]:
    """Kafka's `collectGroupsOffsets` for one group: assigned partitions, then unassigned commits."""
    # Kafka's order (most partitions first); ties by member id, so the output is the same
    # whichever member joined first.
    holders = [m for m in group.members if m.assignment]
    holders.sort(key=lambda m: (-len(m.assignment), m.member_id))
    rows: list[list[Any]] = []
    held: set[tuple[str, int]] = set()
    for member in holders:
        keys = sorted((tp.topic, tp.partition) for tp in member.assignment)
        held.update(keys)
        rows += [_offset_row(group.group_id, key, committed, ends, member) for key in keys]
    rows += [_offset_row(group.group_id, key, committed, ends, None) for key in sorted(set(committed) - held)]
    return rows


def _offset_row(
    group_id: str,
    key: tuple[str, int],
    committed: Mapping[tuple[str, int], PartitionLag],
    ends: Mapping[tuple[str, int], int],
    member: MemberView | None,
) -> list[Any]:
    live = committed.get(key)
    current, end, lag = (None, ends.get(key), None) if live is None else (live.committed, live.end, live.lag)
    consumer = [member.member_id, member.host, member.client_id] if member else [None, None, None]
    return [group_id, key[0], key[1], current, end, lag, *consumer]


# ------------------------------------------------------------------ members


def member_sections(groups: Sequence[GroupView], whole: bool, verbose: bool) -> tuple[list[str], Sections]:
    """Kafka's `printMembers`, one section per group; `whole` (JSON) keeps every column."""
    with_instance_id = whole or any(m.instance_id for g in groups for m in g.members)
    with_upgraded = verbose and (whole or any(g.has_migration_members for g in groups))
    columns = list(MEMBER_COLUMNS)
    if not with_instance_id:
        columns.remove("GROUP-INSTANCE-ID")
    if verbose:
        columns += VERBOSE_MEMBER_COLUMNS + ([UPGRADED_COLUMN] if with_upgraded else [])
    sections: Sections = []
    for group in groups:
        rows = [_member_row(group, m, with_instance_id, verbose, with_upgraded) for m in group.members]
        sections.append((f"members of {group.group_id}", rows))
    return columns, sections


def _member_row(
    group: GroupView, member: MemberView, with_instance_id: bool, verbose: bool, with_upgraded: bool
) -> list[Any]:
    row: list[Any] = [group.group_id, member.member_id]
    if with_instance_id:
        row.append(member.instance_id)
    row += [member.host, member.client_id, len(member.assignment)]
    if verbose:
        target = None if member.target is None else partitions_text(member.target)
        row += [member.epoch, member.assignment_text, group.target_assignment_epoch, target]
    if with_upgraded:
        row.append(None if member.upgraded is None else str(member.upgraded).lower())
    return row


# -------------------------------------------------------------------- state


def state_sections(
    groups: Sequence[GroupView],
    status: Iterable[Mapping[str, Any]],
    partition_for: Callable[[str], int],
    whole: bool,
    verbose: bool = False,
    health: Mapping[str, str] | None = None,
) -> tuple[list[str], Sections]:
    """One row per group; `status` is the controller's rows, for each partition's leader node;
    `health` each group's live health (none: "-")."""
    with_epochs = verbose or whole
    columns = STATE_COLUMNS[:4] + (EPOCH_COLUMNS if with_epochs else []) + STATE_COLUMNS[4:]
    nodes = {row.get("partition"): row.get("leader_node") or row.get("node_id") for row in status}
    sections: Sections = []
    for group in groups:
        partition = partition_for(group.group_id)
        coordinator = f"offsets-{partition}@{node_text(nodes.get(partition), whole) or '-'}"
        row: list[Any] = [group.group_id, coordinator, group.assignment_strategy or None, group.state]
        if with_epochs:
            row += [group.group_epoch, group.target_assignment_epoch]
        row += [len(group.members), (health or {}).get(group.group_id)]
        sections.append((f"state of {group.group_id}", [row]))
    return columns, sections


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "describe", parents=[common], help="describe groups of both types (offsets and lag, members, state)",
        description="As kafka-consumer-groups.sh --describe: each group's offsets, log end offsets and lag "
        "(default), its members (--members) or its state (--state).",
    )
    p.add_argument("groups", nargs="*", metavar="GROUP")
    p.add_argument("--all-groups", action="store_true", help="describe every group")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets, log end offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="one row per member")
    view.add_argument("--state", action="store_true", help="coordinator, assignment strategy, state, members")
    p.add_argument(
        "--verbose", action="store_true",
        help="with --members: each member's epoch, assignment and target assignment; "
        "with --state: the group epoch and target assignment epoch",
    )
