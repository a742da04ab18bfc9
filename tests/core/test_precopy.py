"""Pre-copy's pure core (coordinator/precopy.py): the dirty tracking on the shard's write
path, the pages of a round, and the driver's copy-or-freeze decision on a manual clock."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from coordinator import handoff, precopy_target
from coordinator.errors import Errors
from coordinator.messages import DeleteGroupsRequest, HeartbeatRequest
from coordinator.precopy import CopyPlan, CopySettings, DirtyTracker, Step, export_page
from coordinator.records import Record, ServiceStateValue
from coordinator.routing import Routing
from coordinator.shard import Shard

from tests.core.harness import SESSION_MS, Harness
from tests.core.test_handoff import groups_on

GROWN = Routing(4, previous=2, switched=frozenset({0}), version=1)


def moves(group_id: str) -> bool:
    return GROWN.partition_for(group_id) != 0


def source(moving: list[str], staying: list[str]) -> Harness:
    """A shard of offsets-only groups (simple commits), two offsets each."""
    h = Harness()
    for group in moving + staying:
        assert set(h.commit(group, {("t", 0): 1, ("t", 1): 1}).values()) == {Errors.NONE}
    return h


def copy_round(h: Harness, tracker: DirtyTracker, page_records: int = 3) -> dict[int, Shard]:
    """One whole round, every page admitted at a fresh target shard and confirmed."""
    tracker.start_round(moves)
    targets: dict[int, Shard] = {}
    start = 0
    while start >= 0:
        page = export_page(h.shard, tracker, GROWN, start, page_records)
        for target, records in page.exported.items():
            shard = targets.setdefault(target, Shard(h.shard.config, partition=target))
            handoff.admit_groups(shard, records)
        tracker.confirm(start)
        start = page.next_page
    return targets


def test_a_round_copies_every_moving_group_and_leaves_the_tracker_clean() -> None:
    moving, staying = groups_on(2, 4, 3), groups_on(0, 4, 2)
    h = source(moving, staying)
    tracker = DirtyTracker(1, moving)
    targets = copy_round(h, tracker)
    assert tracker.clean(moves)
    copied = targets[2].persistent_view()
    assert {g: copied[g] for g in moving} == {g: h.shard.persistent_view()[g] for g in moving}
    assert not set(staying) & set(copied)


def test_a_write_after_the_capture_makes_the_group_dirty_and_a_delta_carries_it() -> None:
    moving, staying = groups_on(2, 4, 3), groups_on(0, 4, 1)
    h = source(moving, staying)
    tracker = DirtyTracker(1, moving)
    targets = copy_round(h, tracker)
    h.shard.copying = tracker
    changed = moving[1]
    h.commit(changed, {("t", 0): 99})
    h.commit(staying[0], {("t", 0): 7})
    assert not tracker.clean(moves)
    assert tracker.start_round(moves) == 1, "only the moving group written since its copy"
    page = export_page(h.shard, tracker, GROWN, 0)
    assert {r.key.group_id for r in page.exported[2]} == {changed} and page.next_page == -1
    handoff.admit_groups(targets[2], page.exported[2])
    tracker.confirm(0)
    assert tracker.clean(moves)
    assert targets[2].persistent_view()[changed] == h.shard.persistent_view()[changed]


def test_a_write_between_capture_and_confirm_stays_dirty() -> None:
    moving = groups_on(2, 4, 1)
    h = source(moving, [])
    tracker = DirtyTracker(1, moving)
    h.shard.copying = tracker
    tracker.start_round(moves)
    export_page(h.shard, tracker, GROWN, 0)
    h.commit(moving[0], {("t", 0): 5})  # after the capture: the page holds the older offset
    tracker.confirm(0)
    assert not tracker.clean(moves) and tracker.start_round(moves) == 1


def test_a_page_never_confirmed_is_copied_again_in_the_next_round() -> None:
    moving = groups_on(2, 4, 4)
    h = source(moving, [])
    tracker = DirtyTracker(1, moving)
    tracker.start_round(moves)
    first = export_page(h.shard, tracker, GROWN, 0, 1)
    assert first.groups == 1 and first.next_page == 1
    assert not tracker.clean(moves), "captured but not admitted: the target may not hold it"
    assert tracker.start_round(moves) == 4, "the unconfirmed page is dirty again"


def test_a_group_deleted_after_its_copy_is_gone_in_the_delta() -> None:
    moving = groups_on(2, 4, 2)
    h = source(moving, [])
    tracker = DirtyTracker(1, moving)
    copy_round(h, tracker)
    h.shard.copying = tracker
    deleted = moving[0]
    assert h.call(DeleteGroupsRequest((deleted,))).results == ((deleted, Errors.NONE),)
    assert tracker.start_round(moves) == 1
    page = export_page(h.shard, tracker, GROWN, 0)
    assert page.gone == {2: [deleted]} and not page.exported


def test_every_write_path_touches_the_tracker_while_a_copy_runs() -> None:
    h = source(groups_on(2, 4, 1), [])
    assert h.shard.copying is None, "no copy: the write path pays one None check"
    tracker = DirtyTracker(1, [])
    h.shard.copying = tracker
    h.commit("offsets-only", {("t", 0): 3})
    h.form_group("classic", 1)
    assert {"offsets-only", "classic"} <= tracker.dirty


def test_an_export_page_outside_the_round_is_refused() -> None:
    tracker = DirtyTracker(1, ["a"])
    tracker.start_round(lambda g: True)
    with pytest.raises(ValueError, match="outside round"):
        export_page(Harness().shard, tracker, GROWN, 5)


# ------------------------------------------------------------ the plan, on a manual clock


def test_the_plan_freezes_once_the_predicted_freeze_fits() -> None:
    plan = CopyPlan(CopySettings(freeze_target_ms=500), began_ms=0)
    plan.round_done(100_000, began_ms=0, now_ms=20_000)  # 0.2 ms a group
    assert plan.next_step(50_000, now_ms=20_000) is Step.COPY
    plan.round_done(50_000, began_ms=20_000, now_ms=30_000)
    assert plan.next_step(2_000, now_ms=30_000) is Step.FREEZE
    assert "400 ms" in plan.reason


def test_the_plan_freezes_when_the_dirty_set_stops_shrinking() -> None:
    plan = CopyPlan(CopySettings(freeze_target_ms=10, shrink_ratio=0.5), began_ms=0)
    plan.round_done(100_000, 0, 20_000)
    assert plan.next_step(30_000, 20_000) is Step.COPY, "one delta round always follows the full copy"
    plan.round_done(30_000, 20_000, 26_000)
    assert plan.next_step(20_000, 26_000) is Step.FREEZE and "stopped shrinking" in plan.reason


def test_the_plan_freezes_after_its_rounds_or_its_deadline() -> None:
    plan = CopyPlan(CopySettings(freeze_target_ms=1, max_rounds=2, copy_deadline_ms=60_000), began_ms=0)
    plan.round_done(1_000, 0, 1_000)
    assert plan.next_step(400, 1_000) is Step.COPY
    plan.round_done(400, 1_000, 1_400)
    assert plan.next_step(100, 1_400) is Step.FREEZE and "2 rounds" in plan.reason
    late = CopyPlan(CopySettings(freeze_target_ms=1, copy_deadline_ms=60_000), began_ms=0)
    late.round_done(1_000, 0, 61_000)
    assert late.next_step(500, 61_000) is Step.FREEZE and "ran 61000 ms" in late.reason


def test_an_empty_dirty_set_freezes_at_once() -> None:
    plan = CopyPlan(CopySettings(), began_ms=0)
    assert plan.next_step(0, 0) is Step.FREEZE


@pytest.mark.parametrize("bad", [{"max_rounds": 0}, {"shrink_ratio": 0.0}, {"freeze_target_ms": -1}])
def test_settings_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CopySettings(**bad)  # type: ignore[arg-type]


# ------------------------------------------------ the target: a copy it does not own yet

PLANNED = Routing(4, previous=2, version=1)  # partition 0 not switched: its groups are its own


def held_copy(
    config_overrides: dict[str, int] | None = None,
) -> tuple[Harness, Shard, str, list[str], list[Record]]:
    """A classic group of two members formed at partition 0, admitted at 2 before 0 switched
    (with the target's log)."""
    h = Harness(**(config_overrides or {}))
    move = groups_on(2, 4, 1)[0]
    members, generation = h.form_group(move, 2)
    h.commit(move, {("t", 0): 5}, generation, members[0])
    target = Shard(h.shard.config, partition=2)
    handoff.route_step(target, PLANNED, h.now)
    log = target.admit_groups(handoff.group_records(h.shard, move), h.now).records
    return h, target, move, members, log


def test_a_copy_runs_no_timer_until_it_is_owned_then_its_sessions_start_from_then() -> None:
    h, target, move, members, _ = held_copy()
    assert target.copies == {move}
    assert not [r for r in target.poll_timers(h.now + 100 * SESSION_MS) if r.records], "a copy writes nothing"
    assert set(target.groups[move].members) == set(members)
    adopted_at = h.now + 100 * SESSION_MS
    handoff.route_step(target, GROWN, adopted_at)
    assert not target.copies
    assert not target.poll_timers(adopted_at + SESSION_MS // 2), "its sessions run from the adoption"
    assert any(r.records for r in target.poll_timers(adopted_at + 2 * SESSION_MS))
    assert not target.groups[move].members


def test_a_reloaded_target_knows_its_copies_and_starts_no_timer_for_them() -> None:
    h, _, move, _, log = held_copy()
    reloaded = Shard(h.shard.config, partition=2)
    reloaded.replay_many(log)
    handoff.route_step(reloaded, PLANNED, h.now)
    reloaded.on_loaded(h.now)
    assert reloaded.copies == {move}
    assert not [r for r in reloaded.poll_timers(h.now + 100 * SESSION_MS) if r.records]


def test_offsets_expiry_never_writes_to_a_copy() -> None:
    retention_ms = 60_000
    h, target, move, members, _ = held_copy({"offsets_retention_minutes": 1})
    h.leave(move, *members)  # empty at the source: its offsets expire after the retention there
    target.admit_groups(handoff.group_records(h.shard, move), h.now)
    target.on_loaded(h.now)  # schedules the expiry check, as a load does
    later = h.now + retention_ms + target.config.offsets_retention_check_interval_ms
    assert not [r for r in target.poll_timers(later) if r.records], "the copy's offsets stay"
    assert target.groups[move].offsets
    handoff.route_step(target, GROWN, later)
    expired = target.poll_timers(later + target.config.offsets_retention_check_interval_ms)
    assert any(r.records for r in expired) and move not in target.groups, "owned: it expires as any group"


def test_a_target_loaded_without_the_routing_holds_its_copies_as_copies_until_the_push() -> None:
    """A target's leader restarted mid-copy loads before the controller pushes the routing:
    the fence in its log names the repartition, so its copies run no timer and are answered
    NOT_COORDINATOR until a push says their source switched; a new fence still finds them."""
    h, target, move, members, first = held_copy()
    fence = target.drive(lambda s, t: precopy_target.fence_step(s, 0, PLANNED, 1, t), 0, "f")
    admitted = target.admit_groups(handoff.group_records(h.shard, move), h.now)
    log = first + fence.records + admitted.records
    reloaded = Shard(h.shard.config, partition=2)
    reloaded.replay_many(log)
    reloaded.on_loaded(h.now)
    assert reloaded.owner == PLANNED and reloaded.copies == {move}
    assert handoff.committed_routing(reloaded) is None, "nothing committed is claimed (state file, probe)"
    held = reloaded.poll_timers(h.now + 100 * SESSION_MS)
    assert not [r for r in held if r.records], "a copy writes nothing"
    heartbeat = HeartbeatRequest(move, target.groups[move].generation_id, members[0])
    assert reloaded.handle(heartbeat, h.now).responses[0][1].error is Errors.NOT_COORDINATOR
    again = Shard(h.shard.config, partition=2)
    again.replay_many(log)
    again.on_loaded(h.now)
    reply, _ = answer(again, lambda s, t: precopy_target.fence_step(s, 0, PLANNED, 2, t))
    assert reply.error is Errors.NONE and reply.groups == 1 and move not in again.groups
    handoff.route_step(reloaded, GROWN, h.now)  # the push: partition 0 switched
    assert not reloaded.copies
    assert reloaded.handle(heartbeat, h.now).responses[0][1].error is Errors.NONE


def test_a_fence_value_a_load_cannot_read_is_skipped_never_fatal() -> None:
    shard = Shard(Harness().shard.config, partition=2)
    shard.replay(Record(precopy_target.fence_key(0), ServiceStateValue(b"1;2")))
    shard.replay(Record(precopy_target.fence_key(1), ServiceStateValue(b"x;y;z;w")))
    shard.on_loaded(0)
    assert shard.owner is None and precopy_target.planned_routing(shard) is None


def test_a_target_that_does_not_know_the_repartition_yet_takes_no_fence_and_no_copy() -> None:
    """A leader loaded since the controller's push (no fence in its log) owns every group it
    holds: an admitted copy would run timers. It refuses until the push arrives."""
    moving = groups_on(2, 4, 1)
    h = source(moving, [])
    target = Shard(h.shard.config, partition=2)
    page = handoff.group_records(h.shard, moving[0])
    reply, records = answer(target, lambda s, t: precopy_target.fence_step(s, 0, PLANNED, 1, t))
    assert reply.error is Errors.REBALANCE_IN_PROGRESS and not records
    step = partial(precopy_target.admit_step, source=0, routing=PLANNED, session=1, records=page, gone=[])
    reply, records = answer(target, lambda s, t: step(s, token=t))
    assert reply.error is Errors.REBALANCE_IN_PROGRESS and not records and not target.groups
    handoff.route_step(target, PLANNED, 0)
    assert answer(target, lambda s, t: precopy_target.fence_step(s, 0, PLANNED, 1, t))[0].error is Errors.NONE


# ------------------------------------------------ the target's fence and session admits


def answer(shard: Shard, step: Any) -> tuple[Any, list[Record]]:
    result = shard.drive(step, 0, "t")
    return result.responses[0][1], result.records


def fenced_target(session: int = 1) -> Shard:
    target = Shard(Harness().shard.config, partition=2)
    handoff.route_step(target, PLANNED, 0)
    reply, _ = answer(target, lambda s, t: precopy_target.fence_step(s, 0, PLANNED, session, t))
    assert reply.error is Errors.NONE
    return target


def test_a_group_deleted_between_sessions_never_comes_back_at_its_target() -> None:
    moving = groups_on(2, 4, 2)
    h = source(moving, [])
    target = fenced_target(1)
    page = [r for g in moving for r in handoff.group_records(h.shard, g)]
    reply, _ = answer(target, lambda s, t: precopy_target.admit_step(s, 0, PLANNED, 1, page, [], t))
    assert reply.error is Errors.NONE and target.copies == set(moving)
    assert h.call(DeleteGroupsRequest((moving[0],))).results == ((moving[0], Errors.NONE),)
    # a new session (the source's leader changed): the fence deletes every copy from partition 0
    reply, records = answer(target, lambda s, t: precopy_target.fence_step(s, 0, PLANNED, 2, t))
    assert reply.error is Errors.NONE and reply.groups == 2 and not target.copies
    assert records[-2].key == handoff.ADMIT_KEY and records[-2].value.data == f"1;{len(records) - 2}".encode()
    assert records[-1].key == precopy_target.fence_key(0) and records[-1].value.data == b"1;2;4;2"
    page = [r for r in handoff.group_records(h.shard, moving[1])]
    reply, _ = answer(target, lambda s, t: precopy_target.admit_step(s, 0, PLANNED, 2, page, [], t))
    handoff.route_step(target, GROWN, 0)
    assert moving[0] not in target.groups and moving[1] in target.groups


def test_an_admit_of_another_session_is_refused_and_changes_nothing() -> None:
    moving = groups_on(2, 4, 1)
    h = source(moving, [])
    target = fenced_target(3)
    page = handoff.group_records(h.shard, moving[0])
    for stale in (2, 4):
        step = partial(
            precopy_target.admit_step, source=0, routing=PLANNED, session=stale, records=page, gone=[]
        )
        reply, records = answer(target, lambda s, t, step=step: step(s, token=t))
        assert reply.error is Errors.FENCED_LEADER_EPOCH and not records
    for stale in (2, 3):
        fence = partial(precopy_target.fence_step, source=0, routing=PLANNED, session=stale)
        reply, records = answer(target, lambda s, t, fence=fence: fence(s, token=t))
        assert reply.error is Errors.FENCED_LEADER_EPOCH and not records, "an older or the same session"
        assert reply.session == 3, "the refusal says the session fenced here"


def test_a_gone_group_deletes_its_copy() -> None:
    moving = groups_on(2, 4, 1)
    h = source(moving, [])
    target = fenced_target(1)
    page = handoff.group_records(h.shard, moving[0])
    answer(target, lambda s, t: precopy_target.admit_step(s, 0, PLANNED, 1, page, [], t))
    reply, records = answer(target, lambda s, t: precopy_target.admit_step(s, 0, PLANNED, 1, [], moving, t))
    assert reply.error is Errors.NONE and moving[0] not in target.groups and not target.copies
    assert records[-1].key == handoff.ADMIT_KEY, "the tombstones are counted as copies"


def test_no_fence_once_the_source_switched_nor_from_a_partition_that_sends_nothing_here() -> None:
    target = Shard(Harness().shard.config, partition=2)
    handoff.route_step(target, GROWN, 0)
    reply, records = answer(target, lambda s, t: precopy_target.fence_step(s, 0, GROWN, 5, t))
    assert reply == handoff.HandoffAnswer(Errors.NONE) and not records, "its groups are owned here"
    step = partial(precopy_target.admit_step, source=0, routing=GROWN, session=5, records=[], gone=[])
    reply, records = answer(target, lambda s, t: step(s, token=t))
    assert reply.error is Errors.FENCED_LEADER_EPOCH and not records, "no copy admitted once it switched"
    reply, _ = answer(target, lambda s, t: precopy_target.fence_step(s, 1, PLANNED, 1, t))
    assert reply.error is Errors.INVALID_REQUEST, "partition 1's groups go to 1 and 3, not 2"
