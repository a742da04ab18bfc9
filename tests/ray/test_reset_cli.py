"""`raygroups reset-offsets` and `raygroups delete-offsets` against the running
service, as kafka-consumer-groups.sh: every reset mode as a dry run and with
--execute, --export read back by --from-file, refusal for an active group, bad
input (nothing changed), delete-offsets and its partition errors; printed off a
terminal (plain, grep-able) and on an 80-column terminal, never cutting a value."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime

import pytest

from actors.cli import reset
from actors.cli.main import main
from actors.client.client import Client
from coordinator.messages import MemberIdentity

from tests.actors.table_support import columns_on_terminal, plain_records
from tests.ray.helpers import form_group

pytestmark = pytest.mark.ray
ORDERS, AUDIT = "reset-orders", "reset-audit"
IDLE = "reset-idle"
COMMITTED = {(ORDERS, 0): 50, (ORDERS, 1): 20, (AUDIT, 0): 7}
HOUR_MS = 3_600_000
# The instant the end-offset samples and the modes' times are counted from.
NOW_MS = time.time_ns() // 1_000_000


class FrozenClock:
    """The CLI's wall clock stopped at NOW_MS: `--by-duration` counts back from the
    same instant as the samples, however long after this module's import the test runs."""

    def now_ms(self) -> int:
        return NOW_MS


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


