"""`raygroups describe`: kafka-consumer-groups.sh --describe, live from the service.

Three views, with the columns of Kafka's ConsumerGroupCommand, one table per
group in name order (`--all-groups`: every group the service lists):
- offsets (default, or `--offsets`): GROUP TOPIC PARTITION CURRENT-OFFSET
  LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID. First the partitions each
  member is assigned (members holding the most partitions first), then the
  partitions with a committed offset that no member holds ("-" for the
  consumer). LOG-END-OFFSET is the topic registry's end offset, "-" for a
  topic or partition the registry does not know; LAG is end minus current
  when both are known, unclamped as Kafka's `getLag` (an end offset reported
  before the commit shows as a negative lag rather than hiding).
- `--members [--verbose]`: GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST
  CLIENT-ID #PARTITIONS, and with `--verbose` ASSIGNMENT, the column of
  Kafka's classic groups, written as modern Kafka writes assignments
  (`orders:0,1;payments:2`): no blank, so it stays one awk field.
  GROUP-INSTANCE-ID appears when a member has one (always in `--json`).
- `--state`: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS. The
  coordinator is the offsets partition that owns the group and the Ray node
  its leader runs on, `offsets-<p>@<node>` (Kafka: the broker `host:port (id)`).

Kafka's notes go to stderr so that tables and `--json` stay clean: "Consumer
group 'G' has no active members." (Empty), "Warning: Consumer group 'G' is
rebalancing.", and for a group that does not exist "Error: Consumer group 'G'
does not exist.", which also makes the command exit 1 (the other groups are
still described).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from actors.cli.status_table import node_text
from actors.cli.tables import print_tables
from actors.client.client import Client
from coordinator.consumer_protocol import decode_assignment
from coordinator.messages import DescribedGroup, DescribedMember
from coordinator.routing import partition_for
from coordinator.topic_partition import TopicPartition

DESCRIBE_COLUMNS = [
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
    "CLIENT-ID",
]
STATE_COLUMNS = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
REBALANCING = ("PreparingRebalance", "CompletingRebalance")
EXIT_OK, EXIT_NO_GROUP, EXIT_USAGE = 0, 1, 2
Sections = list[tuple[str, list[list[Any]]]]


def cmd_describe(client: Client, args: argparse.Namespace) -> int:
    """`raygroups describe GROUP... | --all-groups [--offsets | --members [--verbose] | --state]`."""
    if bool(args.groups) == bool(args.all_groups):
        print("Error: describe takes GROUP names or --all-groups, one of the two.", file=sys.stderr)
        return EXIT_USAGE
    group_ids = _group_ids(client, args)
    described = sorted(client.describe_groups(group_ids), key=lambda d: d.group_id)
    missing = [d.group_id for d in described if d.state == "Dead"]
    live = [d for d in described if d.state != "Dead"]
    for group in described:
        _note(group)
    if args.members:
        whole = bool(args.json) or any(m.group_instance_id for d in live for m in d.members)
        columns, sections = member_sections(live, whole, args.verbose)
    elif args.state:
        sections = state_sections(live, client.status(), client.num_partitions, whole=args.json)
        columns = STATE_COLUMNS
    else:
        columns, sections = DESCRIBE_COLUMNS, offset_sections(client, live)
    if any(rows for _, rows in sections) or args.json:
        print_tables(columns, sections, args.json)
    return EXIT_NO_GROUP if missing and not args.all_groups else EXIT_OK


def _group_ids(client: Client, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [listed.group_id for listed in client.list_groups()]
    return list(dict.fromkeys(args.groups))


def _note(group: DescribedGroup) -> None:
    """Kafka's `shouldPrintMemberState` notes, on stderr."""
    if group.state == "Dead":
        print(f"Error: Consumer group '{group.group_id}' does not exist.", file=sys.stderr)
    elif group.state == "Empty":
        print(f"Consumer group '{group.group_id}' has no active members.", file=sys.stderr)
    elif group.state in REBALANCING:
        print(f"Warning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr)


# ------------------------------------------------------------------ offsets


def describe_rows(client: Client, group_ids: Sequence[str]) -> list[list[Any]]:
    """The offsets view of these groups as one list of rows (DESCRIBE_COLUMNS)."""
    described = sorted(client.describe_groups(group_ids), key=lambda d: d.group_id)
    live = [d for d in described if d.state != "Dead"]
    return [row for _, rows in offset_sections(client, live) for row in rows]


def offset_sections(client: Client, groups: Sequence[DescribedGroup]) -> Sections:
    committed = {g.group_id: client.fetch_offsets(g.group_id).offsets() for g in groups}
    topics = {topic for offsets in committed.values() for topic, _ in offsets}
    topics |= {tp.topic for g in groups for m in g.members for tp in assigned_partitions(m.assignment)}
    known = client.end_offsets(sorted(topics)) if topics else {}
    ends = {(tp.topic, tp.partition): end for tp, end in known.items()}
    return [(f"group {g.group_id}", group_offset_rows(g, committed[g.group_id], ends)) for g in groups]


def group_offset_rows(
    group: DescribedGroup, committed: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]
) -> list[list[Any]]:
    """Kafka's `collectGroupsOffsets` for one group: assigned partitions, then unassigned commits."""
    holders = [(m, assigned_partitions(m.assignment)) for m in group.members]
    # Kafka's order (most partitions first); ties by member id, so the output is the same
    # whichever member joined first.
    holders = sorted((h for h in holders if h[1]), key=lambda h: (-len(h[1]), h[0].member_id))
    rows: list[list[Any]] = []
    held: set[tuple[str, int]] = set()
    for member, partitions in holders:
        keys = sorted((tp.topic, tp.partition) for tp in partitions)
        held.update(keys)
        rows += [_offset_row(group.group_id, key, committed, ends, member) for key in keys]
    rows += [_offset_row(group.group_id, key, committed, ends, None) for key in sorted(set(committed) - held)]
    return rows


