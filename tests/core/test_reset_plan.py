"""Reset plans as kafka-consumer-groups.sh --reset-offsets computes them: every
mode, Kafka's clamping, scopes, and the operator's input (topic args,
datetimes, durations, the reset CSV)."""

from __future__ import annotations

import pytest

from coordinator.reset_plan import (
    GroupPlan,
    Mode,
    ResetError,
    ResetRequest,
    TopicScope,
    TopicView,
    format_plan_csv,
    offset_at_time,
    parse_datetime,
    parse_duration,
    parse_plan_csv,
    parse_topic_scope,
    plan_group,
)

# orders: 3 partitions, log from 10 to 100 on 0, 0 to 40 on 1, nothing on 2; audit: 1 partition
VIEW = TopicView(
    sizes={"orders": 3, "audit": 1},
    start={("orders", 0): 10},
    end={("orders", 0): 100, ("orders", 1): 40, ("audit", 0): 7},
    history={
        ("orders", 0): [(1_000, 30), (2_000, 60), (3_000, 100)],
        ("orders", 1): [(1_500, 40)],
    },
)
COMMITTED = {("orders", 0): 50, ("orders", 1): 20, ("audit", 0): 7}
ORDERS = (TopicScope("orders"),)


def plan(mode: Mode, value: int = 0, scopes: tuple[TopicScope, ...] = ORDERS, **kw: object) -> GroupPlan:
    return plan_group(ResetRequest(mode, value, scopes, **kw), "g", COMMITTED, VIEW)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "value", "expected"),
    [
        (Mode.TO_EARLIEST, 0, {0: 10, 1: 0, 2: 0}),
        (Mode.TO_LATEST, 0, {0: 100, 1: 40, 2: 0}),
        (Mode.TO_CURRENT, 0, {0: 50, 1: 20, 2: 0}),  # no committed offset: latest
        (Mode.TO_OFFSET, 30, {0: 30, 1: 30, 2: 0}),
        (Mode.SHIFT_BY, -5, None),  # partition 2 has no committed offset
    ],
)
def test_each_mode_over_a_topics_partitions(mode: Mode, value: int, expected: dict[int, int] | None) -> None:
    if expected is None:
        with pytest.raises(ResetError, match="Cannot shift offset for partition orders-2 since there is no"):
            plan(mode, value)
        return
    assert plan(mode, value).offsets == {("orders", p): o for p, o in expected.items()}


def test_shift_by_over_committed_partitions_clamps_as_kafka_with_its_warning() -> None:
    result = plan(Mode.SHIFT_BY, -45, all_topics=True)
    assert result.offsets == {("audit", 0): 0, ("orders", 0): 10, ("orders", 1): 0}
    lower = "is lower than earliest offset for topic partition"
    assert result.warnings == (
        f"New offset (-38) {lower} audit-0. Value will be set to 0.",
        f"New offset (5) {lower} orders-0. Value will be set to 10.",
        f"New offset (-25) {lower} orders-1. Value will be set to 0.",
    )
    ahead = plan(Mode.SHIFT_BY, 60, (TopicScope("orders", (0, 1)),))
    assert ahead.offsets == {("orders", 0): 100, ("orders", 1): 40}
    assert ahead.warnings[0] == (
        "New offset (110) is higher than latest offset for topic partition orders-0. "
        "Value will be set to 100."
    )


def test_to_offset_clamps_into_the_log_and_leaves_in_range_offsets_alone() -> None:
    result = plan(Mode.TO_OFFSET, 5, (TopicScope("orders", (0, 1)),))
    assert result.offsets == {("orders", 0): 10, ("orders", 1): 5}
    assert len(result.warnings) == 1 and "orders-0" in result.warnings[0]
    assert plan(Mode.TO_OFFSET, 20, (TopicScope("orders", (0, 1)),)).warnings == ()


