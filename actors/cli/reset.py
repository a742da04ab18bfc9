"""`raygroups reset-offsets` and `raygroups delete-offsets`, as kafka-consumer-groups.sh.

Owns gathering what a reset needs from the running service (group states,
committed offsets, the topic registry's partitions, start and end offsets
and end-offset history), handing it to the pure `coordinator.reset_plan`,
printing the plan through `actors.cli.tables`, and committing it.

Rules, Kafka's unless said:
- A dry run by default: the plan (GROUP TOPIC PARTITION NEW-OFFSET) is
  printed and nothing changes; `--execute` commits it (OffsetCommit, one
  request per group); `--export` prints the plan as the CSV `--from-file`
  reads instead of the table.
- A group with members is refused with Kafka's message ("Assignments can
  only be reset if the group 'G' is inactive, but the current state is
  Stable."), the other groups go on; the exit status is then 1.
- A group that does not exist may be given offsets with `--topic` or
  `--from-file` (Kafka's way to position a new group before it starts);
  with `--all-topics` it has nothing to reset: an error.
- Bad input (a topic or partition not in the registry, a datetime or
  duration that does not parse, a malformed CSV line, `--shift-by` without a
  committed offset) is one line on stderr, exit status 1, and nothing is
  committed for any group. Offsets beyond the log are clamped with Kafka's
  warning on stderr.
- delete-offsets (OffsetDelete): `--topic T` is T's partitions in the
  registry, or those the group committed when T is not registered; a
  partition neither registered nor committed is bad input. Prints Kafka's
  summary line and TOPIC PARTITION STATUS; exit status 1 on any error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from actors.cli.group_views import describe_views
from actors.cli.tables import print_table, progress, track
from actors.client.client import Client
from actors.core.settings import SystemClock
from coordinator import Errors
from coordinator.reset_plan import (
    TIME_MODES,
    GroupPlan,
    Mode,
    ResetError,
    ResetRequest,
    TopicScope,
    TopicView,
    format_plan_csv,
    parse_datetime,
    parse_duration,
    parse_plan_csv,
    parse_topic_scope,
    plan_group,
)

PLAN_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
DELETE_COLUMNS = ["TOPIC", "PARTITION", "STATUS"]
INACTIVE_STATES = ("Empty", "Dead")
# Kafka's Errors.message() of the errors OffsetDelete answers.
ERROR_MESSAGES = {
    Errors.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    Errors.NON_EMPTY_GROUP: "The group is not empty.",
    Errors.INVALID_GROUP_ID: "The configured groupId is invalid.",
    Errors.GROUP_SUBSCRIBED_TO_TOPIC: "The consumer group is actively subscribed to the topic",
    Errors.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}
MODE_FLAGS = {
    Mode.TO_EARLIEST: "to_earliest",
    Mode.TO_LATEST: "to_latest",
    Mode.TO_CURRENT: "to_current",
    Mode.TO_OFFSET: "to_offset",
    Mode.SHIFT_BY: "shift_by",
    Mode.TO_DATETIME: "to_datetime",
    Mode.BY_DURATION: "by_duration",
    Mode.FROM_FILE: "from_file",
}


def error(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


# ------------------------------------------------------------ reset-offsets


def cmd_reset_offsets(client: Client, args: argparse.Namespace) -> int:
    try:
        with progress("reading the groups' offsets and the topic registry"):
            groups = client_groups(client, args)
            request = reset_request(args, groups)
            plans, refused = plan_all(client, request, groups, topic_view(client, request))
    except ResetError as exc:
        return error(str(exc))
    # After the spinner: a line written under it would be torn by its redraws.
    for warning in (w for plan in plans for w in plan.warnings):
        print(f"Warning: {warning}", file=sys.stderr)
    for message in refused:
        error(message)
    if args.execute and not commit_plans(client, plans):
        return 1
    if args.export:
        sys.stdout.write(format_plan_csv(plans, with_group=len(args.groups or ()) != 1))
    else:
        title = "offsets reset" if args.execute else "reset plan (dry run: add --execute to apply)"
        rows = [[p.group, t, part, o] for p in plans for (t, part), o in sorted(p.offsets.items())]
        print_table(title, PLAN_COLUMNS, rows, args.json)
    return 1 if refused else 0


def client_groups(client: Client, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in client.list_groups()]
    return list(dict.fromkeys(args.groups))


def reset_request(args: argparse.Namespace, groups: Sequence[str]) -> ResetRequest:
    """The operator's flags as a plan request; ResetError for what does not parse."""
    # `is not`: --to-offset 0 and --shift-by 0 are given, though 0 == False
    mode = next(
        m
        for m, flag in MODE_FLAGS.items()
        if getattr(args, flag) is not None and getattr(args, flag) is not False
    )
    scopes = tuple(parse_topic_scope(t) for t in args.topic or ())
    value, file_plan = 0, {}
    if mode in (Mode.TO_OFFSET, Mode.SHIFT_BY):
        value = getattr(args, MODE_FLAGS[mode])
    elif mode is Mode.TO_DATETIME:
        value = parse_datetime(args.to_datetime)
    elif mode is Mode.BY_DURATION:
        value = SystemClock().now_ms() - parse_duration(args.by_duration)
    elif mode is Mode.FROM_FILE:
        file_plan = parse_plan_csv(read_text(args.from_file), groups)
    if mode is not Mode.FROM_FILE and not scopes and not args.all_topics:
        raise ResetError("One of the reset scopes should be defined: --all-topics, --topic.")
    return ResetRequest(mode, value, scopes, args.all_topics, file_plan)


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ResetError(f"cannot read the reset plan {path}: {exc}") from None