@pytest.fixture(scope="module")
def topics(service: Client) -> Client:
    """orders: log 10..100 on partition 0 (ends 30, 60, 100 two, one and half an hour ago),
    0..40 on 1, nothing on 2; audit: 0..7. The group IDLE has no members."""
    service.create_topic(ORDERS, 3)
    service.create_topic(AUDIT, 1)
    service.set_end_offsets({(ORDERS, 0): 30, (ORDERS, 1): 40}, at_ms=NOW_MS - 2 * HOUR_MS)
    service.set_end_offsets({(ORDERS, 0): 60}, at_ms=NOW_MS - HOUR_MS)
    service.set_end_offsets({(ORDERS, 0): 100, (AUDIT, 0): 7}, at_ms=NOW_MS - HOUR_MS // 2)
    service.set_start_offsets({(ORDERS, 0): 10})
    service.commit_offsets(IDLE, COMMITTED)
    return service


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def plan_of(out: str) -> dict[tuple[str, str, int], int]:
    rows = plain_records(out)
    assert all(list(r) == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"] for r in rows)
    return {(r["GROUP"], r["TOPIC"], int(r["PARTITION"])): int(r["NEW-OFFSET"]) for r in rows}


def orders(*offsets: int, group: str = IDLE) -> dict[tuple[str, str, int], int]:
    return {(group, ORDERS, p): o for p, o in enumerate(offsets)}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--to-earliest", "--topic", ORDERS], orders(10, 0, 0)),
        (["--to-latest", "--topic", ORDERS], orders(100, 40, 0)),
        (["--to-current", "--topic", ORDERS], orders(50, 20, 0)),  # 2 has no commit: latest
        (["--to-offset", "30", "--topic", f"{ORDERS}:0,1"], orders(30, 30)),
        (["--to-offset", "0", "--topic", f"{ORDERS}:1"], {(IDLE, ORDERS, 1): 0}),
        (["--shift-by", "5", "--topic", f"{ORDERS}:0,1"], orders(55, 25)),
        (["--to-datetime", iso(NOW_MS - 90 * 60_000), "--topic", f"{ORDERS}:0"], orders(30)),
        (["--to-datetime", iso(NOW_MS) + "+01:00", "--topic", f"{ORDERS}:0"], orders(60)),
        (["--by-duration", "PT45M", "--topic", f"{ORDERS}:0"], orders(60)),
        (["--by-duration", "P1D", "--topic", f"{ORDERS}:0"], orders(10)),  # before the first sample
        (["--by-duration", "PT1S", "--topic", f"{ORDERS}:0"], orders(100)),  # after the last: latest
    ],
)
def test_each_mode_as_a_dry_run_prints_the_plan_and_changes_nothing(
    topics: Client,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    expected: dict[tuple[str, str, int], int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reset, "SystemClock", FrozenClock)
    code, out, err = run(capsys, "reset-offsets", "--group", IDLE, *argv)
    assert (code, err) == (0, "")
    assert plan_of(out) == expected
    assert topics.fetch_offsets(IDLE).offsets() == COMMITTED


def test_offsets_beyond_the_log_are_clamped_with_kafkas_warning(
    topics: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "reset-offsets", "--group", IDLE, "--all-topics", "--shift-by", "-45")
    assert code == 0 and plan_of(out) == {**orders(10, 0), (IDLE, AUDIT, 0): 0}
    assert err.splitlines() == [
        f"Warning: New offset (-38) is lower than earliest offset for topic partition {AUDIT}-0. "
        "Value will be set to 0.",
        f"Warning: New offset (5) is lower than earliest offset for topic partition {ORDERS}-0. "
        "Value will be set to 10.",
        f"Warning: New offset (-25) is lower than earliest offset for topic partition {ORDERS}-1. "
        "Value will be set to 0.",
    ]


def test_execute_commits_the_plan(topics: Client, capsys: pytest.CaptureFixture[str]) -> None:
    group = "reset-executed"
    topics.commit_offsets(group, COMMITTED)
    code, out, _ = run(
        capsys, "reset-offsets", "--group", group, "--topic", f"{ORDERS}:0", "--to-offset", "70", "--execute"
    )
    assert code == 0 and plan_of(out) == orders(70, group=group)
    assert topics.fetch_offsets(group).offsets() == {**COMMITTED, (ORDERS, 0): 70}
    code, out, _ = run(
        capsys, "reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute", "--json"
    )
    assert code == 0 and json.loads(out)[0] == {
        "GROUP": group,
        "TOPIC": AUDIT,
        "PARTITION": 0,
        "NEW-OFFSET": 7,
    }
    assert topics.fetch_offsets(group).offsets() == {(ORDERS, 0): 100, (ORDERS, 1): 40, (AUDIT, 0): 7}
    code, _, _ = run(
        capsys, "reset-offsets", "--group", group, "--topic", ORDERS, "--to-earliest", "--execute"
    )
    assert code == 0
    assert topics.fetch_offsets(group).offsets() == {
        (ORDERS, 0): 10,
        (ORDERS, 1): 0,
        (ORDERS, 2): 0,
        (AUDIT, 0): 7,
    }


def test_a_new_group_is_positioned_before_it_starts(
    topics: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """As Kafka: a group that does not exist yet gets offsets (a topic scope)."""
    code, _, _ = run(
        capsys, "reset-offsets", "--group", "reset-new", "--topic", ORDERS, "--to-latest", "--execute"
    )
    assert code == 0 and topics.fetch_offsets("reset-new").offsets() == {
        (ORDERS, 0): 100,
        (ORDERS, 1): 40,
        (ORDERS, 2): 0,
    }


def test_export_is_kafkas_csv_and_from_file_reads_it_back(
    topics: Client, capsys: pytest.CaptureFixture[str], data_dir: str
) -> None:
    code, out, _ = run(
        capsys, "reset-offsets", "--group", IDLE, "--topic", ORDERS, "--to-earliest", "--export"
    )
    assert code == 0 and out == f"{ORDERS},0,10\n{ORDERS},1,0\n{ORDERS},2,0\n"
    other = "reset-exported"
    topics.commit_offsets(other, {(ORDERS, 1): 3})
    code, out, _ = run(
        capsys,
        "reset-offsets",
        "--group",
        IDLE,
        "--group",
        other,
        "--topic",
        f"{ORDERS}:1",
        "--to-current",
        "--export",
    )
    assert out == f"{other},{ORDERS},1,3\n{IDLE},{ORDERS},1,20\n", "several groups: the group column first"
    path = os.path.join(data_dir, "plan.csv")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{other},{ORDERS},1,33\n{other},{ORDERS},0,500\n")
    code, out, err = run(capsys, "reset-offsets", "--group", other, "--from-file", path, "--execute")
    assert code == 0 and plan_of(out) == {(other, ORDERS, 0): 100, (other, ORDERS, 1): 33}
    assert "is higher than latest offset" in err, "Kafka clamps a file's offsets too"
    assert topics.fetch_offsets(other).offsets() == {(ORDERS, 0): 100, (ORDERS, 1): 33}


def test_an_active_group_is_refused_with_kafkas_message(
    topics: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    group = "reset-active"
    (member,), generation = form_group(topics, group, 1)
    topics.commit_offsets(group, {(ORDERS, 0): 42}, generation, member)
    try:
        code, out, err = run(
            capsys, "reset-offsets", "--group", group, "--topic", ORDERS, "--to-earliest", "--execute"
        )
        assert code == 1 and plan_of(out) == {}
        assert err == (
            f"Error: Assignments can only be reset if the group '{group}' is inactive, "
            "but the current state is Stable.\n"
        )
        assert topics.fetch_offsets(group).offsets() == {(ORDERS, 0): 42}
        code, out, err = run(capsys, "reset-offsets", "--all-groups", "--topic", f"{ORDERS}:2", "--to-latest")
        assert code == 1 and f"group '{group}' is inactive" in err
        planned = {g for g, _, _ in plan_of(out)}
        assert IDLE in planned and group not in planned, "the inactive groups are still planned"
    finally:
        topics.leave_group(group, [MemberIdentity(member)])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--topic", "reset-missing", "--to-earliest"], 'The topic "reset-missing" does not exist'),
        (["--topic", f"{ORDERS}:1,7", "--to-earliest"], f'The partitions "{ORDERS}-7" do not exist'),
        (
            ["--topic", f"{ORDERS}:x", "--to-earliest"],
            f"Invalid partition 'x' specified in topic arg '{ORDERS}:x'",
        ),
        (["--topic", ORDERS, "--to-datetime", "2024-13-01T00:00:00"], "Invalid timestamp '2024-13-01T00:00"),
        (["--topic", ORDERS, "--by-duration", "1h"], "Invalid duration '1h'"),
        (
            ["--topic", ORDERS, "--shift-by", "1"],
            f"Cannot shift offset for partition {ORDERS}-2 since there is",
        ),
        (
            ["--topic", ORDERS, "--from-file", "PLAN"],
            "Malformed line 2 of the reset plan: 'reset-orders;1;5'",
        ),
        (["--to-earliest"], "One of the reset scopes should be defined: --all-topics, --topic."),
        (
            ["--all-topics", "--to-latest", "--group", "reset-nope"],
            "Consumer group 'reset-nope' does not exist.",
        ),
    ],
)
def test_bad_input_is_one_line_exit_1_and_changes_nothing(
    topics: Client, capsys: pytest.CaptureFixture[str], data_dir: str, argv: list[str], message: str
) -> None:
    plan = os.path.join(data_dir, "bad.csv")
    with open(plan, "w", encoding="utf-8") as f:
        f.write(f"{ORDERS},0,5\n{ORDERS};1;5\n")
    argv = [plan if a == "PLAN" else a for a in argv]
    code, out, err = run(capsys, "reset-offsets", "--group", IDLE, *argv, "--execute")
    assert code == 1 and out == ""
    assert err.startswith(f"Error: {message}") and err.count("\n") == 1, err
    assert topics.fetch_offsets(IDLE).offsets() == COMMITTED
    assert topics.fetch_offsets("reset-nope").offsets() == {}


def test_an_80_column_terminal_shows_every_value_whole(
    topics: Client, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    long_group = "reset-a-consumer-group-with-a-name-as-long-as-some-real-deployments-use"
    long_topic = "reset-a-topic-whose-name-is-longer-than-any-column-of-an-80-column-terminal"
    topics.create_topic(long_topic, 2)
    topics.set_end_offsets({(long_topic, 0): 123456789, (long_topic, 1): 987654321})
    topics.commit_offsets(long_group, {(long_topic, 0): 5, (long_topic, 1): 6})
    for argv in (
        ["reset-offsets", "--group", long_group, "--all-topics", "--to-latest"],
        ["delete-offsets", "--group", long_group, "--topic", f"{long_topic}:1"],
    ):
        columns, text = columns_on_terminal(lambda argv=argv: main(argv), monkeypatch)
        for value in (long_group, long_topic, "987654321") if argv[0] == "reset-offsets" else (long_topic,):
            assert any(value in column for column in columns), (value, text)
    capsys.readouterr()
    assert topics.fetch_offsets(long_group).offsets() == {(long_topic, 0): 5}, "the dry run changed nothing"


def test_delete_offsets_as_kafkas_offset_delete(topics: Client, capsys: pytest.CaptureFixture[str]) -> None:
    group = "reset-deleted"
    topics.commit_offsets(group, {(ORDERS, 0): 5, (ORDERS, 1): 6, ("reset-unregistered", 0): 1})
    code, out, err = run(
        capsys, "delete-offsets", "--group", group, "--topic", f"{ORDERS}:0", "--topic", "reset-unregistered"
    )
    assert code == 0 and err == f"Request succeeded for deleting offsets from group {group}.\n"
    assert plain_records(out) == [
        {"TOPIC": ORDERS, "PARTITION": "0", "STATUS": "Successful"},
        {"TOPIC": "reset-unregistered", "PARTITION": "0", "STATUS": "Successful"},
    ]
    assert topics.fetch_offsets(group).offsets() == {(ORDERS, 1): 6}


def test_delete_offsets_errors(topics: Client, capsys: pytest.CaptureFixture[str]) -> None:
    group = "reset-consuming"
    (member,), generation = form_group(topics, group, 1)  # subscribed to topic "t"
    topics.commit_offsets(group, {("t", 0): 9, (ORDERS, 0): 8}, generation, member)
    try:
        code, out, err = run(
            capsys, "delete-offsets", "--group", group, "--topic", "t", "--topic", f"{ORDERS}:0"
        )
        assert code == 1
        assert err == "Error: Encountered some partition-level error, see the follow-up details.\n"
        assert {r["TOPIC"]: r["STATUS"] for r in plain_records(out)} == {
            "t": "Error: GROUP_SUBSCRIBED_TO_TOPIC: The consumer group is actively subscribed to the topic",
            ORDERS: "Successful",
        }
        assert topics.fetch_offsets(group).offsets() == {("t", 0): 9}
    finally:
        topics.leave_group(group, [MemberIdentity(member)])
    code, out, err = run(capsys, "delete-offsets", "--group", "reset-nobody", "--topic", ORDERS, "--json")
    assert code == 1 and err == "Error: The group id does not exist.\n"
    assert {r["STATUS"] for r in json.loads(out)} == {
        "Error: GROUP_ID_NOT_FOUND: The group id does not exist."
    }
    for topic, message in [
        (f"{ORDERS}:9", f'The partitions "{ORDERS}-9" do not exist'),
        ("reset-nothing", 'The topic "reset-nothing" does not exist'),
    ]:
        code, out, err = run(capsys, "delete-offsets", "--group", IDLE, "--topic", topic)
        assert (code, out, err) == (1, "", f"Error: {message}\n")
    assert topics.fetch_offsets(IDLE).offsets() == COMMITTED
