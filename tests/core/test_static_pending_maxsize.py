"""KIP-345 static membership, KIP-394 pending members, KIP-389 group max size."""

from coordinator import CoordinatorConfig, Errors, GroupState, Shard
from coordinator.records import GroupMetadataKey

from tests.core.harness import REBALANCE_MS, SESSION_MS, Harness, protocols

S = GroupState


# ------------------------------------------------------------ static members


def test_static_member_restart_in_stable_keeps_assignment_without_rebalance() -> None:
    h2 = Harness()
    tokens = [h2.join("g", group_instance_id=f"s{i}") for i in range(2)]
    h2.advance_until_answered(tokens)
    rs = [h2.take(t) for t in tokens]
    leader_id = rs[0].leader
    other = next(r.member_id for r in rs if r.member_id != leader_id)
    gen = rs[0].generation_id
    h2.take(h2.sync("g", leader_id, gen, {leader_id: b"L", other: b"F"}))
    records_before = len(h2.log)
    # The follower s1 restarts: it joins with no member id and its instance id.
    restarted = h2.call(h2.join_request(group_instance_id="s1"))
    assert restarted.error is Errors.NONE and restarted.generation_id == gen
    assert restarted.member_id not in (leader_id, other)
    group = h2.shard.groups["g"]
    assert group.state is S.STABLE, "no rebalance for an unchanged static member"
    assert group.static_members["s1"] == restarted.member_id
    assert [r.key for r in h2.log[records_before:]] == [GroupMetadataKey("g")]
    sync = h2.take(h2.sync("g", restarted.member_id, gen, group_instance_id="s1"))
    assert sync.assignment == b"F"
    # The old incarnation is fenced.
    assert h2.heartbeat("g", other, gen, group_instance_id="s1") is Errors.FENCED_INSTANCE_ID


def test_static_leader_restart_skips_assignment_v9() -> None:
    h = Harness()
    t = h.join("g", group_instance_id="s0")
    h.advance_until_answered([t])
    r = h.take(t)
    h.take(h.sync("g", r.member_id, r.generation_id, {r.member_id: b"A"}))
    again = h.call(h.join_request(group_instance_id="s0"))
    assert again.skip_assignment and again.leader == again.member_id and again.members
    old_style = h.call(h.join_request(group_instance_id="s0", support_skip_assignment=False))
    assert not old_style.skip_assignment and old_style.leader == again.member_id != old_style.member_id


def test_static_member_changing_protocol_forces_rebalance() -> None:
    h = Harness()
    t = h.join("g", group_instance_id="s0")
    h.advance_until_answered([t])
    r = h.take(t)
    h.take(h.sync("g", r.member_id, r.generation_id, {}))
    t2 = h.send(h.join_request(group_instance_id="s0", protocols=protocols("roundrobin", "range")))
    response = h.take(t2)  # a group of one completes its join phase at once
    assert response.generation_id == r.generation_id + 1 and response.protocol_name == "roundrobin"


def test_static_rejoin_during_completing_rebalance_fences_old_and_rebalances() -> None:
    h = Harness()
    tokens = [h.join("g", group_instance_id=f"s{i}") for i in range(2)]
    h.advance_until_answered(tokens)
    rs = [h.take(t) for t in tokens]
    gen = rs[0].generation_id
    follower = next(r for r in rs if r.member_id != r.leader)
    parked = h.sync("g", follower.member_id, gen, group_instance_id="s1")
    h.send(h.join_request(group_instance_id="s1"))
    assert h.take(parked).error is Errors.FENCED_INSTANCE_ID
    assert h.shard.groups["g"].state is S.PREPARING_REBALANCE


def test_static_members_are_kept_when_they_miss_a_join_phase() -> None:
    h = Harness()
    tokens = [h.join("g", group_instance_id=f"s{i}", session_timeout_ms=60_000) for i in range(2)]
    h.advance_until_answered(tokens)
    rs = [h.take(t) for t in tokens]
    gen, leader = rs[0].generation_id, rs[0].leader
    other = next(r.member_id for r in rs if r.member_id != leader)
    h.take(h.sync("g", leader, gen, {}))
    h.take(h.sync("g", other, gen, group_instance_id="s1"))
    t = h.join("g", leader, group_instance_id="s0", session_timeout_ms=60_000)
    h.advance(REBALANCE_MS)
    response = h.take(t)
    assert response.generation_id == gen + 1
    assert {m.member_id for m in response.members} == {leader, other}


