"""`raygroups describe` against the running service, as kafka-consumer-groups.sh --describe:
each view (offsets with log end offsets and lag, --members [--verbose], --state),
--all-groups and unknown groups; printed off a terminal (plain, grep-able) and on an
80-column terminal, never cutting a value."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from actors.cli.main import main
from actors.client.client import Client
from coordinator import Errors
from coordinator.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from coordinator.messages import JoinGroupRequest, MemberIdentity, SyncGroupRequest
from coordinator.topic_partition import TopicPartition

from tests.actors.table_support import columns_on_terminal, plain_records

pytestmark = pytest.mark.ray
DESCRIBE_COLUMNS = [
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
    "CLIENT-ID",
]
GROUP, STATIC_GROUP = "describe-live", "describe-static"
ORDERS, PAYMENTS, GONE = "describe-orders", "describe-payments", "describe-unregistered"
# {client id: (host, partitions assigned)}
MEMBERS = {
    "describe-app-consumer-0": ("10.0.0.1", [(ORDERS, 0), (ORDERS, 1)]),
    "describe-app-consumer-1": ("10.0.0.2", [(ORDERS, 2), (PAYMENTS, 0)]),
}
COMMITTED = {(ORDERS, 0): 40, (ORDERS, 1): 50, (PAYMENTS, 0): 9, (GONE, 0): 7}
ENDS = {(ORDERS, 0): 100, (ORDERS, 1): 50, (ORDERS, 2): 30, (PAYMENTS, 0): 10}


def join_request(
    group: str, client_id: str, host: str, member_id: str = "", instance: str | None = None
) -> JoinGroupRequest:
    subscription = encode_subscription(Subscription((ORDERS, PAYMENTS)))
    return JoinGroupRequest(
        group, 60_000, 60_000, "consumer", (("range", subscription),), member_id=member_id,
        group_instance_id=instance, client_id=client_id, client_host=host,
    )


def assignment(partitions: list[tuple[str, int]]) -> bytes:
    return encode_assignment(Assignment(tuple(TopicPartition(*tp) for tp in partitions)))


def form_group(client: Client) -> dict[str, str]:
    """GROUP with the members of MEMBERS, synced with their assignment; {client id: member id}.
    Every member first gets its id (MEMBER_ID_REQUIRED), then all join at once."""

    def join(client_id: str, member_id: str = "") -> Any:
        return client.join_group(join_request(GROUP, client_id, MEMBERS[client_id][0], member_id))

    def sync(member_id: str) -> Any:
        plan = assignments if member_id == leader else ()
        return client.sync_group(SyncGroupRequest(GROUP, generation, member_id, assignments=plan))

    with ThreadPoolExecutor(len(MEMBERS)) as pool:
        joined = list(pool.map(join, MEMBERS))
        while len({r.generation_id for r in joined}) > 1 or any(r.error is not Errors.NONE for r in joined):
            joined = list(pool.map(join, MEMBERS, [r.member_id for r in joined]))
        ids = dict(zip(MEMBERS, (r.member_id for r in joined)))
        assignments = tuple((ids[c], assignment(spec[1])) for c, spec in MEMBERS.items())
        generation, leader = joined[0].generation_id, joined[0].leader
        syncs = list(pool.map(sync, ids.values()))
    assert all(s.error is Errors.NONE for s in syncs), syncs
    response = client.commit_offsets(GROUP, COMMITTED, generation, leader)
    assert all(p.error is Errors.NONE for p in response.partitions), response
    return ids


def form_static_group(client: Client) -> str:
    """STATIC_GROUP: one static member (group.instance.id), assigned nothing."""
    request = join_request(STATIC_GROUP, "describe-static-client", "10.0.0.3", "", "static-1")
    joined = client.join_group(request)
    sync = SyncGroupRequest(
        STATIC_GROUP, joined.generation_id, joined.member_id, "static-1",
        assignments=((joined.member_id, assignment([])),),
    )
    assert client.sync_group(sync).error is Errors.NONE
    return str(joined.member_id)


@pytest.fixture(scope="module")
def live_group(service: Client) -> Iterator[dict[str, str]]:
    service.create_topic(ORDERS, 3)
    service.create_topic(PAYMENTS, 1)
    service.set_end_offsets(ENDS)
    ids = form_group(service)
    static = form_static_group(service)
    yield ids
    service.leave_group(GROUP, [MemberIdentity(m) for m in ids.values()])
    service.leave_group(STATIC_GROUP, [MemberIdentity(static, "static-1")])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_offsets_with_log_end_offsets_and_lag(
    live_group: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "describe", GROUP)
    assert code == 0 and err == ""
    rows = plain_records(out)
    c0, c1 = live_group["describe-app-consumer-0"], live_group["describe-app-consumer-1"]
    expected = [  # TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        (ORDERS, "0", "40", "100", "60", c0, "10.0.0.1", "describe-app-consumer-0"),
        (ORDERS, "1", "50", "50", "0", c0, "10.0.0.1", "describe-app-consumer-0"),
        (ORDERS, "2", "-", "30", "-", c1, "10.0.0.2", "describe-app-consumer-1"),
        (PAYMENTS, "0", "9", "10", "1", c1, "10.0.0.2", "describe-app-consumer-1"),
        (GONE, "0", "7", "-", "-", "-", "-", "-"),  # committed, unassigned, a topic the registry lacks
    ]
    assert [tuple(r.values())[1:] for r in rows] == expected
    assert list(rows[0]) == DESCRIBE_COLUMNS and {r["GROUP"] for r in rows} == {GROUP}
    code, out, _ = run(capsys, "describe", GROUP, "--offsets", "--json")
    first = json.loads(out)[0]
    assert (first["LOG-END-OFFSET"], first["LAG"], first["CONSUMER-ID"]) == (100, 60, c0)
    assert json.loads(out)[-1]["LOG-END-OFFSET"] is None


def test_an_80_column_terminal_shows_every_value_whole(
    live_group: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for argv in (["describe", GROUP], ["describe", GROUP, "--members", "--verbose"]):
        columns, text = columns_on_terminal(lambda argv=argv: main(argv), monkeypatch)
        view_only = [GONE] if argv[-1] == GROUP else [f"{ORDERS}:2;"]
        values = [*live_group.values(), *MEMBERS, ORDERS, *view_only]
        for value in values:
            assert any(value in column for column in columns), (value, text)
    capsys.readouterr()


def test_members_and_their_assignment(live_group: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "describe", GROUP, "--members")
    rows = plain_records(out)
    assert code == 0 and list(rows[0]) == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert {r["CLIENT-ID"]: (r["CONSUMER-ID"], r["HOST"], r["#PARTITIONS"]) for r in rows} == {
        "describe-app-consumer-0": (live_group["describe-app-consumer-0"], "10.0.0.1", "2"),
        "describe-app-consumer-1": (live_group["describe-app-consumer-1"], "10.0.0.2", "2"),
    }
    code, out, _ = run(capsys, "describe", GROUP, STATIC_GROUP, "--members", "--verbose")
    rows = plain_records(out)
    assert list(rows[0])[2] == "GROUP-INSTANCE-ID", "shown once a member has one"
    assert {r["CLIENT-ID"]: (r["GROUP-INSTANCE-ID"], r["CURRENT-ASSIGNMENT"]) for r in rows} == {
        "describe-app-consumer-0": ("-", f"{ORDERS}:0,1"),
        "describe-app-consumer-1": ("-", f"{ORDERS}:2;{PAYMENTS}:0"),
        "describe-static-client": ("static-1", "-"),
    }
    # Classic groups have no member epochs nor target assignments (Kafka 4.x prints "-").
    epochs = {(r["CURRENT-EPOCH"], r["TARGET-EPOCH"], r["TARGET-ASSIGNMENT"]) for r in rows}
    assert epochs == {("-", "-", "-")}


def test_state(live_group: dict[str, str], service: Client, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "describe", GROUP, "--state")
    [row] = plain_records(out)
    partition = service.partition_for(GROUP)
    node = service.status()[partition]["node_id"]
    assert code == 0
    assert row == {
        "GROUP": GROUP, "COORDINATOR (ID)": f"offsets-{partition}@{node[:8]}", "ASSIGNMENT-STRATEGY": "range",
        "STATE": "Stable", "#MEMBERS": "2", "HEALTH": "OK",
    }
    code, out, _ = run(capsys, "describe", GROUP, "--state", "--json")
    assert json.loads(out)[0]["COORDINATOR (ID)"] == f"offsets-{partition}@{node}"


def test_all_groups_an_empty_group_and_unknown_groups(
    live_group: dict[str, str], service: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    service.commit_offsets("describe-empty", {(ORDERS, 1): 20})
    code, out, err = run(capsys, "describe", "describe-empty", "describe-nope", GROUP)
    assert code == 1, "a group that does not exist fails the command"
    assert "Error: Consumer group 'describe-nope' does not exist." in err
    assert "Consumer group 'describe-empty' has no active members." in err
    blocks = out.strip("\n").split("\n\n")
    assert len(blocks) == 2, "one table per group, a blank line between them (Kafka's layout)"
    empty = [r for r in plain_records(out) if r["GROUP"] == "describe-empty"]
    keys = ("TOPIC", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")
    cells = [tuple(r[k] for k in keys) for r in empty]
    assert cells == [(ORDERS, "20", "50", "30", "-")]
    code, out, err = run(capsys, "describe", "--all-groups", "--state")
    groups = {r["GROUP"] for r in plain_records(out)}
    assert code == 0 and {GROUP, "describe-empty"} <= groups
    assert run(capsys, "describe", "describe-nope", "--json")[:2] == (1, "[]\n")
    assert run(capsys, "describe")[0] == 2, "neither a group nor --all-groups"


def test_live_lag_is_the_describe_figures_without_spark(
    live_group: dict[str, str], service: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """`raygroups lag --live` prints `raygroups lag`'s rows from the leaders' live lag (the
    registry's ends pushed to them), plus lag in seconds and health; `Client.lag` the same."""
    code, out, err = run(capsys, "lag", "--live", GROUP, "--json")
    assert code == 0
    printed = json.loads(out)
    rows = [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"])
            for r in printed["partitions"]]
    assert rows == [
        (ORDERS, 0, 40, 100, 60), (ORDERS, 1, 50, 50, 0), (PAYMENTS, 0, 9, 10, 1), (GONE, 0, 7, None, None)
    ]
    assert {r["health"] for r in printed["partitions"]} == {"OK"}
    seconds = [r["lag_seconds"] for r in printed["partitions"]]
    assert seconds[0] > 0 and seconds[1] == 0 and seconds[3] is None
    [group] = service.lag([GROUP])
    assert group.lag == 61 and group.group_id == GROUP
    code, _, err = run(capsys, "lag", "--live", "describe-nope")
    assert code == 1 and "'describe-nope' has no committed offsets" in err
