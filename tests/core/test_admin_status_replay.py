"""DescribeGroups, ListGroups, DeleteGroups, coordinator status checks,
routing, and the replay round trip."""

import pytest

from coordinator import (
    CoordinatorStatus,
    Errors,
    GroupState,
    Shard,
    java_string_hash,
    partition_for,
    precheck,
)
from coordinator.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from coordinator.records import GroupMetadataKey
from coordinator.status import response_error

from tests.core.harness import Harness


def test_describe_stable_and_rebalancing_group() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2, client_host="/10.0.0.1")
    [described] = h.call(DescribeGroupsRequest(("g",))).groups
    assert (
        described.state == "Stable"
        and described.protocol == "range"
        and described.protocol_type == "consumer"
    )
    assert {m.member_id: m.assignment for m in described.members} == {
        leader: leader.encode(),
        f1: f1.encode(),
    }
    assert all(m.client_host == "/10.0.0.1" and m.metadata for m in described.members)
    h.join("g", leader)
    [rebalancing] = h.call(DescribeGroupsRequest(("g",))).groups
    assert rebalancing.state == "PreparingRebalance" and rebalancing.protocol == ""
    assert all(m.assignment == b"" and m.metadata == b"" for m in rebalancing.members)


def test_describe_unknown_and_invalid() -> None:
    h = Harness()
    dead, empty_id = h.call(DescribeGroupsRequest(("nope", ""))).groups
    assert (dead.error, dead.state) == (Errors.NONE, "Dead")
    assert (empty_id.error, empty_id.state) == (Errors.NONE, "Dead")


def test_list_groups_with_state_filter() -> None:
    h = Harness()
    h.form_group("a", 1)
    h.commit("b", {("t", 0): 1})
    h.join("c")
    listed = h.call(ListGroupsRequest()).groups
    assert {(g.group_id, g.state, g.protocol_type) for g in listed} == {
        ("a", "Stable", "consumer"),
        ("b", "Empty", ""),
        ("c", "PreparingRebalance", "consumer"),
    }
    stable = h.call(ListGroupsRequest(("STABLE", "empty"))).groups
    assert {g.group_id for g in stable} == {"a", "b"}


def test_delete_groups() -> None:
    h = Harness()
    (m,), gen = h.form_group("busy", 1)
    h.commit("simple", {("t", 0): 1})
    (m2,), gen2 = h.form_group("done", 1)
    h.commit("done", {("t", 0): 1}, gen2, m2)
    h.leave("done", m2)
    response = h.call(DeleteGroupsRequest(("busy", "simple", "done", "nope", "")))
    assert response.errors() == {
        "busy": Errors.NON_EMPTY_GROUP,
        "simple": Errors.NONE,
        "done": Errors.NONE,
        "nope": Errors.GROUP_ID_NOT_FOUND,
        "": Errors.GROUP_ID_NOT_FOUND,
    }
    assert set(h.shard.groups) == {"busy"}
    assert h.log[-1].key == GroupMetadataKey("done") and h.log[-1].value is None
    assert h.fetch("done") == {}


@pytest.mark.parametrize(
    "status,request_,error",
    [
        (CoordinatorStatus.LOADING, HeartbeatRequest("g", 1, "m"), Errors.NONE),
        (CoordinatorStatus.LOADING, SyncGroupRequest("g", 1, "m"), Errors.REBALANCE_IN_PROGRESS),
        (CoordinatorStatus.NOT_COORDINATOR, SyncGroupRequest("g", 1, "m"), Errors.NOT_COORDINATOR),
        (CoordinatorStatus.NOT_AVAILABLE, HeartbeatRequest("g", 1, "m"), Errors.COORDINATOR_NOT_AVAILABLE),
        (CoordinatorStatus.LOADING, HeartbeatRequest("", 1, "m"), Errors.INVALID_GROUP_ID),
    ],
)
def test_precheck_special_cases(status: CoordinatorStatus, request_: object, error: Errors) -> None:
    response = precheck(request_, status)  # type: ignore[arg-type]
    assert response is not None and response.error is error  # type: ignore[attr-defined]