def topic_view(client: Client, request: ResetRequest) -> TopicView:
    """The registry's partitions, start and end offsets; the history only for time
    modes, of the topics named (every topic's with --all-topics)."""
    history: dict[tuple[str, int], list[tuple[int, int]]] = {}
    if request.mode in TIME_MODES:
        named = None if request.all_topics else sorted({s.topic for s in request.scopes})
        for topic, partition, at_ms, end in client.end_offset_history(named):
            history.setdefault((topic, partition), []).append((at_ms, end))
    return TopicView(
        sizes=client.describe_topics(),
        start=dict(client.start_offsets()),
        end=dict(client.end_offsets()),
        history=history,
    )


def plan_all(
    client: Client, request: ResetRequest, groups: Sequence[str], view: TopicView
) -> tuple[list[GroupPlan], list[str]]:
    """A plan per inactive group, and the refusals of the others (Kafka's messages)."""
    plans: list[GroupPlan] = []
    refused: list[str] = []
    for described in describe_views(client, groups):
        group, state = described.group_id, described.state
        if state not in INACTIVE_STATES:
            refused.append(
                f"Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {state}."
            )
            continue
        if state == "Dead" and request.all_topics:
            raise ResetError(f"Consumer group '{group}' does not exist.")
        if request.mode is Mode.FROM_FILE and group not in request.file_plan:
            refused.append(f"No reset plan for group {group} found.")
            continue
        plans.append(plan_group(request, group, client.fetch_offsets(group).offsets(), view))
    return sorted(plans, key=lambda p: p.group), refused


def commit_plans(client: Client, plans: Sequence[GroupPlan]) -> bool:
    """Commit each group's plan; False (after saying which) if any partition failed."""
    failed = False
    for plan in track(plans, "committing the new offsets", total=len(plans)):
        if not plan.offsets:
            continue
        response = client.commit_offsets(plan.group, plan.offsets)
        for p in response.partitions:
            if p.error is not Errors.NONE:
                failed = True
                error(f"committing {p.topic}-{p.partition} of group '{plan.group}' failed: {p.error.name}")
    return not failed


# ----------------------------------------------------------- delete-offsets


