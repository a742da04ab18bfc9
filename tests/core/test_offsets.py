"""OffsetCommit, OffsetFetch, OffsetDelete and KIP-211 offset expiration."""

import pytest

from coordinator import Errors, GroupState, offsets
from coordinator.consumer_protocol import Subscription, encode_subscription
from coordinator.messages import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from coordinator.records import GroupMetadataKey, OffsetCommitKey

from tests.core.harness import Harness

RETENTION_MS = 60_000
CHECK_MS = 5_000


def expiring_harness() -> Harness:
    return Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=CHECK_MS)


def test_simple_group_commit_and_fetch() -> None:
    h = Harness()
    assert h.commit("simple", {("t", 0): 5, ("t", 1): 7}) == {("t", 0): Errors.NONE, ("t", 1): Errors.NONE}
    assert h.fetch("simple", [("t", 0), ("t", 9)]) == {("t", 0): 5, ("t", 9): -1}
    assert h.fetch("simple") == {("t", 0): 5, ("t", 1): 7}
    group = h.shard.groups["simple"]
    assert group.state is GroupState.EMPTY and group.generation_id == 0 and group.protocol_type is None
    assert [r.key for r in h.log] == [OffsetCommitKey("simple", "t", 0), OffsetCommitKey("simple", "t", 1)]
    assert h.log[0].value.commit_timestamp_ms == h.now


def test_empty_group_id_is_allowed_for_offsets() -> None:
    h = Harness()
    assert h.commit("", {("t", 0): 1}) == {("t", 0): Errors.NONE}
    assert h.fetch("", [("t", 0)]) == {("t", 0): 1}


def test_commit_to_unknown_group_with_generation_is_illegal_generation() -> None:
    h = Harness()
    assert h.commit("g", {("t", 0): 1}, generation=3, member_id="m") == {("t", 0): Errors.ILLEGAL_GENERATION}
    assert "g" not in h.shard.groups


def test_commit_checks_on_a_managed_group() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2)
    tp = ("t", 0)
    assert h.commit("g", {tp: 1}) == {tp: Errors.UNKNOWN_MEMBER_ID}, "non-members cannot commit"
    assert h.commit("g", {tp: 1}, gen, "ghost") == {tp: Errors.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {tp: 1}, gen + 1, f1) == {tp: Errors.ILLEGAL_GENERATION}
    assert h.commit("g", {tp: 1}, gen, f1, group_instance_id="x") == {tp: Errors.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {tp: 1}, gen, f1) == {tp: Errors.NONE}
    h.join("g", leader)  # PreparingRebalance: the old generation may still commit
    assert h.commit("g", {tp: 2}, gen, f1) == {tp: Errors.NONE}
    assert h.fetch("g", [tp]) == {tp: 2}


def test_commit_in_completing_rebalance() -> None:
    h = Harness()
    t = h.join("g")
    h.advance_until_answered([t])
    r = h.take(t)
    assert h.commit("g", {("t", 0): 1}, r.generation_id, r.member_id) == {
        ("t", 0): Errors.REBALANCE_IN_PROGRESS
    }


def test_metadata_too_large_per_partition() -> None:
    h = Harness(offset_metadata_max_bytes=10)
    parts = (OffsetCommitPartition("t", 0, 1, "x" * 11), OffsetCommitPartition("t", 1, 1, "é" * 5))
    response = h.call(OffsetCommitRequest("s", parts))
    assert response.errors() == {("t", 0): Errors.OFFSET_METADATA_TOO_LARGE, ("t", 1): Errors.NONE}
    assert [r.key.partition for r in h.log] == [1]


def test_commit_too_large_is_invalid_commit_offset_size() -> None:
    h = Harness(offsets_max_commit_bytes=1_000)
    parts = tuple(OffsetCommitPartition("topic", p, 1) for p in range(100))
    response = h.call(OffsetCommitRequest("s", parts))
    assert set(response.errors().values()) == {Errors.INVALID_COMMIT_OFFSET_SIZE}
    assert h.log == []


def test_commits_built_by_columns_and_partition_by_partition_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # Large commits are built column by column, small ones partition by partition.
    for width in (1, offsets.COLUMNS_FROM_PARTITIONS - 1, offsets.COLUMNS_FROM_PARTITIONS, 100):
        parts = tuple(OffsetCommitPartition(f"t{p % 3}", p, p, "m" * (p % 4), p % 2) for p in range(width))
        outcomes = []
        for columns_from in (1, 1_000):
            monkeypatch.setattr(offsets, "COLUMNS_FROM_PARTITIONS", columns_from)
            h = Harness()
            response = h.call(OffsetCommitRequest("s", parts, retention_time_ms=RETENTION_MS))
            outcomes.append((response, h.log, h.fetch("s")))
        assert outcomes[0] == outcomes[1] and len(outcomes[0][1]) == width


