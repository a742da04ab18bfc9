"""SyncGroup, Heartbeat, LeaveGroup and session expiry in every state."""

from coordinator import Errors, GroupState
from coordinator.messages import LeaveGroupRequest, MemberIdentity, SyncGroupRequest
from coordinator.records import GroupMetadataKey

from tests.core.harness import REBALANCE_MS, SESSION_MS, Harness

S = GroupState


def completing_group(h: Harness, n: int = 2, **kw: object) -> tuple[list[str], int]:
    tokens = [h.join("g", **kw) for _ in range(n)]
    h.advance_until_answered(tokens)
    responses = [h.take(t) for t in tokens]
    leader = responses[0].leader
    ids = [leader] + [r.member_id for r in responses if r.member_id != leader]
    return ids, responses[0].generation_id


# ---------------------------------------------------------------- SyncGroup


def test_sync_errors_in_kafka_order() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2)
    assert h.take(h.sync("nope", leader, gen)).error is Errors.UNKNOWN_MEMBER_ID
    assert h.take(h.sync("g", "ghost", gen)).error is Errors.UNKNOWN_MEMBER_ID
    assert h.take(h.sync("g", f1, gen + 1)).error is Errors.ILLEGAL_GENERATION
    assert h.take(h.sync("g", f1, gen, protocol_type="connect")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.take(h.sync("g", f1, gen, protocol_name="sticky")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    stable = h.take(h.sync("g", f1, gen))
    assert stable.error is Errors.NONE and stable.assignment == f1.encode()


def test_sync_with_empty_group_id_is_invalid() -> None:
    h = Harness()
    assert h.call(SyncGroupRequest("", 1, "m")).error is Errors.INVALID_GROUP_ID


def test_followers_wait_for_leader_and_record_precedes_assignment() -> None:
    h = Harness()
    (leader, f1, f2), gen = completing_group(h, 3)
    t1, t2 = h.sync("g", f1, gen), h.sync("g", f2, gen)
    assert not h.answered(t1) and not h.answered(t2)
    before = len(h.log)
    tl = h.sync("g", leader, gen, {leader: b"L", f1: b"A", "stranger": b"X"})
    assert [r.key for r in h.log[before:]] == [GroupMetadataKey("g")]
    value = h.log[-1].value
    assert {m.member_id: m.assignment for m in value.members} == {leader: b"L", f1: b"A", f2: b""}
    assert h.take(t1).assignment == b"A" and h.take(t2).assignment == b"" and h.take(tl).assignment == b"L"
    assert h.shard.groups["g"].state is S.STABLE


def test_sync_in_preparing_rebalance() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2)
    h.join("g", leader)
    assert h.take(h.sync("g", f1, gen)).error is Errors.REBALANCE_IN_PROGRESS


def test_parked_syncs_get_rebalance_in_progress_when_a_member_joins() -> None:
    h = Harness()
    (leader, f1), gen = completing_group(h, 2)
    t1 = h.sync("g", f1, gen)
    h.join("g")
    assert h.take(t1).error is Errors.REBALANCE_IN_PROGRESS
    assert h.shard.groups["g"].state is S.PREPARING_REBALANCE


def test_follower_never_syncing_is_removed_and_group_rebalances() -> None:
    h = Harness()
    (leader, f1, f2), gen = completing_group(h, 3, session_timeout_ms=60_000)
    tl = h.sync("g", leader, gen, {leader: b"L", f1: b"A", f2: b"B"})
    t1 = h.sync("g", f1, gen)
    assert h.take(tl).error is Errors.NONE and h.take(t1).error is Errors.NONE
    h.advance(REBALANCE_MS - 1)
    assert f2 in h.shard.groups["g"].members
    h.advance(1)
    group = h.shard.groups["g"]
    assert f2 not in group.members and group.state is S.PREPARING_REBALANCE


def test_leader_never_syncing_times_out_everyone_parked() -> None:
    h = Harness()
    (leader, f1), gen = completing_group(h, 2, session_timeout_ms=60_000)
    t1 = h.sync("g", f1, gen)
    h.advance(REBALANCE_MS)
    assert h.take(t1).error is Errors.REBALANCE_IN_PROGRESS
    assert leader not in h.shard.groups["g"].members


# ---------------------------------------------------------------- Heartbeat


def test_heartbeat_by_state() -> None:
    h = Harness()
    assert h.heartbeat("g", "m", 1) is Errors.UNKNOWN_MEMBER_ID
    (leader, f1), gen = completing_group(h, 2)
    assert h.heartbeat("g", f1, gen) is Errors.NONE  # CompletingRebalance
    assert h.heartbeat("g", f1, gen + 1) is Errors.ILLEGAL_GENERATION
    assert h.heartbeat("g", "ghost", gen) is Errors.UNKNOWN_MEMBER_ID
    tl = h.sync("g", leader, gen, {})
    h.take(tl)
    assert h.heartbeat("g", f1, gen) is Errors.NONE  # Stable
    h.join("g", leader)
    assert h.heartbeat("g", f1, gen) is Errors.REBALANCE_IN_PROGRESS  # PreparingRebalance


def test_heartbeat_static_member_checks() -> None:
    h = Harness()
    (m,), gen = h.form_group("g", 1, group_instance_id="i1")
    assert h.heartbeat("g", m, gen, group_instance_id="i1") is Errors.NONE
    assert h.heartbeat("g", "other", gen, group_instance_id="i1") is Errors.FENCED_INSTANCE_ID
    assert h.heartbeat("g", m, gen, group_instance_id="i2") is Errors.UNKNOWN_MEMBER_ID


def test_heartbeat_on_empty_group() -> None:
    h = Harness()
    (m,), gen = h.form_group("g", 1)
    h.leave("g", m)
    h.advance(0)
    assert h.shard.groups["g"].state is S.EMPTY
    assert h.heartbeat("g", m, gen + 1) is Errors.UNKNOWN_MEMBER_ID


# ---------------------------------------------------------- session expiry


def test_session_expiry_in_stable_rebalances() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2)
    h.advance(SESSION_MS - 1)
    assert h.heartbeat("g", leader, gen) is Errors.NONE
    h.advance(1)
    group = h.shard.groups["g"]
    assert f1 not in group.members and group.state is S.PREPARING_REBALANCE