def cmd_delete_offsets(client: Client, args: argparse.Namespace) -> int:
    try:
        scopes = [parse_topic_scope(t) for t in args.topic]
        committed = client.fetch_offsets(args.group).offsets()
        partitions = partitions_to_delete(scopes, client.describe_topics(), committed)
    except ResetError as exc:
        return error(str(exc))
    response = client.delete_offsets(args.group, partitions)
    statuses = {(r.topic, r.partition): r.error for r in response.partitions}
    top = response.error
    if top is Errors.NONE:
        top = next((e for e in statuses.values() if e is not Errors.NONE), Errors.NONE)
    if top is Errors.NONE:
        print(f"Request succeeded for deleting offsets from group {args.group}.", file=sys.stderr)
    elif top in (Errors.GROUP_SUBSCRIBED_TO_TOPIC, Errors.UNKNOWN_TOPIC_OR_PARTITION):
        error("Encountered some partition-level error, see the follow-up details.")
    else:
        error(ERROR_MESSAGES.get(top, f"Encountered some unknown error: {top.name}"))
    rows = [
        [topic, partition, _status(statuses.get((topic, partition), response.error))]
        for topic, partition in partitions
    ]
    print_table("offset deletion", DELETE_COLUMNS, rows, args.json)
    return 0 if top is Errors.NONE else 1


def partitions_to_delete(
    scopes: Sequence[TopicScope], sizes: dict[str, int], committed: dict[tuple[str, int], int]
) -> list[tuple[str, int]]:
    """The partitions named; `T` alone is T's registered partitions, else those committed."""
    chosen: set[tuple[str, int]] = set()
    for scope in scopes:
        if scope.partitions is not None:
            chosen.update((scope.topic, p) for p in scope.partitions)
        elif scope.topic in sizes:
            chosen.update((scope.topic, p) for p in range(sizes[scope.topic]))
        else:
            found = {tp for tp in committed if tp[0] == scope.topic}
            if not found:
                raise ResetError(f'The topic "{scope.topic}" does not exist')
            chosen.update(found)
    missing = [f"{t}-{p}" for t, p in sorted(chosen) if not (0 <= p < sizes.get(t, 0) or (t, p) in committed)]
    if missing:
        raise ResetError(f'The partitions "{",".join(missing)}" do not exist')
    return sorted(chosen)


def _status(code: Errors) -> str:
    if code is Errors.NONE:
        return "Successful"
    return f"Error: {code.name}: {ERROR_MESSAGES.get(code, code.name)}"


# ----------------------------------------------------------------- parsers


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "reset-offsets",
        parents=[common],
        help="reset inactive groups' offsets (dry run unless --execute)",
        description="Reset the committed offsets of inactive consumer groups, as "
        "kafka-consumer-groups.sh --reset-offsets. Prints the plan; --execute commits it.",
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--group", action="append", dest="groups", metavar="GROUP", help="repeatable")
    who.add_argument("--all-groups", action="store_true", help="every group of the service")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--topic", action="append", metavar="T[:P,P]", help="a topic or some partitions")
    where.add_argument("--all-topics", action="store_true", help="every partition the group committed")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the end offset")
    how.add_argument("--to-current", action="store_true", help="the committed offset (latest if none)")
    how.add_argument("--to-offset", type=int, metavar="N")
    how.add_argument("--shift-by", type=int, metavar="N", help="committed offset + N (may be negative)")
    how.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[Z|+HH:MM]", help="UTC without a zone")
    how.add_argument("--by-duration", metavar="PnDTnHnMnS", help="ISO-8601 duration back from now")
    how.add_argument("--from-file", metavar="CSV", help="lines topic,partition,offset or group,topic,...")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    run.add_argument("--execute", action="store_true", help="commit the plan")
    p.add_argument("--export", action="store_true", help="print the plan as CSV (for --from-file)")
    p = commands.add_parser(
        "delete-offsets",
        parents=[common],
        help="delete a group's committed offsets (OffsetDelete)",
    )
    p.add_argument("--group", required=True)
    p.add_argument("--topic", action="append", required=True, metavar="T[:P,P]", help="repeatable")


RESET_COMMANDS = {"reset-offsets": cmd_reset_offsets, "delete-offsets": cmd_delete_offsets}
