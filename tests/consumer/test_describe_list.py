"""ConsumerGroupDescribe, ListGroups with types and DescribeGroups of a consumer group, on the Shard.

Kafka's GroupMetadataManager `consumerGroupDescribe`, `listGroups` and
`describeGroups` (4.x): a manual clock, answers asserted whole.
"""

from __future__ import annotations

from uuid import UUID

import pytest

from coordinator import CoordinatorStatus, Errors, Shard, precheck
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.messages import (
    MEMBER_TYPE_CONSUMER,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedGroup,
    DescribedTopicPartitions,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    JoinGroupRequest,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
)
from coordinator.runtime import REQUEST_GROUPS, WRITE_REQUESTS
from coordinator.status import item_errors

from tests.consumer.heartbeat_harness import GROUP, Driver, beat, join, tp

ORDERS, PAYMENTS = topic_id_for("orders"), topic_id_for("payments")


def described(driver: Driver, *group_ids: str) -> tuple[DescribedConsumerGroup, ...]:
    response = driver.handle(ConsumerGroupDescribeRequest(group_ids))
    assert isinstance(response, ConsumerGroupDescribeResponse)
    return response.groups


def listed(shard_or_driver: Driver | Shard, **filters: tuple[str, ...]) -> list[ListedGroup]:
    shard = shard_or_driver.shard if isinstance(shard_or_driver, Driver) else shard_or_driver
    result = shard.handle(ListGroupsRequest(**filters), 0, "t")
    response = result.responses[0][1]
    assert isinstance(response, ListGroupsResponse) and response.error is Errors.NONE
    return sorted(response.groups, key=lambda g: g.group_id)


def parts(topic_id: UUID, name: str, *partitions: int) -> DescribedTopicPartitions:
    return DescribedTopicPartitions(topic_id, name, partitions)


@pytest.fixture
def reconciling() -> Driver:
    """Member a owns orders 0-3; b joins with range: a must give up orders 0,1 to b."""
    driver = Driver({"orders": 4, "payments": 2})
    driver.ok(join("a", "orders", client_id="c-a", client_host="/10.0.0.1", rack_id="r1"))
    driver.ok(join("b", "orders", "payments", instance_id="i-b", server_assignor="range"))
    return driver


def test_a_stable_group_as_kafka_describes_it() -> None:
    driver = Driver({"orders": 4})
    driver.ok(join("a", "orders", client_id="c-a", client_host="/10.0.0.1", rack_id="r1"))
    [group] = described(driver, GROUP)
    everything = (parts(ORDERS, "orders", 0, 1, 2, 3),)
    assert group == DescribedConsumerGroup(
        Errors.NONE, GROUP, None, "Stable", 1, 1, "uniform",
        (
            DescribedConsumerGroupMember(
                "a", None, "r1", 1, "c-a", "/10.0.0.1", ("orders",), None, everything, everything,
                MEMBER_TYPE_CONSUMER,
            ),
        ),
    )


def test_reconciling_shows_current_and_target_assignments(reconciling: Driver) -> None:
    [group] = described(reconciling, GROUP)
    assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Reconciling", 2, 2)
    # The preferred assignor is the one most members name (only b names one).
    assert group.assignor_name == "range"
    a, b = group.members
    assert (a.member_id, a.member_epoch) == ("a", 1)  # still revoking: behind the target epoch
    assert a.assignment == (parts(ORDERS, "orders", 0, 1, 2, 3),)
    assert a.target_assignment == (parts(ORDERS, "orders", 2, 3),)
    assert (b.member_id, b.instance_id, b.member_epoch) == ("b", "i-b", 2)
    assert b.subscribed_topic_names == ("orders", "payments")
    # b got the partitions nobody owned at once; orders 0,1 wait for a's release.
    assert b.assignment == (parts(PAYMENTS, "payments", 0, 1),)
    assert b.target_assignment == (parts(ORDERS, "orders", 0, 1), parts(PAYMENTS, "payments", 0, 1))


def test_once_revoked_the_group_is_stable_at_the_target(reconciling: Driver) -> None:
    reconciling.ok(beat("a", 1, owns=(tp("orders", 2, 3),)))
    reconciling.ok(beat("b", 2, owns=(tp("payments", 0, 1),)))
    [group] = described(reconciling, GROUP)
    assert group.group_state == "Stable"
    reconciled = [(m.member_epoch, m.assignment == m.target_assignment) for m in group.members]
    assert reconciled == [(2, True), (2, True)]


def test_a_regex_subscriber_and_loading_gives_the_same_answer() -> None:
    driver = Driver({"orders": 2, "payments": 1})
    driver.ok(join("r", subscribed_topic_names=None, subscribed_topic_regex="ord.*"))
    [group] = described(driver, GROUP)
    [member] = group.members
    assert (member.subscribed_topic_names, member.subscribed_topic_regex) == ((), "ord.*")
    reloaded = driver.replayed()
    reloaded.update_topics({"orders": 2, "payments": 1}, driver.now)
    again = reloaded.handle(ConsumerGroupDescribeRequest((GROUP,)), driver.now, "t").responses[0][1]
    assert again.groups == (group,)


