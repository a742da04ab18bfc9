"""JoinGroup: checks in Kafka's order, the join phase, leaders, protocols."""

import pytest

from coordinator import Errors, GroupState
from coordinator.messages import JoinGroupRequest, OffsetCommitPartition

from tests.core.harness import REBALANCE_MS, SESSION_MS, Harness, protocols


def test_session_timeout_bounds() -> None:
    h = Harness()
    low = h.call(h.join_request(session_timeout_ms=5_999))
    high = h.call(h.join_request(session_timeout_ms=1_800_001))
    assert low.error is Errors.INVALID_SESSION_TIMEOUT and high.error is Errors.INVALID_SESSION_TIMEOUT
    assert h.shard.groups == {}, "a refused join must not leave a group behind"


def test_invalid_group_ids() -> None:
    h = Harness()
    assert h.call(h.join_request(group="")).error is Errors.INVALID_GROUP_ID
    assert h.call(h.join_request(group="x" * 40_000)).error is Errors.INVALID_GROUP_ID


def test_wrong_types_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match="session_timeout_ms"):
        JoinGroupRequest("g", "10", 10, "consumer", ())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="protocols"):
        JoinGroupRequest("g", 10, 10, "consumer", [("range", b"")])  # type: ignore[arg-type]


def test_negative_rebalance_timeout_is_invalid_request() -> None:
    h = Harness()
    assert h.call(h.join_request(rebalance_timeout_ms=-1)).error is Errors.INVALID_REQUEST


def test_unknown_member_of_unknown_group() -> None:
    h = Harness()
    response = h.call(h.join_request(member_id="ghost"))
    assert response.error is Errors.UNKNOWN_MEMBER_ID and response.member_id == "ghost"
    assert "g" not in h.shard.groups


def test_member_id_required_then_join() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    first = h.call(h.join_request(client_id="app"))
    assert first.error is Errors.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-")
    group = h.shard.groups["g"]
    assert first.member_id in group.pending_members
    second = h.call(h.join_request(member_id=first.member_id))
    assert second.error is Errors.NONE
    assert second.generation_id == 1 and second.leader == first.member_id
    assert second.members[0].member_id == first.member_id
    assert group.pending_members == set() and group.state is GroupState.COMPLETING_REBALANCE


def test_empty_protocols_or_type_is_inconsistent() -> None:
    h = Harness()
    assert h.call(h.join_request(protocol_type="")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.call(h.join_request(protocols=())).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.shard.groups == {}


def test_protocol_type_and_common_protocol_required() -> None:
    h = Harness()
    h.form_group("g", 1)
    other_type = h.call(h.join_request(protocol_type="connect", require_known_member_id=False))
    no_common = h.call(h.join_request(protocols=protocols("roundrobin"), require_known_member_id=False))
    assert other_type.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert no_common.error is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_initial_delay_is_extended_per_new_member_and_capped() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    t1 = h.join("g", rebalance_timeout_ms=7_000)
    h.advance(2_000)
    t2 = h.join("g", rebalance_timeout_ms=7_000)
    h.advance(1_000)  # first delay ends; a member arrived: wait one more delay
    assert not h.answered(t1)
    t3 = h.join("g", rebalance_timeout_ms=7_000)
    h.advance(3_000)  # second delay ends at 6 s; remaining budget 1 s
    assert not h.answered(t1)
    h.advance(999)
    assert not h.answered(t1)
    h.advance(1)  # capped: 3 s + 3 s + min(3 s, 1 s) = 7 s = rebalance timeout
    responses = [h.take(t) for t in (t1, t2, t3)]
    assert {r.generation_id for r in responses} == {1}
    assert sum(bool(r.members) for r in responses) == 1


def test_initial_delay_not_extended_without_new_members() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    t1 = h.join("g")
    h.advance(2_999)
    assert not h.answered(t1)
    h.advance(1)
    assert h.take(t1).error is Errors.NONE


def test_join_phase_completes_when_all_known_members_rejoin() -> None:
    h = Harness()
    (leader, f1, f2), gen = h.form_group("g", 3)
    tokens = [h.join("g", m) for m in (leader, f1)]
    assert not any(h.answered(t) for t in tokens)
    assert h.shard.groups["g"].state is GroupState.PREPARING_REBALANCE
    t3 = h.join("g", f2)
    responses = [h.take(t) for t in tokens + [t3]]
    assert {r.generation_id for r in responses} == {gen + 1}
    assert responses[0].members and not responses[1].members and not responses[2].members
    assert {m.member_id for m in responses[0].members} == {leader, f1, f2}


def test_completed_rebalances_report_their_join_phase() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    (leader, f1), gen = h.form_group("g", 2)
    # The initial delay, extended once because a second member joined in it.
    assert h.rebalances == [6_000]
    t_leader = h.join("g", leader)
    h.advance(2_500)
    assert h.rebalances == [6_000], "no generation yet: the follower has not rejoined"
    h.join("g", f1)
    assert h.take(t_leader).generation_id == gen + 1
    assert h.rebalances == [6_000, 2_500]
    # A join phase that ends with no member left is no completed rebalance.
    h.leave("g", leader, f1)
    h.advance(REBALANCE_MS)
    assert h.shard.groups["g"].state is GroupState.EMPTY
    assert h.rebalances == [6_000, 2_500]


def test_join_timeout_drops_members_that_did_not_rejoin() -> None:
    h = Harness()
    (leader, f1, f2), gen = h.form_group("g", 3, session_timeout_ms=60_000)
    t_leader = h.join("g", leader)
    assert h.heartbeat("g", f1, gen) is Errors.REBALANCE_IN_PROGRESS
    h.advance(REBALANCE_MS - 1)
    assert not h.answered(t_leader)
    h.advance(1)
    response = h.take(t_leader)
    assert response.generation_id == gen + 1
    assert [m.member_id for m in response.members] == [leader]
    assert set(h.shard.groups["g"].members) == {leader}


def test_leader_reelected_when_leader_does_not_rejoin() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2, session_timeout_ms=60_000)
    t_new = h.join("g")  # a new member triggers a rebalance
    t_f1 = h.join("g", f1)
    h.advance(REBALANCE_MS)
    r_f1 = h.take(t_f1)
    assert r_f1.leader == f1 and r_f1.members
    assert h.take(t_new).leader == f1
    assert leader not in h.shard.groups["g"].members