@pytest.mark.parametrize(
    ("at_ms", "expected"),
    [
        (999, 10),  # before the first sample: earliest (the start offset)
        (1_000, 30),  # at a sample: every message from its end on is later
        (1_999, 30),
        (2_500, 60),
        (3_000, 100),
        (9_999_999, 100),  # after the last sample: latest
    ],
)
def test_time_resolves_to_the_end_of_the_latest_sample_at_or_before_it(at_ms: int, expected: int) -> None:
    assert offset_at_time(VIEW, ("orders", 0), at_ms) == expected
    assert plan(Mode.TO_DATETIME, at_ms, (TopicScope("orders", (0,)),)).offsets == {("orders", 0): expected}


def test_time_modes_on_partitions_without_history_and_below_the_start_offset() -> None:
    assert offset_at_time(VIEW, ("orders", 2), 5_000) == 0, "no samples: earliest"
    moved = TopicView(VIEW.sizes, {("orders", 0): 70}, VIEW.end, VIEW.history)
    assert offset_at_time(moved, ("orders", 0), 1_500) == 70, "never below the log start"
    assert plan(Mode.BY_DURATION, 1_600, (TopicScope("orders", (1,)),)).offsets == {("orders", 1): 40}


@pytest.mark.parametrize(
    ("scopes", "all_topics", "message"),
    [
        ((TopicScope("missing"),), False, 'The topic "missing" does not exist'),
        ((TopicScope("orders", (1, 3, 9)),), False, 'The partitions "orders-3,orders-9" do not exist'),
        ((), False, "One of the reset scopes should be defined: --all-topics, --topic."),
    ],
)
def test_scopes_outside_the_registry_are_refused(
    scopes: tuple[TopicScope, ...], all_topics: bool, message: str
) -> None:
    with pytest.raises(ResetError) as refused:
        plan(Mode.TO_EARLIEST, scopes=scopes, all_topics=all_topics)
    assert str(refused.value) == message


def test_all_topics_is_what_the_group_committed_and_each_must_exist() -> None:
    assert set(plan(Mode.TO_LATEST, all_topics=True).offsets) == set(COMMITTED)
    with pytest.raises(ResetError, match='"ghost-0" do not exist'):
        plan_group(ResetRequest(Mode.TO_LATEST, all_topics=True), "g", {("ghost", 0): 1}, VIEW)


def test_repeated_scopes_are_merged() -> None:
    scopes = (TopicScope("orders", (1,)), TopicScope("orders", (1, 0)), TopicScope("audit"))
    assert list(plan(Mode.TO_EARLIEST, scopes=scopes).offsets) == [("audit", 0), ("orders", 0), ("orders", 1)]


def test_from_file_takes_the_files_partitions_for_each_group_and_clamps() -> None:
    file_plan = {"g": {("orders", 0): 500, ("orders", 1): 12}, "other": {("audit", 0): 1}}
    result = plan(Mode.FROM_FILE, scopes=(), file_plan=file_plan)
    assert result.offsets == {("orders", 0): 100, ("orders", 1): 12}
    assert "Value will be set to 100." in result.warnings[0]
    assert plan_group(ResetRequest(Mode.FROM_FILE, file_plan={}), "g", COMMITTED, VIEW).offsets == {}
    with pytest.raises(ResetError, match='"orders-7" do not exist'):
        plan(Mode.FROM_FILE, file_plan={"g": {("orders", 7): 1}})


@pytest.mark.parametrize(
    ("text", "scope"),
    [
        ("orders", TopicScope("orders")),
        ("orders:0,2", TopicScope("orders", (0, 2))),
        ("a.b-c:7", TopicScope("a.b-c", (7,))),
    ],
)
def test_topic_args(text: str, scope: TopicScope) -> None:
    assert parse_topic_scope(text) == scope


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("orders:x", "Invalid partition 'x' specified in topic arg 'orders:x'"),
        ("orders:", "Invalid partition '' specified in topic arg 'orders:'"),
        ("orders:1:2", "Invalid topic arg 'orders:1:2', expected topic name and partitions"),
        (":1", "Invalid topic arg ':1', expected topic name and partitions"),
    ],
)
def test_bad_topic_args(text: str, message: str) -> None:
    with pytest.raises(ResetError) as refused:
        parse_topic_scope(text)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("text", "epoch_ms"),
    [
        ("1970-01-01T00:00:00.000", 0),
        ("2020-11-10T16:51:38.198", 1_605_027_098_198),  # Kafka's doc example, UTC when no zone
        ("2020-11-10T16:51:38.198Z", 1_605_027_098_198),
        ("2020-11-10T16:51:38.198+08:00", 1_605_027_098_198 - 8 * 3_600_000),
        ("2020-11-10T16:51:38.198+0800", 1_605_027_098_198 - 8 * 3_600_000),
        ("2020-11-10T16:51:38.198-05", 1_605_027_098_198 + 5 * 3_600_000),
        ("2024-02-29T12:00:00", 1_709_208_000_000),
        ("1969-12-31T23:59:59.999", -1),
    ],
)
def test_kafkas_datetime_formats(text: str, epoch_ms: int) -> None:
    assert parse_datetime(text) == epoch_ms


