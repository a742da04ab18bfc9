"""OffsetCommit and OffsetFetch for consumer groups: member epochs checked as Kafka, by version;
standalone commits (no member) keep working, classic groups are unchanged."""

from __future__ import annotations

from coordinator.errors import Errors
from coordinator.messages import (
    DeleteGroupsRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from tests.consumer.heartbeat_harness import GROUP, Driver, beat, join


def commit(driver: Driver, epoch: int, member_id: str = "", version: int = 9) -> Errors:
    request = OffsetCommitRequest(
        GROUP,
        (OffsetCommitPartition("foo", 0, 42),),
        generation_id=epoch,
        member_id=member_id,
        version=version,
    )
    response = driver.handle(request)
    assert isinstance(response, OffsetCommitResponse)
    (result,) = response.partitions
    return result.error


def fetch(driver: Driver, member_id: str | None, epoch: int) -> OffsetFetchResponse:
    request = OffsetFetchRequest(GROUP, (("foo", 0),), member_id=member_id, member_epoch=epoch)
    response = driver.handle(request)
    assert isinstance(response, OffsetFetchResponse)
    return response


def test_members_commit_and_fetch_at_their_epoch() -> None:
    driver = Driver({"foo": 1})
    a = driver.ok(join("A", "foo"))
    assert commit(driver, a.member_epoch, "A") is Errors.NONE
    assert fetch(driver, "A", a.member_epoch).offsets() == {("foo", 0): 42}
    assert fetch(driver, None, -1).offsets() == {("foo", 0): 42}, "the admin client fetches freely"

    assert commit(driver, a.member_epoch + 1, "A") is Errors.STALE_MEMBER_EPOCH
    assert commit(driver, a.member_epoch, "X") is Errors.UNKNOWN_MEMBER_ID
    assert commit(driver, -1, "") is Errors.UNKNOWN_MEMBER_ID, "only members commit to a group with members"
    assert commit(driver, a.member_epoch, "A", version=8) is Errors.UNSUPPORTED_VERSION
    assert fetch(driver, "A", a.member_epoch + 1).error is Errors.STALE_MEMBER_EPOCH
    assert fetch(driver, "X", 1).error is Errors.UNKNOWN_MEMBER_ID


def test_an_empty_consumer_group_takes_standalone_commits() -> None:
    driver = Driver({"foo": 1})
    driver.ok(join("A", "foo"))
    driver.ok(beat("A", -1))
    assert commit(driver, -1) is Errors.NONE
    assert fetch(driver, None, -1).offsets() == {("foo", 0): 42}
    # Offsets survive a reload with the consumer group.
    rebuilt = driver.replayed()
    assert rebuilt.groups[GROUP].offsets == driver.shard.groups[GROUP].offsets


def test_commit_to_a_missing_group_by_version() -> None:
    driver = Driver({"foo": 1})
    assert commit(driver, 3, "A", version=9) is Errors.GROUP_ID_NOT_FOUND
    assert commit(driver, 3, "A", version=8) is Errors.ILLEGAL_GENERATION
    assert commit(driver, -1, "", version=9) is Errors.NONE, "a standalone consumer creates a simple group"


def test_offset_delete_and_delete_groups_respect_the_consumer_group() -> None:
    driver = Driver({"foo": 1, "bar": 1})
    a = driver.ok(join("A", "foo"))
    assert commit(driver, a.member_epoch, "A") is Errors.NONE
    bar = OffsetCommitRequest(
        GROUP, (OffsetCommitPartition("bar", 0, 7),), generation_id=a.member_epoch, member_id="A", version=9
    )
    driver.handle(bar)
    answer = driver.handle(OffsetDeleteRequest(GROUP, (("foo", 0), ("bar", 0))))
    assert answer.error is Errors.NONE
    assert {(r.topic, r.error) for r in answer.partitions} == {
        ("foo", Errors.GROUP_SUBSCRIBED_TO_TOPIC),
        ("bar", Errors.NONE),
    }
    assert fetch(driver, None, -1).offsets() == {("foo", 0): 42}

    assert driver.handle(DeleteGroupsRequest((GROUP,))).errors() == {GROUP: Errors.NON_EMPTY_GROUP}
    driver.ok(beat("A", -1))
    assert driver.handle(DeleteGroupsRequest((GROUP,))).errors() == {GROUP: Errors.NONE}
    assert GROUP not in driver.shard.consumer_groups and GROUP not in driver.shard.groups
    rebuilt = driver.replayed()
    assert GROUP not in rebuilt.consumer_groups and GROUP not in rebuilt.groups


def test_expiry_keeps_subscribed_offsets_and_deletes_an_empty_group_without_offsets() -> None:
    driver = Driver(
        {"foo": 1, "bar": 1}, offsets_retention_minutes=1, offsets_retention_check_interval_ms=5_000
    )
    a = driver.ok(join("A", "foo"))
    commit(driver, a.member_epoch, "A")
    driver.handle(
        OffsetCommitRequest(
            GROUP,
            (OffsetCommitPartition("bar", 0, 7),),
            generation_id=a.member_epoch,
            member_id="A",
            version=9,
        )
    )
    retention_ms = driver.shard.config.offsets_retention_ms
    for _ in range(8):  # two retention periods, heartbeating
        driver.advance(15_000)
        driver.ok(beat("A", a.member_epoch))
    assert fetch(driver, None, -1).offsets() == {("foo", 0): 42}, "bar expired, foo is subscribed"

    driver.ok(beat("A", -1))
    driver.advance(retention_ms + driver.shard.config.offsets_retention_check_interval_ms)
    assert GROUP not in driver.shard.groups and GROUP not in driver.shard.consumer_groups
    rebuilt = driver.replayed()
    assert GROUP not in rebuilt.groups and GROUP not in rebuilt.consumer_groups
