"""`raygroups list` and `describe` for groups of both types, without Ray.

The client is a stand-in that asks a real Shard (driven with a manual clock
through ConsumerGroupHeartbeat and JoinGroup/SyncGroup), so the CLI renders
the answers the core gives: TYPE in `list`; CURRENT-EPOCH, CURRENT-ASSIGNMENT,
TARGET-EPOCH, TARGET-ASSIGNMENT (and UPGRADED) in `describe --members
--verbose`; GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH in `describe --state
--verbose`, as Kafka 4.x's kafka-consumer-groups.sh prints them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

import pytest

from actors.cli.admin import ADMIN_COMMANDS, add_parsers
from actors.cli.describe import DESCRIBE_COLUMNS, MEMBER_COLUMNS, STATE_COLUMNS, member_sections
from actors.cli.group_views import consumer_group_view
from coordinator import Errors
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from coordinator.lag import GroupLag
from coordinator.lag_query import LagRequest, rows_to_groups
from coordinator.messages import (
    MEMBER_TYPE_CLASSIC,
    MEMBER_TYPE_CONSUMER,
    ConsumerGroupDescribeRequest,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedGroup,
    DescribedTopicPartitions,
    DescribeGroupsRequest,
    JoinGroupRequest,
    ListedGroup,
    ListGroupsRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
)
from coordinator.topic_partition import TopicPartition

from tests.actors.table_support import plain_records
from tests.consumer.heartbeat_harness import GROUP, Driver, beat, join

CLASSIC = "classic-app"
NODE = "node-0123456789abcdef"


class ShardClient:
    """The Client methods the admin commands call, answered by one Shard (one partition)."""

    num_partitions = 1

    def __init__(self, driver: Driver, ends: dict[tuple[str, int], int]) -> None:
        self.driver = driver
        self.ends = ends
        # What the registry pushes to the leader's live lag (actors/partition/ends_watch.py).
        driver.shard.update_end_offsets([(t, p, 0, end) for (t, p), end in ends.items()], whole=True)

    def _ask(self, request: Any) -> Any:
        return self.driver.handle(request)

    def partition_for(self, group_id: str) -> int:
        return 0

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return list(self._ask(ConsumerGroupDescribeRequest(tuple(group_ids))).groups)

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        return list(self._ask(DescribeGroupsRequest(tuple(group_ids))).groups)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        listed = self._ask(ListGroupsRequest(tuple(states), tuple(types))).groups
        return sorted(listed, key=lambda g: g.group_id)

    def fetch_offsets(self, group_id: str) -> OffsetFetchResponse:
        response = self._ask(OffsetFetchRequest(group_id))
        assert isinstance(response, OffsetFetchResponse)
        return response

    def lag(self, groups: Iterable[str] | None = None, partitions: bool = True) -> list[GroupLag]:
        response = self._ask(LagRequest(None if groups is None else tuple(groups), partitions))
        return rows_to_groups(response.groups, response.partitions)

    def end_offsets(self, names: Iterable[str] | None = None) -> dict[TopicPartition, int]:
        return {TopicPartition(t, p): end for (t, p), end in self.ends.items()}

    def status(self) -> list[dict[str, Any]]:
        return [{"partition": 0, "node_id": NODE}]


def classic_group(driver: Driver) -> str:
    """CLASSIC: one member holding payments 1, Stable; returns its member id."""
    subscription = encode_subscription(Subscription(("payments",)))
    request = JoinGroupRequest(
        CLASSIC, 30_000, 30_000, "consumer", (("range", subscription),), require_known_member_id=False,
        client_id="classic-client", client_host="/10.0.0.9",
    )
    driver.shard.handle(request, driver.now, "join")
    [result] = driver.shard.poll_timers(driver.now + 10_000)
    joined = result.responses[0][1]
    plan = ((joined.member_id, encode_assignment(Assignment((TopicPartition("payments", 1),)))),)
    sync = SyncGroupRequest(CLASSIC, joined.generation_id, joined.member_id, assignments=plan)
    assert driver.handle(sync).error is Errors.NONE
    return str(joined.member_id)


@pytest.fixture
def client() -> ShardClient:
    """GROUP, a consumer group reconciling: b joined with range, a still owns orders 0-3
    (target 2,3) and b has payments 0,1 (target orders 0,1 and payments 0,1). CLASSIC beside it."""
    driver = Driver({"orders": 4, "payments": 2})
    driver.ok(join("a", "orders", client_id="client-a", client_host="/10.0.0.1"))
    driver.handle(OffsetCommitRequest(GROUP, (OffsetCommitPartition("orders", 0, 40),), 1, "a", version=9))
    driver.ok(
        join("b", "orders", "payments", instance_id="i-b", server_assignor="range", client_id="client-b")
    )
    classic_group(driver)
    return ShardClient(driver, {("orders", 0): 100, ("payments", 0): 10})


def run(client: ShardClient, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true")
    add_parsers(parser.add_subparsers(dest="command", required=True), common)
    args = parser.parse_args(list(argv))
    code = ADMIN_COMMANDS[args.command](client, args)  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_each_group_type(client: ShardClient, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(client, capsys, "list")
    assert code == 0
    assert plain_records(out) == [
        {"GROUP": CLASSIC, "TYPE": "classic", "STATE": "Stable", "PROTOCOL-TYPE": "consumer",
         "HEALTH": "-"},  # no committed offset: no health
        {"GROUP": GROUP, "TYPE": "consumer", "STATE": "Reconciling", "PROTOCOL-TYPE": "consumer",
         "HEALTH": "OK"},
    ]
    _, out, _ = run(client, capsys, "list", "--type", "Consumer")
    assert [r["GROUP"] for r in plain_records(out)] == [GROUP]
    _, out, _ = run(client, capsys, "list", "--type", "classic", "--state", "stable", "--json")
    classic = {
        "GROUP": CLASSIC, "TYPE": "classic", "STATE": "Stable", "PROTOCOL-TYPE": "consumer", "HEALTH": None
    }
    assert json.loads(out) == [classic]
    with pytest.raises(SystemExit):
        run(client, capsys, "list", "--type", "share")


def test_members_verbose_shows_epochs_and_target_assignments(
    client: ShardClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(client, capsys, "describe", GROUP, CLASSIC, "--members", "--verbose")
    assert code == 0 and f"Warning: Consumer group '{GROUP}' is rebalancing." in err
    rows = plain_records(out)
    assert list(rows[0]) == [
        "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
        "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT",
    ]
    # Groups in name order: CLASSIC first.
    cells = [list(r.values()) for r in rows]
    assert cells[1:] == [
        [GROUP, "a", "-", "/10.0.0.1", "client-a", "4", "1", "orders:0,1,2,3", "2", "orders:2,3"],
        [GROUP, "b", "i-b", "-", "client-b", "2", "2", "payments:0,1", "2", "orders:0,1;payments:0,1"],
    ]
    # A classic group's member: no epochs, no target (Kafka prints "-").
    classic = ["/10.0.0.9", "classic-client", "1", "-", "payments:1", "-", "-"]
    assert cells[0][0] == CLASSIC and cells[0][3:] == classic
    _, out, _ = run(client, capsys, "describe", GROUP, "--members")
    assert list(plain_records(out)[0]) == MEMBER_COLUMNS


def test_members_json_has_every_column(client: ShardClient, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(client, capsys, "describe", GROUP, CLASSIC, "--members", "--verbose", "--json")
    classic, a, b = json.loads(out)  # groups in name order
    assert a == {
        "GROUP": GROUP, "CONSUMER-ID": "a", "GROUP-INSTANCE-ID": None, "HOST": "/10.0.0.1",
        "CLIENT-ID": "client-a", "#PARTITIONS": 4, "CURRENT-EPOCH": 1, "CURRENT-ASSIGNMENT": "orders:0,1,2,3",
        "TARGET-EPOCH": 2, "TARGET-ASSIGNMENT": "orders:2,3", "UPGRADED": "true",
    }
    assert (b["UPGRADED"], classic["UPGRADED"], classic["CURRENT-EPOCH"]) == ("true", None, None)


def test_state_verbose_shows_the_group_epochs(
    client: ShardClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(client, capsys, "describe", GROUP, CLASSIC, "--state", "--verbose")
    assert code == 0
    assert plain_records(out) == [
        {
            "GROUP": CLASSIC, "COORDINATOR (ID)": f"offsets-0@{NODE[:8]}", "ASSIGNMENT-STRATEGY": "range",
            "STATE": "Stable", "GROUP-EPOCH": "-", "TARGET-ASSIGNMENT-EPOCH": "-", "#MEMBERS": "1",
            "HEALTH": "-",
        },
        {
            "GROUP": GROUP, "COORDINATOR (ID)": f"offsets-0@{NODE[:8]}", "ASSIGNMENT-STRATEGY": "range",
            "STATE": "Reconciling", "GROUP-EPOCH": "2", "TARGET-ASSIGNMENT-EPOCH": "2", "#MEMBERS": "2",
            "HEALTH": "OK",
        },
    ]
    _, out, _ = run(client, capsys, "describe", GROUP, "--state")
    assert list(plain_records(out)[0]) == STATE_COLUMNS


def test_offsets_of_a_consumer_group(client: ShardClient, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(client, capsys, "describe", GROUP)
    rows = plain_records(out)
    assert code == 0 and list(rows[0]) == DESCRIBE_COLUMNS
    # What each member owns now, most partitions first.
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"], r["CONSUMER-ID"]) for r in rows] == [
        ("orders", "0", "40", "60", "a"), ("orders", "1", "-", "-", "a"), ("orders", "2", "-", "-", "a"),
        ("orders", "3", "-", "-", "a"), ("payments", "0", "-", "-", "b"), ("payments", "1", "-", "-", "b"),
    ]


def test_an_empty_consumer_group_and_a_missing_one(
    client: ShardClient, capsys: pytest.CaptureFixture[str]
) -> None:
    client.driver.ok(beat("a", -1))
    client.driver.ok(beat("b", -1, instance_id="i-b"))
    code, out, err = run(client, capsys, "describe", "nope", GROUP, "--state", "--verbose")
    assert code == 1 and "Error: Consumer group 'nope' does not exist." in err
    assert f"Consumer group '{GROUP}' has no active members." in err
    [row] = plain_records(out)
    cells = (row["GROUP"], row["STATE"], row["ASSIGNMENT-STRATEGY"], row["#MEMBERS"])
    assert cells == (GROUP, "Empty", "uniform", "0")


def test_upgraded_appears_when_a_consumer_group_has_classic_members() -> None:
    """Kafka's UPGRADED column, for a group in online migration (MemberType 0 beside 1)."""
    orders = topic_id_for("orders")

    def member(member_id: str, member_type: int) -> DescribedConsumerGroupMember:
        owned = (DescribedTopicPartitions(orders, "orders", (0,)),)
        return DescribedConsumerGroupMember(
            member_id, None, None, 3, "c", "h", ("orders",), None, owned, owned, member_type
        )

    mixed = DescribedConsumerGroup(
        Errors.NONE, "mixed", None, "Stable", 3, 3, "uniform",
        (member("new", MEMBER_TYPE_CONSUMER), member("old", MEMBER_TYPE_CLASSIC)),
    )
    columns, [(_, rows)] = member_sections([consumer_group_view(mixed)], whole=False, verbose=True)
    assert columns[-1] == "UPGRADED" and [row[-1] for row in rows] == ["true", "false"]
    columns, _ = member_sections([consumer_group_view(mixed)], whole=False, verbose=False)
    assert "UPGRADED" not in columns
