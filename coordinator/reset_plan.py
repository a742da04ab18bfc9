"""Offset reset plans, as kafka-consumer-groups.sh --reset-offsets computes them.

Pure: the caller gathers the group's committed offsets and the topic
registry's view (partition counts, start and end offsets, end-offset
history) and gets the new offset of each partition, or a `ResetError` whose
message is one line for the operator. Also the parsing of what an operator
types: `--topic T[:P,P]`, Kafka's datetimes and ISO-8601 durations, the reset
CSV (`--from-file`, `--export`).

Rules, Kafka's (GroupOffsetsResetter, ConsumerGroupCommand):
- Scope: `--all-topics` is every partition the group has committed;
  `--topic T` every partition of T, `--topic T:P,P` those; every partition
  must exist in the registry ('The partitions "t-5" do not exist').
  `--from-file` takes its partitions from the file.
- Earliest is the log start offset, latest the end offset (the registry's,
  0 where never reported). `--to-offset`, `--shift-by` and `--from-file`
  are clamped into [earliest, latest] with Kafka's warning; `--shift-by`
  needs a committed offset; `--to-current` keeps the committed offset, or
  takes latest where there is none.
- `--to-datetime` / `--by-duration`: Kafka answers the earliest offset whose
  message timestamp is at or after T. raygroups holds no messages, only
  samples (at_ms, end) of each end offset: every message at or above a
  sample's end was written after it, so the answer is the end of the latest
  sample at or before T (it never skips a message of time T or later, and
  includes at most those written between that sample and T). Before the
  first sample: earliest. After the last: that sample's end, i.e. latest.
  Never below the start offset.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

TP = tuple[str, int]


class ResetError(ValueError):
    """Bad input or an impossible reset; the message is one line for the operator."""


class Mode(Enum):
    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    TO_CURRENT = "to-current"
    TO_OFFSET = "to-offset"
    SHIFT_BY = "shift-by"
    TO_DATETIME = "to-datetime"
    BY_DURATION = "by-duration"
    FROM_FILE = "from-file"


TIME_MODES = frozenset({Mode.TO_DATETIME, Mode.BY_DURATION})


@dataclass(frozen=True, slots=True)
class TopicScope:
    """`--topic T` (partitions None: all of them) or `--topic T:P,P`."""

    topic: str
    partitions: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ResetRequest:
    """`value`: the offset of TO_OFFSET, the shift of SHIFT_BY, the epoch ms of
    TO_DATETIME and BY_DURATION (already resolved against now)."""

    mode: Mode
    value: int = 0
    scopes: tuple[TopicScope, ...] = ()
    all_topics: bool = False
    file_plan: Mapping[str, Mapping[TP, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicView:
    """What the topic registry knows: partition counts, start and end offsets,
    and (for the time modes) each partition's samples (at_ms, end), by time."""

    sizes: Mapping[str, int]
    start: Mapping[TP, int] = field(default_factory=dict)
    end: Mapping[TP, int] = field(default_factory=dict)
    history: Mapping[TP, Sequence[tuple[int, int]]] = field(default_factory=dict)

    def exists(self, tp: TP) -> bool:
        return 0 <= tp[1] < self.sizes.get(tp[0], 0)

    def earliest(self, tp: TP) -> int:
        return self.start.get(tp, 0)

    def latest(self, tp: TP) -> int:
        return self.end.get(tp, 0)


@dataclass(frozen=True, slots=True)
class GroupPlan:
    group: str
    offsets: dict[TP, int]
    warnings: tuple[str, ...] = ()


def plan_group(request: ResetRequest, group: str, committed: Mapping[TP, int], view: TopicView) -> GroupPlan:
    """The new offset of each partition of `group` in the request's scope."""
    if request.mode is Mode.FROM_FILE:
        requested = dict(request.file_plan.get(group, {}))
        _check_exist(requested, view)
        return _clamped(group, requested, view)
    partitions = partitions_to_reset(request, committed, view)
    mode = request.mode
    if mode is Mode.TO_EARLIEST:
        return GroupPlan(group, {tp: view.earliest(tp) for tp in partitions})
    if mode is Mode.TO_LATEST:
        return GroupPlan(group, {tp: view.latest(tp) for tp in partitions})
    if mode is Mode.TO_CURRENT:
        return GroupPlan(group, {tp: committed.get(tp, view.latest(tp)) for tp in partitions})
    if mode in TIME_MODES:
        return GroupPlan(group, {tp: offset_at_time(view, tp, request.value) for tp in partitions})
    if mode is Mode.TO_OFFSET:
        return _clamped(group, {tp: request.value for tp in partitions}, view)
    for tp in partitions:
        if tp not in committed:
            raise ResetError(
                f"Cannot shift offset for partition {tp[0]}-{tp[1]} "
                "since there is no current committed offset"
            )
    return _clamped(group, {tp: committed[tp] + request.value for tp in partitions}, view)


def partitions_to_reset(request: ResetRequest, committed: Mapping[TP, int], view: TopicView) -> list[TP]:
    if request.all_topics:
        chosen = sorted(committed)
    elif not request.scopes:
        raise ResetError("One of the reset scopes should be defined: --all-topics, --topic.")
    else:
        chosen = []
        for scope in request.scopes:
            if scope.partitions is None:
                if scope.topic not in view.sizes:
                    raise ResetError(f'The topic "{scope.topic}" does not exist')
                chosen.extend((scope.topic, p) for p in range(view.sizes[scope.topic]))
            else:
                chosen.extend((scope.topic, p) for p in scope.partitions)
        chosen = sorted(set(chosen))
    _check_exist(chosen, view)
    return chosen