def test_leader_join_in_stable_forces_rebalance_follower_does_not() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2)
    follower = h.call(h.join_request(member_id=f1))
    assert follower.error is Errors.NONE and follower.generation_id == gen and not follower.members
    assert h.shard.groups["g"].state is GroupState.STABLE
    t = h.join("g", leader)
    assert not h.answered(t)
    assert h.shard.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_follower_with_changed_metadata_rebalances() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2)
    h.join("g", f1, protocols=protocols(topics=("t", "u")))
    assert h.shard.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_rejoin_in_completing_rebalance_gets_same_generation() -> None:
    h = Harness()
    h.join("g")
    h.advance(3_000)
    group = h.shard.groups["g"]
    leader = group.leader_id
    assert group.state is GroupState.COMPLETING_REBALANCE
    again = h.call(h.join_request(member_id=leader))
    assert again.generation_id == group.generation_id and again.members


def test_superseded_join_is_answered() -> None:
    h = Harness()
    (leader, f1), gen = h.form_group("g", 2)
    first = h.join("g", leader)
    second = h.join("g", leader)
    assert h.take(first).error is Errors.REBALANCE_IN_PROGRESS
    assert not h.answered(second)


def test_protocol_vote_and_deterministic_tie_break() -> None:
    h = Harness()
    t1 = h.join("g", protocols=protocols("range", "roundrobin"))
    t2 = h.join("g", protocols=protocols("roundrobin", "range"))
    h.advance_until_answered([t1, t2])
    r1, r2 = h.take(t1), h.take(t2)
    assert r1.protocol_name == r2.protocol_name == "range"  # tie: the leader's preference
    h2 = Harness()
    t = [h2.join("g", protocols=protocols("range", "roundrobin")) for _ in range(1)]
    t += [h2.join("g", protocols=protocols("roundrobin", "range")) for _ in range(2)]
    h2.advance_until_answered(t)
    assert h2.take(t[0]).protocol_name == "roundrobin"  # plurality wins


def test_new_member_join_timeout_expires_new_members() -> None:
    h = Harness(group_new_member_join_timeout_ms=60_000)
    (leader,), gen = h.form_group("g", 1, rebalance_timeout_ms=300_000)
    t_new = h.join("g", rebalance_timeout_ms=300_000)
    # The leader never rejoins and keeps heartbeating; the new member's
    # join is answered UNKNOWN_MEMBER_ID when its join timeout passes.
    for _ in range(6):
        h.advance(9_000)
        assert h.heartbeat("g", leader, gen) is Errors.REBALANCE_IN_PROGRESS
    h.advance(6_000)
    assert h.take(t_new).error is Errors.UNKNOWN_MEMBER_ID


def test_join_of_fifty_members_one_leader() -> None:
    h = Harness()
    ids, gen = h.form_group("g", 50)
    group = h.shard.groups["g"]
    assert group.state is GroupState.STABLE and group.size == 50 and gen == 1
    assert group.leader_id == ids[0]
    assert all(m.assignment == m.member_id.encode() for m in group.members.values())


def test_session_timeout_is_kept_per_member() -> None:
    h = Harness()
    (leader,), gen = h.form_group("g", 1, session_timeout_ms=SESSION_MS)
    assert h.shard.groups["g"].members[leader].session_timeout_ms == SESSION_MS


def test_values_the_log_cannot_encode_are_refused_at_construction() -> None:
    # A lone surrogate or an int beyond int64 would pass a type check and
    # break the log's encoder, failing the whole partition on every retry.
    with pytest.raises(ValueError, match="group_id must be valid UTF-8"):
        JoinGroupRequest("g\ud800", 10, 10, "consumer", ())
    with pytest.raises(ValueError, match="protocols must be valid UTF-8"):
        JoinGroupRequest("g", 10, 10, "consumer", (("range\udfff", b""),))
    with pytest.raises(ValueError, match="metadata must be valid UTF-8"):
        OffsetCommitPartition("t", 0, 5, "\ud800")
    with pytest.raises(ValueError, match="offset must be within int64"):
        OffsetCommitPartition("t", 0, 2**63)
    with pytest.raises(ValueError, match="session_timeout_ms"):
        JoinGroupRequest("g", -(2**63) - 1, 10, "consumer", ())
    with pytest.raises(TypeError, match="offset must be"):
        OffsetCommitPartition("t", 0, True)
    assert OffsetCommitPartition("t", 0, 2**63 - 1, "métadonnées ✓").metadata == "métadonnées ✓"