def test_precheck_errors_reach_every_partition() -> None:
    commit = OffsetCommitRequest("g", (OffsetCommitPartition("t", 0, 1), OffsetCommitPartition("t", 1, 1)))
    response = precheck(commit, CoordinatorStatus.LOADING)
    assert set(response.errors().values()) == {Errors.COORDINATOR_LOAD_IN_PROGRESS}  # type: ignore[union-attr]
    fetch = precheck(OffsetFetchRequest("g", (("t", 0),)), CoordinatorStatus.NOT_COORDINATOR)
    assert fetch.error is Errors.NOT_COORDINATOR  # type: ignore[union-attr]
    assert precheck(JoinGroupRequest("g", 10, 10, "c", ()), CoordinatorStatus.ACTIVE) is None


def test_response_error_sees_item_errors() -> None:
    h = Harness()
    ok = h.shard.handle(OffsetCommitRequest("g", (OffsetCommitPartition("t", 0, 1),)), 0).responses[0][1]
    assert response_error(ok) is Errors.NONE
    too_large = OffsetCommitRequest(
        "g", (OffsetCommitPartition("t", 0, 1), OffsetCommitPartition("t", 1, 1, "m" * 10_000))
    )
    mixed = h.shard.handle(too_large, 0).responses[0][1]
    assert response_error(mixed) is Errors.OFFSET_METADATA_TOO_LARGE
    deleted = h.call(DeleteGroupsRequest(("g", "nobody")))
    assert response_error(deleted) is Errors.GROUP_ID_NOT_FOUND
    described = precheck(DescribeGroupsRequest(("g",)), CoordinatorStatus.NOT_COORDINATOR)
    assert response_error(described) is Errors.NOT_COORDINATOR
    listed = precheck(ListGroupsRequest(), CoordinatorStatus.LOADING)
    assert response_error(listed) is Errors.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize(
    "text,expected",
    # Values printed by Java 17's String.hashCode.
    [
        ("", 0),
        ("a", 97),
        ("group", 98629247),
        ("consumer-group-1", 147483020),
        ("é☃", 16954),
        ("😀x", 54959989),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def reference_java_hash(text: str) -> int:
    """String.hashCode by its definition, one UTF-16 unit at a time."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize("length", [1, 2, 31, 63, 64, 65, 200])
@pytest.mark.parametrize("unit", ["g", "é", "😀"])
def test_java_string_hash_of_long_and_wide_ids_matches_its_definition(length: int, unit: str) -> None:
    text = (f"group-{unit}-" * length)[:length]
    assert java_string_hash(text) == reference_java_hash(text)


def test_partition_for_uses_kafkas_abs() -> None:
    assert partition_for("consumer-group-1", 50) == 20
    assert partition_for("😀x", 50) == 39  # surrogate pairs hash as two UTF-16 units
    # "polygenelubricants" hashes to Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0


def test_replay_round_trip_rebuilds_an_equal_shard() -> None:
    h = Harness()
    (a1, a2), gen = h.form_group("a", 2, group_instance_id=None)
    h.commit("a", {("t", 0): 10, ("t", 1): 11}, gen, a1)
    h.commit("simple", {("u", 0): 3})
    (b1,), gen_b = h.form_group("b", 1)
    h.leave("b", b1)
    h.commit("gone", {("t", 0): 1})
    h.call(DeleteGroupsRequest(("gone",)))
    rebuilt = h.replayed()
    assert rebuilt.persistent_view() == h.shard.persistent_view()
    assert rebuilt.groups["a"].state is GroupState.STABLE and rebuilt.groups["b"].state is GroupState.EMPTY


def test_loaded_members_get_a_session_timeout_from_load_time() -> None:
    h = Harness()
    (m,), gen = h.form_group("g", 1)
    shard = Shard(h.shard.config)
    shard.replay_many(h.log)
    shard.on_loaded(h.now + 5_000)
    assert shard.poll_timers(h.now + 14_999) == []
    shard.poll_timers(h.now + 15_000)
    group = shard.groups["g"]
    assert group.size == 0 and group.state is GroupState.EMPTY and group.generation_id == gen + 1


def test_unload_answers_parked_requests_with_not_coordinator() -> None:
    h = Harness()
    t = h.join("g")
    h.absorb(h.shard.unload(h.now))
    assert h.take(t).error is Errors.NOT_COORDINATOR
    assert h.shard.groups == {} and len(h.shard.timers) == 0
