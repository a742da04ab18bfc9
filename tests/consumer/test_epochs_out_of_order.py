"""Heartbeats with epochs out of order, as a slow network or a confused client delivers them:
older than the member's previous epoch, previous but claiming partitions it no longer has, from
the future, after the member was fenced or left, joins repeated with one member id. Each gets
Kafka's answer (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) and writes nothing, changes no group,
and the member that is still in the group goes on from where it was.

What tests/consumer/test_heartbeat.py and test_heartbeat_errors.py already cover is not repeated:
a future epoch of a stable member, a leave of an unknown member, a previous epoch with a subset
of the assignment, a rejoin (epoch 0) of a known member owing a revocation.
"""

from __future__ import annotations

import copy

from coordinator.consumer.subscriptions import topic_id_for
from coordinator.errors import Errors
from coordinator.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

from tests.consumer.group_history import state
from tests.consumer.heartbeat_harness import GROUP, Driver, beat, join, owned, tp

FOO = topic_id_for("foo")


def refused_unchanged(
    driver: Driver, request: ConsumerGroupHeartbeatRequest, error: Errors
) -> ConsumerGroupHeartbeatResponse:
    """`request` is refused with `error`; no record, no change to any group, no timer moved."""
    groups = copy.deepcopy(state(driver.shard.consumer_groups))
    timers = dict(driver.shard.timers._live)
    response = driver.refused(request, error)
    assert response.error_message
    assert state(driver.shard.consumer_groups) == groups
    assert dict(driver.shard.timers._live) == timers
    return response


def revoking_pair() -> tuple[Driver, frozenset[int]]:
    """A at epoch 1 owing a revocation to B (epoch 2); A's kept partitions."""
    driver = Driver({"foo": 4})
    driver.ok(join("A", "foo"))
    driver.ok(join("B", "foo"))
    a = driver.ok(beat("A", 1, (tp("foo", 0, 1, 2, 3),)))
    assert a.member_epoch == 1
    return driver, owned(a.assignment)[FOO]


def test_an_epoch_older_than_the_previous_one_is_fenced() -> None:
    driver, kept = revoking_pair()
    a2 = driver.ok(beat("A", 1, (tp("foo", *sorted(kept)),)))  # revoked: epoch 2, previous 1
    assert a2.member_epoch == 2
    driver.topics({"foo": 6})  # epoch 3: A moves on to 3 with previous 2
    a3 = driver.ok(beat("A", 2, (tp("foo", *sorted(kept)),)))
    assert a3.member_epoch == 3
    # A heartbeat of epoch 1 delivered now, long after: older than the previous epoch.
    refused_unchanged(driver, beat("A", 1, (tp("foo", *sorted(kept)),)), Errors.FENCED_MEMBER_EPOCH)
    # The member itself goes on.
    assert driver.ok(beat("A", 3, (tp("foo", *sorted(kept)),))).member_epoch == 3
    driver.assert_replay_equals_live()


def test_the_previous_epoch_is_fenced_without_the_owned_list_or_with_a_partition_not_assigned() -> None:
    driver, kept = revoking_pair()
    a2 = driver.ok(beat("A", 1, (tp("foo", *sorted(kept)),)))
    assert a2.member_epoch == 2
    revoked = sorted(frozenset(range(4)) - kept)
    refused_unchanged(driver, beat("A", 1, None), Errors.FENCED_MEMBER_EPOCH)
    claims_revoked = beat("A", 1, (tp("foo", *sorted(kept), revoked[0]),))
    refused_unchanged(driver, claims_revoked, Errors.FENCED_MEMBER_EPOCH)
    refused_unchanged(driver, beat("A", 1, (tp("bar", 0),)), Errors.FENCED_MEMBER_EPOCH)
    assert driver.ok(beat("A", 2, (tp("foo", *sorted(kept)),))).member_epoch == 2


def test_a_future_epoch_while_revoking_is_fenced_and_the_revocation_still_owed() -> None:
    driver, kept = revoking_pair()
    for epoch in (2, 3, 2**31 - 1, 2**63 - 1):
        refused_unchanged(driver, beat("A", epoch, (tp("foo", *sorted(kept)),)), Errors.FENCED_MEMBER_EPOCH)
    # Still at epoch 1 owing the revocation: acknowledging it works as before.
    assert driver.ok(beat("A", 1, (tp("foo", *sorted(kept)),))).member_epoch == 2


def test_heartbeats_after_fencing_or_leaving_are_unknown() -> None:
    driver, kept = revoking_pair()
    for _ in range(3):  # A never revokes: fenced after its rebalance timeout; B stays alive
        driver.advance(20_001)
        driver.send(beat("B", 2, ()))
    assert "A" not in driver.shard.consumer_groups[GROUP].members
    for epoch in (1, 2, -1):
        refused_unchanged(driver, beat("A", epoch, (tp("foo", *sorted(kept)),)), Errors.UNKNOWN_MEMBER_ID)
    b = driver.ok(beat("B", -1))
    assert b.member_epoch == -1
    refused_unchanged(driver, beat("B", -1), Errors.UNKNOWN_MEMBER_ID)  # a leave delivered twice
    refused_unchanged(driver, beat("B", 2, ()), Errors.UNKNOWN_MEMBER_ID)
    driver.assert_replay_equals_live()


def test_a_join_repeated_with_one_member_id_changes_nothing_the_second_time() -> None:
    driver = Driver({"foo": 4})
    first = driver.ok(join("A", "foo"))
    written = len(driver.log)
    groups = copy.deepcopy(state(driver.shard.consumer_groups))
    again = driver.ok(join("A", "foo"))  # the first response was lost; the client joins again
    assert (again.member_epoch, owned(again.assignment)) == (first.member_epoch, owned(first.assignment))
    assert len(driver.log) == written, f"a repeated join wrote {driver.last}"
    assert state(driver.shard.consumer_groups) == groups
    driver.assert_replay_equals_live()
