"""ConsumerGroupHeartbeat: regex subscriptions, every validation rule and error code, group types,
and crash-and-replay (a shard rebuilt from the records equals the live one)."""

from __future__ import annotations

import pytest

from coordinator import InvalidRequestError, validate_request
from coordinator.consumer import records as helpers
from coordinator.consumer.group import ResolvedRegularExpression
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.errors import Errors
from coordinator.messages import ConsumerGroupHeartbeatRequest, JoinGroupRequest, JoinGroupResponse

from tests.consumer.group_history import state
from tests.consumer.heartbeat_harness import GROUP, Driver, beat, join, owned, tp


def test_regex_subscription_is_a_full_match_with_re2_and_follows_new_topics() -> None:
    driver = Driver({"foo-1": 1, "foo-2": 2, "foo": 1, "bar": 1})
    a = driver.ok(join("A", subscribed_topic_names=None, subscribed_topic_regex="foo-.*"))
    assert owned(a.assignment) == {topic_id_for("foo-1"): {0}, topic_id_for("foo-2"): {0, 1}}
    resolved = ResolvedRegularExpression(frozenset({"foo-1", "foo-2"}), 1, driver.now)
    assert helpers.regular_expression_record(GROUP, "foo-.*", resolved) in driver.last

    written = driver.topics({"foo-1": 1, "foo-2": 2, "foo": 1, "bar": 1, "foo-3": 1})
    resolved = ResolvedRegularExpression(frozenset({"foo-1", "foo-2", "foo-3"}), 2, driver.now)
    assert written[0] == helpers.regular_expression_record(GROUP, "foo-.*", resolved)
    assert written[-1] == helpers.epoch_record(GROUP, 2)
    a2 = driver.ok(beat("A", 1, ()))
    assert topic_id_for("foo-3") in owned(a2.assignment)
    driver.assert_replay_equals_live()

    # `^foo` matches only "foo" (RE2 full match), not "foo-1".
    b = driver.ok(join("B", subscribed_topic_names=None, subscribed_topic_regex="^foo"))
    group = driver.shard.consumer_groups[GROUP]
    assert group.resolved_regular_expressions["^foo"].topics == {"foo"}
    assert set(group.target_assignment["B"]) == {topic_id_for("foo")}
    assert b.member_epoch == 3

    # The last subscriber of a regex leaving tombstones it.
    driver.ok(beat("B", b.member_epoch, subscribed_topic_names=(), subscribed_topic_regex=""))
    assert helpers.regular_expression_tombstone(GROUP, "^foo") in driver.last
    driver.assert_replay_equals_live()


def test_a_regex_that_does_not_compile_is_refused() -> None:
    driver = Driver({"foo": 1})
    response = driver.refused(
        join("A", subscribed_topic_names=None, subscribed_topic_regex="foo("),
        Errors.INVALID_REGULAR_EXPRESSION,
    )
    assert "foo(" in (response.error_message or "")
    assert GROUP not in driver.shard.consumer_groups


def request(**fields: object) -> ConsumerGroupHeartbeatRequest:
    base: dict[str, object] = {
        "group_id": GROUP,
        "member_id": "A",
        "member_epoch": 0,
        "rebalance_timeout_ms": 1_000,
        "subscribed_topic_names": ("foo",),
        "topic_partitions": (),
    }
    base.update(fields)
    return ConsumerGroupHeartbeatRequest(**base)  # type: ignore[arg-type]


INVALID = [
    ("MemberId can't be empty.", request(member_id="")),
    ("MemberId can't be empty.", request(member_id="", member_epoch=3, version=0)),
    ("MemberId can't be empty.", request(member_id="", member_epoch=-1, version=0)),
    ("GroupId can't be empty.", request(group_id="")),
    ("InstanceId can't be empty.", request(instance_id="")),
    ("RackId can't be empty.", request(rack_id="")),
    ("RebalanceTimeoutMs must be provided in first request.", request(rebalance_timeout_ms=-1)),
    ("TopicPartitions must be empty when (re-)joining.", request(topic_partitions=None)),
    ("TopicPartitions must be empty when (re-)joining.", request(topic_partitions=(tp("foo", 0),))),
    (
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        request(subscribed_topic_names=None),
    ),
    ("InstanceId can't be null.", request(member_epoch=-2)),
    ("MemberEpoch is invalid.", request(member_epoch=-3)),
    ("SubscribedTopicRegex needs version 1 or above.", request(version=0, subscribed_topic_regex="x")),
]


@pytest.mark.parametrize(
    ("message", "bad"), INVALID, ids=[f"{i}-{m[:24]}" for i, (m, _) in enumerate(INVALID)]
)
def test_invalid_requests_are_answered_to_that_member_alone(
    message: str, bad: ConsumerGroupHeartbeatRequest
) -> None:
    driver = Driver({"foo": 1})
    driver.ok(join("B", "foo"))
    response = driver.refused(bad, Errors.INVALID_REQUEST)
    assert response.error_message == message
    assert driver.ok(beat("B", 1)).member_epoch == 1, "the group goes on"


def test_unsupported_assignor() -> None:
    response = Driver({"foo": 1}).refused(request(server_assignor="sticky"), Errors.UNSUPPORTED_ASSIGNOR)
    assert (
        response.error_message
        == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )


def test_v0_join_without_member_id_gets_one_generated_from_the_seed() -> None:
    first = Driver({"foo": 1}).ok(request(member_id="", version=0))
    second = Driver({"foo": 1}).ok(request(member_id="", version=0))
    assert first.member_id and first.member_id == second.member_id and len(first.member_id) == 22


def test_group_and_member_errors() -> None:
    driver = Driver({"foo": 2}, group_consumer_max_size=2)
    driver.refused(beat("A", 1), Errors.GROUP_ID_NOT_FOUND)
    driver.refused(beat("A", -1), Errors.GROUP_ID_NOT_FOUND)
    a = driver.ok(join("A", "foo"))
    driver.refused(beat("X", 1), Errors.UNKNOWN_MEMBER_ID)
    driver.refused(beat("X", -1), Errors.UNKNOWN_MEMBER_ID)
    driver.refused(beat("A", a.member_epoch + 1), Errors.FENCED_MEMBER_EPOCH)
    driver.ok(join("B", "foo"))
    driver.refused(join("C", "foo"), Errors.GROUP_MAX_SIZE_REACHED)
    # A is now at epoch 1 with epoch 2 pending: its previous epoch with a subset of its partitions passes.
    driver.ok(beat("A", 1, (tp("foo", 0, 1),)))


def test_range_assignor_is_used_when_members_prefer_it() -> None:
    driver = Driver({"foo": 4, "bar": 4})
    driver.ok(join("A", "foo", "bar", server_assignor="range"))
    driver.ok(join("B", "foo", "bar", server_assignor="range"))
    target = driver.shard.consumer_groups[GROUP].target_assignment
    foo, bar = topic_id_for("foo"), topic_id_for("bar")
    # Range co-partitions: each member gets the same partition numbers of both topics.
    assert target["A"][foo] == target["A"][bar] and target["B"][foo] == target["B"][bar]


def classic_join(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(GROUP, 10_000, 30_000, "consumer", (("range", b""),), member_id=member_id)


def test_one_group_id_is_never_both_types() -> None:
    driver = Driver({"foo": 1})
    result = driver.shard.handle(classic_join(), driver.now, "join")
    assert result.responses[0][1].error is Errors.MEMBER_ID_REQUIRED
    member_id = result.responses[0][1].member_id
    driver.shard.handle(classic_join(member_id), driver.now, "join")  # parked: a classic group in use
    driver.refused(join("A", "foo"), Errors.GROUP_ID_NOT_FOUND)

    other = Driver({"foo": 1})
    other.ok(join("A", "foo"))
    # A JoinGroup to a consumer group with members joins it as a classic member (test_migration.py);
    # a subscription that is not ConsumerProtocol bytes is refused.
    answer = other.shard.handle(classic_join(), other.now, "join").responses[0][1]
    assert isinstance(answer, JoinGroupResponse) and answer.error is Errors.MEMBER_ID_REQUIRED
    answer = other.shard.handle(classic_join(answer.member_id), other.now, "join").responses[0][1]
    assert isinstance(answer, JoinGroupResponse) and answer.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    other.ok(beat("A", -1))
    # An empty consumer group is deleted (its tombstones) and the classic group is created.
    result = other.shard.handle(classic_join(), other.now, "join")
    assert result.records == [
        helpers.target_assignment_epoch_tombstone(GROUP),
        helpers.subscription_metadata_tombstone(GROUP),
        helpers.epoch_tombstone(GROUP),
    ]
    assert GROUP not in other.shard.consumer_groups


def test_crash_and_replay_rebuilds_the_live_groups_and_their_timers() -> None:
    driver = Driver({"foo": 6, "bar": 3})
    driver.ok(join("A", "foo", "bar"))
    driver.ok(join("B", "foo", instance_id="i-b"))
    driver.ok(join("C", subscribed_topic_names=None, subscribed_topic_regex="ba.*"))
    driver.ok(beat("A", 1, (tp("foo", 0, 1, 2, 3, 4, 5), tp("bar", 0, 1, 2))))
    driver.topics({"foo": 8, "bar": 3})
    driver.ok(beat("C", 3, ()))
    driver.ok(beat("B", -2, instance_id="i-b"))

    rebuilt = driver.replayed()
    assert state(rebuilt.consumer_groups) == state(driver.shard.consumer_groups)
    rebuilt.on_loaded(driver.now)
    live = {key for key in driver.shard.timers._live if key[0] != "expire-offsets"}
    assert {key for key in rebuilt.timers._live if key[0] != "expire-offsets"} == live


def test_field_types_are_checked_at_construction_and_at_the_partition_entry() -> None:
    validate_request(request(topic_partitions=(tp("foo", 0),), member_epoch=3))
    with pytest.raises(TypeError):
        request(topic_partitions=(("foo", (0,)),))
    with pytest.raises(TypeError):
        request(subscribed_topic_names=["foo"])
    # A request rebuilt without its constructor (as from the wire) is checked where it enters.
    good = request()
    forged = object.__new__(ConsumerGroupHeartbeatRequest)
    for name in ConsumerGroupHeartbeatRequest.__dataclass_fields__:
        object.__setattr__(forged, name, getattr(good, name))
    object.__setattr__(forged, "topic_partitions", (("not-a-uuid", (0,)),))
    with pytest.raises(InvalidRequestError):
        validate_request(forged)