def test_unknown_instance_with_member_id_and_fenced_member() -> None:
    h = Harness()
    t = h.join("g", group_instance_id="s0")
    h.advance_until_answered([t])
    r = h.take(t)
    assert (
        h.call(h.join_request(member_id=r.member_id, group_instance_id="zz")).error
        is Errors.UNKNOWN_MEMBER_ID
    )
    assert (
        h.call(h.join_request(member_id="stale", group_instance_id="s0")).error is Errors.FENCED_INSTANCE_ID
    )


# ----------------------------------------------------------- pending members


def test_pending_member_expires_after_session_timeout() -> None:
    h = Harness()
    (leader,), gen = h.form_group("g", 1)
    pending = h.call(h.join_request())
    assert pending.error is Errors.MEMBER_ID_REQUIRED
    group = h.shard.groups["g"]
    assert pending.member_id in group.pending_members and pending.member_id not in group.members
    h.advance(SESSION_MS - 1)
    h.heartbeat("g", leader, gen)
    h.advance(1)
    assert pending.member_id not in group.pending_members
    assert h.call(h.join_request(member_id=pending.member_id)).error is Errors.UNKNOWN_MEMBER_ID


def test_pending_member_holds_the_join_phase() -> None:
    h = Harness()
    (leader,), gen = h.form_group("g", 1, session_timeout_ms=60_000)
    pending = h.call(h.join_request(session_timeout_ms=60_000))
    t = h.join("g", leader, session_timeout_ms=60_000)
    assert not h.answered(t), "the join phase waits for the pending member"
    t2 = h.send(h.join_request(member_id=pending.member_id, session_timeout_ms=60_000))
    assert h.take(t).generation_id == gen + 1 and h.take(t2).generation_id == gen + 1


def test_pending_member_cannot_be_both_pending_and_member() -> None:
    h = Harness()
    first = h.call(h.join_request())
    h.send(h.join_request(member_id=first.member_id))
    group = h.shard.groups["g"]
    assert first.member_id in group.members and first.member_id not in group.pending_members


# ----------------------------------------------------------- group max size


def test_group_max_size_refuses_extra_members() -> None:
    h = Harness(group_max_size=2)
    ids, gen = h.form_group("g", 2)
    extra = h.call(h.join_request(require_known_member_id=False))
    assert extra.error is Errors.GROUP_MAX_SIZE_REACHED
    assert h.shard.groups["g"].size == 2


def test_group_max_size_during_join_phase_counts_awaiting_members() -> None:
    h = Harness(group_max_size=2, group_initial_rebalance_delay_ms=3_000)
    t1, t2 = h.join("g"), h.join("g")
    extra = h.call(h.join_request(require_known_member_id=False))
    assert extra.error is Errors.GROUP_MAX_SIZE_REACHED
    h.advance_until_answered([t1, t2])


def test_over_capacity_group_rebalances_on_load_and_kicks_last_joiners() -> None:
    h = Harness()
    ids, gen = h.form_group("g", 3, session_timeout_ms=60_000)
    shard = Shard(CoordinatorConfig(group_max_size=2))
    shard.replay_many(h.log)
    shard.on_loaded(h.now)
    group = shard.groups["g"]
    assert group.state is S.PREPARING_REBALANCE
    answers = {}
    for token, member_id in enumerate(ids):
        result = shard.handle(h.join_request(member_id=member_id, session_timeout_ms=60_000), h.now, token)
        answers.update(result.responses)
    assert answers[2].error is Errors.GROUP_MAX_SIZE_REACHED
    assert set(group.members) == set(ids[:2])
    assert answers[0].generation_id == answers[1].generation_id == gen + 1