def _check_exist(partitions: Sequence[TP] | Mapping[TP, int], view: TopicView) -> None:
    missing = [f"{t}-{p}" for t, p in sorted(partitions) if not view.exists((t, p))]
    if missing:
        raise ResetError(f'The partitions "{",".join(missing)}" do not exist')


def _clamped(group: str, requested: Mapping[TP, int], view: TopicView) -> GroupPlan:
    """Kafka's checkOffsetsRange: out-of-range offsets move to the nearest end, with a warning."""
    offsets: dict[TP, int] = {}
    warnings: list[str] = []
    for tp, offset in sorted(requested.items()):
        earliest, latest = view.earliest(tp), view.latest(tp)
        name = f"{tp[0]}-{tp[1]}"
        if offset > latest:
            warnings.append(
                f"New offset ({offset}) is higher than latest offset for topic partition {name}. "
                f"Value will be set to {latest}."
            )
            offset = latest
        elif offset < earliest:
            warnings.append(
                f"New offset ({offset}) is lower than earliest offset for topic partition {name}. "
                f"Value will be set to {earliest}."
            )
            offset = earliest
        offsets[tp] = offset
    return GroupPlan(group, offsets, tuple(warnings))


def offset_at_time(view: TopicView, tp: TP, timestamp_ms: int) -> int:
    """The end of the latest sample at or before `timestamp_ms` (module docstring)."""
    offset = view.earliest(tp)
    for at_ms, end in view.history.get(tp, ()):
        if at_ms > timestamp_ms:
            break
        offset = end
    return min(max(offset, view.earliest(tp)), max(view.latest(tp), view.earliest(tp)))


# ------------------------------------------------------------------ parsing


def parse_topic_scope(text: str) -> TopicScope:
    """`T` or `T:P,P` (Kafka's --topic)."""
    if ":" not in text:
        if not text:
            raise ResetError("Invalid topic arg '': expected a topic name")
        return TopicScope(text)
    parts = text.split(":")
    if len(parts) != 2 or not parts[0]:
        raise ResetError(f"Invalid topic arg '{text}', expected topic name and partitions")
    partitions = []
    for item in parts[1].split(","):
        if not item.strip().isdigit():
            raise ResetError(f"Invalid partition '{item}' specified in topic arg '{text}'")
        partitions.append(int(item))
    return TopicScope(parts[0], tuple(partitions))


_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}))?(Z|[+-]\d{2}(?::?\d{2})?)?"
)
DATETIME_FORMAT = "YYYY-MM-DDTHH:mm:SS.sss, optionally with Z, +HH, +HHMM or +HH:MM (UTC when none)"


def parse_datetime(text: str) -> int:
    """Epoch ms of Kafka's --to-datetime (Utils.getDateTime); the milliseconds may be left out."""
    match = _DATETIME.fullmatch(text)
    if not match:
        raise ResetError(f"Invalid timestamp '{text}': expected {DATETIME_FORMAT}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    millis = int(match.group(7) or 0)
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        raise ResetError(f"Invalid timestamp '{text}': no such date")
    if hour > 23 or minute > 59 or second > 59:
        raise ResetError(f"Invalid timestamp '{text}': no such time of day")
    seconds = ((_days_from_civil(year, month, day) * 24 + hour) * 60 + minute) * 60 + second
    return (seconds - _zone_offset_s(match.group(8), text)) * 1000 + millis


def _zone_offset_s(zone: str | None, text: str) -> int:
    if zone is None or zone == "Z":
        return 0
    digits = zone[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 18 or minutes > 59:
        raise ResetError(f"Invalid timestamp '{text}': no such time zone offset {zone}")
    sign = -1 if zone[0] == "-" else 1
    return sign * (hours * 3600 + minutes * 60)


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> int:
    """Milliseconds of an ISO-8601 duration `PnDTnHnMn.nS`, as Java's Duration.parse."""
    match = _DURATION.fullmatch(text)
    if not match or match.group(3) == "T" or not any(match.group(i) for i in (2, 4, 5, 6)):
        raise ResetError(
            f"Invalid duration '{text}': expected ISO-8601 PnDTnHnMnS, e.g. PT1H30M or P2D"
        )
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    total_s = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)
    millis = int((fraction or "").ljust(3, "0")[:3])
    total_ms = total_s * 1000 + (-millis if (seconds or "").startswith("-") else millis)
    return -total_ms if sign == "-" else total_ms


# --------------------------------------------------------------------- CSV


def parse_plan_csv(text: str, groups: Sequence[str]) -> dict[str, dict[TP, int]]:
    """Kafka's reset plan: `topic,partition,offset` lines for one `--group`,
    else `group,topic,partition,offset`; blank lines are skipped."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    single = len(groups) == 1 and bool(lines) and _fields(lines[0][1], 3) is not None
    plan: dict[str, dict[TP, int]] = {}
    for number, line in lines:
        fields = _fields(line, 3 if single else 4)
        if fields is None:
            expected = "topic,partition,offset" if single else "group,topic,partition,offset"
            raise ResetError(f"Malformed line {number} of the reset plan: {line!r} (expected {expected})")
        group = groups[0] if single else fields[0]
        topic, partition, offset = fields[-3], int(fields[-2]), int(fields[-1])
        plan.setdefault(group, {})[(topic, partition)] = offset
    return plan


def _fields(line: str, count: int) -> list[str] | None:
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != count or not all(fields):
        return None
    if not fields[-2].isdigit() or not re.fullmatch(r"-?\d+", fields[-1]):
        return None
    return fields


def format_plan_csv(plans: Sequence[GroupPlan], with_group: bool) -> str:
    """Kafka's --export: the plan as the CSV --from-file reads."""
    return "".join(
        (f"{plan.group}," if with_group else "") + f"{topic},{partition},{offset}\n"
        for plan in plans
        for (topic, partition), offset in sorted(plan.offsets.items())
    )