def _offset_row(
    group_id: str,
    key: tuple[str, int],
    committed: Mapping[tuple[str, int], int],
    ends: Mapping[tuple[str, int], int],
    member: DescribedMember | None,
) -> list[Any]:
    current, end = committed.get(key), ends.get(key)
    lag = end - current if current is not None and end is not None else None
    consumer = [member.member_id, member.client_host, member.client_id] if member else [None, None, None]
    return [group_id, key[0], key[1], current, end, lag, *consumer]


# ------------------------------------------------------------------ members


def member_sections(
    groups: Sequence[DescribedGroup], with_instance_id: bool, verbose: bool
) -> tuple[list[str], Sections]:
    columns = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    if not with_instance_id:
        columns.remove("GROUP-INSTANCE-ID")
    if not verbose:
        columns.remove("ASSIGNMENT")
    sections: Sections = []
    for group in groups:
        rows = [_member_row(group.group_id, m, with_instance_id, verbose) for m in group.members]
        sections.append((f"members of {group.group_id}", rows))
    return columns, sections


def _member_row(group_id: str, member: DescribedMember, with_instance_id: bool, verbose: bool) -> list[Any]:
    partitions = assigned_partitions(member.assignment)
    row: list[Any] = [group_id, member.member_id]
    if with_instance_id:
        row.append(member.group_instance_id)
    row += [member.client_host, member.client_id, len(partitions)]
    if verbose:
        row.append(assignment_text(member.assignment))
    return row


def assigned_partitions(assignment: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a consumer-protocol assignment; none for other payloads."""
    return _decoded(assignment) or ()


def assignment_text(assignment: bytes) -> str | None:
    """`orders:0,1;payments:2` (Kafka's `getAssignmentString`); None when nothing is assigned."""
    partitions = _decoded(assignment)
    if partitions is None:
        return f"<{len(assignment)}-bytes>"
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    texts = sorted(f"{topic}:{','.join(map(str, sorted(ps)))}" for topic, ps in by_topic.items())
    return ";".join(texts) or None


def _decoded(assignment: bytes) -> tuple[TopicPartition, ...] | None:
    """None for a payload that is not a consumer-protocol assignment (another protocol type)."""
    if not assignment:
        return ()
    try:
        return decode_assignment(assignment).partitions
    except ValueError:
        return None


# -------------------------------------------------------------------- state


def state_sections(
    groups: Sequence[DescribedGroup], status: Iterable[Mapping[str, Any]], num_partitions: int, whole: bool
) -> Sections:
    """One row per group; `status` is the controller's rows, for each partition's leader node."""
    nodes = {row.get("partition"): row.get("leader_node") or row.get("node_id") for row in status}
    sections: Sections = []
    for group in groups:
        partition = partition_for(group.group_id, num_partitions)
        coordinator = f"offsets-{partition}@{node_text(nodes.get(partition), whole) or '-'}"
        row = [group.group_id, coordinator, group.protocol or None, group.state, len(group.members)]
        sections.append((f"state of {group.group_id}", [row]))
    return sections


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "describe", parents=[common], help="describe consumer groups (offsets and lag, members, state)",
        description="As kafka-consumer-groups.sh --describe: each group's offsets, log end offsets and lag "
        "(default), its members (--members) or its state (--state).",
    )
    p.add_argument("groups", nargs="*", metavar="GROUP")
    p.add_argument("--all-groups", action="store_true", help="describe every group")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets, log end offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="one row per member")
    view.add_argument("--state", action="store_true", help="coordinator, assignment strategy, state, members")
    p.add_argument("--verbose", action="store_true", help="with --members: each member's assignment")