def test_any_request_counts_as_heartbeat() -> None:
    h = Harness()
    (leader,), gen = h.form_group("g", 1)
    for _ in range(5):
        h.advance(SESSION_MS - 1)
        assert h.commit("g", {("t", 0): 1}, gen, leader) == {("t", 0): Errors.NONE}
    assert leader in h.shard.groups["g"].members


def test_session_expiry_in_completing_rebalance() -> None:
    h = Harness()
    (leader, f1), gen = completing_group(h, 2)
    t1 = h.sync("g", f1, gen)  # parked: kept alive
    h.advance(SESSION_MS)
    group = h.shard.groups["g"]
    assert leader not in group.members, "the silent leader expires"
    assert h.take(t1).error is Errors.REBALANCE_IN_PROGRESS
    assert group.state is S.PREPARING_REBALANCE


def test_session_expiry_in_preparing_rebalance_completes_join() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2)
    tl = h.join("g", leader)
    h.advance(SESSION_MS - 1)
    assert not h.answered(tl)
    h.advance(1)
    response = h.take(tl)
    assert response.generation_id == gen + 1 and [m.member_id for m in response.members] == [leader]


def test_last_member_expiring_leaves_group_empty_with_record() -> None:
    h = Harness()
    (m,), gen = h.form_group("g", 1)
    h.advance(SESSION_MS)
    group = h.shard.groups["g"]
    assert group.state is S.EMPTY and group.generation_id == gen + 1
    assert h.log[-1].value.members == () and h.log[-1].value.generation == gen + 1


# --------------------------------------------------------------- LeaveGroup


def test_leave_batch_by_member_and_instance() -> None:
    h = Harness()
    (a, b), gen = h.form_group("g", 2)
    response = h.call(
        LeaveGroupRequest("g", (MemberIdentity(a), MemberIdentity(a), MemberIdentity("", "nobody")))
    )
    assert response.error is Errors.NONE
    assert [r.error for r in response.members] == [
        Errors.NONE,
        Errors.UNKNOWN_MEMBER_ID,
        Errors.UNKNOWN_MEMBER_ID,
    ]
    assert h.shard.groups["g"].state is S.PREPARING_REBALANCE
    assert b == h.shard.groups["g"].leader_id


def test_leave_unknown_group_reports_each_member() -> None:
    h = Harness()
    response = h.leave("nope", "a", "b")
    assert response.error is Errors.NONE
    assert [r.error for r in response.members] == [Errors.UNKNOWN_MEMBER_ID] * 2


def test_leave_by_instance_id_removes_static_member() -> None:
    h = Harness()
    (m,), gen = h.form_group("g", 1, group_instance_id="i1")
    response = h.call(LeaveGroupRequest("g", (MemberIdentity("", "i1"),)))
    assert response.members[0].error is Errors.NONE
    assert h.shard.groups["g"].state is S.EMPTY


def test_leave_of_pending_member() -> None:
    h = Harness()
    first = h.call(h.join_request())
    assert h.leave("g", first.member_id).members[0].error is Errors.NONE
    assert "g" not in h.shard.groups or not h.shard.groups["g"].pending_members


def test_leader_leaving_mid_rebalance() -> None:
    h = Harness()
    (leader, f1, f2), gen = h.form_group("g", 3)
    tl = h.join("g", leader)
    t1 = h.join("g", f1)
    h.leave("g", leader)
    assert h.take(tl).error is Errors.UNKNOWN_MEMBER_ID, "the leaver's parked join is answered"
    t2 = h.join("g", f2)
    r1, r2 = h.take(t1), h.take(t2)
    assert r1.generation_id == gen + 1
    assert r1.leader == r2.leader and r1.leader in (f1, f2)
    assert {m.member_id for m in (r1 if r1.members else r2).members} == {f1, f2}