@pytest.mark.parametrize(
    "text",
    [
        "2020-11-10",
        "2020-11-10 16:51:38",
        "2023-02-29T00:00:00",
        "2020-13-01T00:00:00",
        "2020-11-10T24:00:00",
        "yesterday",
    ],
)
def test_datetimes_that_do_not_parse(text: str) -> None:
    with pytest.raises(ResetError, match=f"Invalid timestamp '{text}'"):
        parse_datetime(text)


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("PT1H", 3_600_000),
        ("P2D", 172_800_000),
        ("P1DT2H3M4.5S", 93_784_500),
        ("pt15m", 900_000),
        ("PT0.25S", 250),
        ("-PT1M", -60_000),
        ("PT-1.5S", -1_500),
    ],
)
def test_iso8601_durations_as_java_parses_them(text: str, millis: int) -> None:
    assert parse_duration(text) == millis


@pytest.mark.parametrize("text", ["P", "PT", "1H", "P1H", "PT1D", "P1W", ""])
def test_durations_that_do_not_parse(text: str) -> None:
    with pytest.raises(ResetError, match="Invalid duration"):
        parse_duration(text)


def test_csv_for_one_group_and_for_many() -> None:
    assert parse_plan_csv("orders,0,5\norders,1,7\n\n", ["g"]) == {"g": {("orders", 0): 5, ("orders", 1): 7}}
    many = "g,orders,0,5\nh,audit,0,1\n"
    assert parse_plan_csv(many, ["g", "h"]) == {"g": {("orders", 0): 5}, "h": {("audit", 0): 1}}
    by_group = {"g": {("orders", 0): 5}, "h": {("audit", 0): 1}}
    assert parse_plan_csv(many, ["g"]) == by_group, "Kafka sniffs the format from line 1"
    assert parse_plan_csv(many, []) == parse_plan_csv(many, ["g", "h"])


@pytest.mark.parametrize(
    ("text", "groups", "message"),
    [
        ("orders,0,5\norders,x,7\n", ["g"], "Malformed line 2 of the reset plan: 'orders,x,7' (expected t"),
        ("g,orders,0,5\ng,orders,1\n", [], "Malformed line 2 of the reset plan: 'g,orders,1' (expected g"),
        ("orders,0,5\n", ["g", "h"], "Malformed line 1 of the reset plan"),
        ("\n\ng,orders,0,\n", [], "Malformed line 3 of the reset plan"),
    ],
)
def test_malformed_csv_names_the_line(text: str, groups: list[str], message: str) -> None:
    with pytest.raises(ResetError) as refused:
        parse_plan_csv(text, groups)
    assert str(refused.value).startswith(message)


def test_export_writes_what_from_file_reads() -> None:
    plans = [GroupPlan("g", {("orders", 1): 7, ("orders", 0): 5}), GroupPlan("h", {("audit", 0): 1})]
    assert format_plan_csv(plans[:1], with_group=False) == "orders,0,5\norders,1,7\n"
    exported = format_plan_csv(plans, with_group=True)
    assert exported == "g,orders,0,5\ng,orders,1,7\nh,audit,0,1\n"
    assert parse_plan_csv(exported, ["g", "h"]) == {p.group: p.offsets for p in plans}
