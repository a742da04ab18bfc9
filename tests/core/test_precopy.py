"""Pre-copy's pure core (coordinator/precopy.py): the dirty tracking on the shard's write
path, the pages of a round, and the driver's copy-or-freeze decision on a manual clock."""

from __future__ import annotations

import pytest

from coordinator import handoff
from coordinator.errors import Errors
from coordinator.messages import DeleteGroupsRequest
from coordinator.precopy import CopyPlan, CopySettings, DirtyTracker, Step, export_page
from coordinator.routing import Routing
from coordinator.shard import Shard

from tests.core.harness import Harness
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