def test_topics_the_shard_does_not_know_are_left_out() -> None:
    driver = Driver({"orders": 2})
    driver.ok(join("a", "orders"))
    loaded = driver.replayed()  # the topics are volatile: none until the driver gives them
    response = loaded.handle(ConsumerGroupDescribeRequest((GROUP,)), driver.now, "t").responses[0][1]
    [member] = response.groups[0].members
    assert (member.member_epoch, member.assignment, member.target_assignment) == (1, (), ())


def test_unknown_classic_and_empty_ids() -> None:
    driver = Driver({"orders": 1})
    driver.ok(join("a", "orders"))
    driver.handle(OffsetCommitRequest("simple", (OffsetCommitPartition("orders", 0, 5),)))
    answers = described(driver, "missing", "simple", "", GROUP)
    assert answers[:3] == (
        DescribedConsumerGroup(Errors.GROUP_ID_NOT_FOUND, "missing", "Group missing not found."),
        DescribedConsumerGroup(Errors.GROUP_ID_NOT_FOUND, "simple", "Group simple is not a consumer group."),
        DescribedConsumerGroup(Errors.INVALID_GROUP_ID, ""),
    )
    assert answers[3].error is Errors.NONE


def test_describe_groups_answers_a_consumer_group_by_version() -> None:
    driver = Driver({"orders": 1})
    driver.ok(join("a", "orders"))
    old = driver.handle(DescribeGroupsRequest((GROUP, "missing")))
    assert old == DescribeGroupsResponse(
        (DescribedGroup(Errors.NONE, GROUP, "Dead"), DescribedGroup(Errors.NONE, "missing", "Dead"))
    )
    v6 = driver.handle(DescribeGroupsRequest((GROUP, "missing"), version=6))
    not_found = Errors.GROUP_ID_NOT_FOUND
    assert v6 == DescribeGroupsResponse(
        (
            DescribedGroup(not_found, GROUP, "Dead", error_message=f"Group {GROUP} is not a classic group."),
            DescribedGroup(not_found, "missing", "Dead", error_message="Group missing not found."),
        )
    )


def classic_join(group_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id, 10_000, 10_000, "consumer", (("range", b""),), require_known_member_id=False
    )


def test_list_groups_gives_each_group_its_type_and_state(reconciling: Driver) -> None:
    # A commit stores the consumer group's offsets in the shared offsets store: still one group.
    commit = OffsetCommitPartition("orders", 2, 7)
    reconciling.handle(OffsetCommitRequest(GROUP, (commit,), generation_id=1, member_id="a", version=9))
    reconciling.handle(OffsetCommitRequest("simple", (OffsetCommitPartition("orders", 0, 5),)))
    reconciling.shard.handle(classic_join("classic"), reconciling.now, "join")
    assert listed(reconciling) == [
        ListedGroup("classic", "consumer", "PreparingRebalance", "classic"),
        ListedGroup(GROUP, "consumer", "Reconciling", "consumer"),
        ListedGroup("simple", "", "Empty", "classic"),
    ]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"types_filter": ("CONSUMER",)}, [GROUP]),
        ({"types_filter": ("Classic",)}, ["simple"]),
        ({"types_filter": ("classic", "consumer")}, [GROUP, "simple"]),
        ({"types_filter": ("share",)}, []),  # unknown: nothing, as Kafka
        ({"states_filter": (" RECONCILING ",)}, [GROUP]),  # states are trimmed and case-insensitive
        ({"states_filter": ("empty",)}, ["simple"]),
        ({"states_filter": ("empty",), "types_filter": ("consumer",)}, []),
        ({"states_filter": ("assigning", "reconciling"), "types_filter": ("consumer",)}, [GROUP]),
        ({"states_filter": ("nosuchstate",)}, []),
    ],
)
def test_list_groups_filters(
    reconciling: Driver, filters: dict[str, tuple[str, ...]], expected: list[str]
) -> None:
    reconciling.handle(OffsetCommitRequest("simple", (OffsetCommitPartition("orders", 0, 5),)))
    assert [g.group_id for g in listed(reconciling, **filters)] == expected


def test_an_empty_consumer_group_is_listed_empty() -> None:
    driver = Driver({"orders": 1})
    driver.ok(join("a", "orders"))
    driver.ok(beat("a", -1))
    assert listed(driver) == [ListedGroup(GROUP, "consumer", "Empty", "consumer")]
    [group] = described(driver, GROUP)
    assert (group.group_state, group.members) == ("Empty", ())


def test_runtime_reads_and_refusals() -> None:
    request = ConsumerGroupDescribeRequest(("g1", "g2"))
    assert REQUEST_GROUPS[ConsumerGroupDescribeRequest](request) == ("g1", "g2")
    assert ConsumerGroupDescribeRequest not in WRITE_REQUESTS
    refused = precheck(request, CoordinatorStatus.LOADING)
    assert refused == ConsumerGroupDescribeResponse(
        (
            DescribedConsumerGroup(Errors.COORDINATOR_LOAD_IN_PROGRESS, "g1"),
            DescribedConsumerGroup(Errors.COORDINATOR_LOAD_IN_PROGRESS, "g2"),
        )
    )
    assert list(item_errors(refused) or ()) == [Errors.COORDINATOR_LOAD_IN_PROGRESS] * 2


def test_the_request_checks_its_fields() -> None:
    with pytest.raises(TypeError):
        ConsumerGroupDescribeRequest(["g"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ListGroupsRequest(types_filter=("consumer", 1))  # type: ignore[arg-type]