def test_fetch_all_of_unknown_group_is_empty() -> None:
    h = Harness()
    response = h.call(OffsetFetchRequest("nope", None))
    assert response.error is Errors.NONE and response.partitions == ()


# ----------------------------------------------------------- expiration


def test_simple_group_offsets_expire_from_commit_time_and_group_goes() -> None:
    h = expiring_harness()
    h.commit("s", {("t", 0): 1})
    h.advance(20_000)
    h.commit("s", {("t", 1): 1})
    h.advance(RETENTION_MS - 20_000 + CHECK_MS)
    assert h.fetch("s") == {("t", 1): 1}
    assert h.log[-1].key == OffsetCommitKey("s", "t", 0) and h.log[-1].value is None
    h.advance(20_000)
    assert "s" not in h.shard.groups
    assert not any(r.key == GroupMetadataKey("s") for r in h.log), "generation 0: no group tombstone"


def test_empty_consumer_group_expires_from_when_it_became_empty() -> None:
    h = expiring_harness()
    (m,), gen = h.form_group("g", 1)
    h.commit("g", {("t", 0): 1}, gen, m)
    for _ in range(20):  # the member stays: its subscribed offsets stay
        h.advance(CHECK_MS)
        h.commit("g", {("t", 0): 2}, gen, m)
    h.leave("g", m)
    assert h.shard.groups["g"].state is GroupState.EMPTY
    h.advance(RETENTION_MS - CHECK_MS)
    assert h.fetch("g") == {("t", 0): 2}
    h.advance(2 * CHECK_MS)
    assert "g" not in h.shard.groups
    assert h.log[-2].key == OffsetCommitKey("g", "t", 0) and h.log[-2].value is None
    assert h.log[-1].key == GroupMetadataKey("g") and h.log[-1].value is None


def test_stable_group_expires_only_unsubscribed_topics() -> None:
    h = expiring_harness()
    (m,), gen = h.form_group("g", 1)  # subscribed to "t"
    h.commit("g", {("t", 0): 1, ("old", 0): 1}, gen, m)
    for _ in range(30):
        h.advance(CHECK_MS)
        assert h.heartbeat("g", m, gen) is Errors.NONE
    assert h.fetch("g") == {("t", 0): 1}


def test_explicit_retention_time_wins() -> None:
    h = expiring_harness()
    h.call(OffsetCommitRequest("s", (OffsetCommitPartition("t", 0, 1),), retention_time_ms=1_000))
    h.advance(CHECK_MS)
    assert h.fetch("s") == {}


# ------------------------------------------------------------ OffsetDelete


def test_offset_delete_rules() -> None:
    h = Harness()
    assert h.call(OffsetDeleteRequest("nope", (("t", 0),))).error is Errors.GROUP_ID_NOT_FOUND
    subscription = encode_subscription(Subscription(("t",)))
    (m,), gen = h.form_group("g", 1, protocols=(("range", subscription),))
    h.commit("g", {("t", 0): 1, ("u", 0): 1}, gen, m)
    response = h.call(OffsetDeleteRequest("g", (("t", 0), ("u", 0))))
    assert response.error is Errors.NONE
    assert {(p.topic, p.error) for p in response.partitions} == {
        ("t", Errors.GROUP_SUBSCRIBED_TO_TOPIC),
        ("u", Errors.NONE),
    }
    assert h.fetch("g") == {("t", 0): 1}


def test_offset_delete_non_consumer_group_is_non_empty() -> None:
    h = Harness()
    h.form_group("g", 1, protocol_type="connect")
    assert h.call(OffsetDeleteRequest("g", (("t", 0),))).error is Errors.NON_EMPTY_GROUP


def test_offset_delete_on_empty_group_writes_tombstones() -> None:
    h = Harness()
    h.commit("s", {("t", 0): 1, ("t", 1): 1})
    response = h.call(OffsetDeleteRequest("s", (("t", 0), ("x", 9))))
    assert {(p.topic, p.partition): p.error for p in response.partitions} == {
        ("t", 0): Errors.NONE,
        ("x", 9): Errors.NONE,
    }
    assert h.log[-1].key == OffsetCommitKey("s", "t", 0) and h.log[-1].value is None
    assert h.fetch("s") == {("t", 1): 1}
