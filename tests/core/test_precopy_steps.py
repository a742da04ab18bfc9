"""A whole pre-copy handoff through its steps (coordinator/precopy_source.py and
precopy_target.py): copy while serving, a delta, the freeze, the switch only once clean."""

from __future__ import annotations

from copy import deepcopy
from functools import partial
from typing import Any

from coordinator import handoff, precopy_source, precopy_target
from coordinator.errors import Errors
from coordinator.handoff import HandoffAnswer
from coordinator.messages import DeleteGroupsRequest
from coordinator.records import OffsetCommitKey, Record
from coordinator.routing import Routing
from coordinator.shard import Shard

from tests.core.harness import Harness
from tests.core.test_handoff import groups_on
from tests.core.test_handoff_steps import Driven
from tests.core.test_precopy import GROWN, PLANNED, source


def answer(shard: Shard, step: Any, log: list[Record] | None = None) -> Any:
    """The step's one answer; its records appended to `log` (the source's, for a reload)."""
    result = shard.drive(step, 0, "t")
    if log is not None:
        log.extend(result.records)
    [(_, reply)] = result.responses
    return reply


class Copy:
    """The driver's side: a session from partition 0 to 2 of a 2 -> 4 grow."""

    def __init__(self, h: Harness, session: int = 1) -> None:
        self.h, self.session = h, session
        self.target = Shard(h.shard.config, partition=2)
        handoff.route_step(self.target, PLANNED, h.now)
        handoff.route_step(h.shard, PLANNED, h.now)

    def at_source(self, step: Any, *args: Any) -> Any:
        return answer(self.h.shard, lambda s, t: step(s, *args, t), self.h.log)

    def begin(self) -> Any:
        fence = answer(self.target, lambda s, t: precopy_target.fence_step(s, 0, PLANNED, self.session, t))
        assert fence.error is Errors.NONE
        return self.at_source(precopy_source.begin_step, GROWN, self.session)

    def round(self, freeze: bool = False) -> int:
        start = precopy_source.freeze_step if freeze else precopy_source.round_step
        started = self.at_source(start, self.session)
        assert started.error is Errors.NONE
        page = 0
        while page >= 0:
            exported = self.at_source(precopy_source.export_step, self.session, page)
            admit = partial(
                precopy_target.admit_step, source=0, routing=PLANNED, session=self.session,
                records=exported.exported.get(2, []), gone=exported.gone.get(2, []),
            )
            assert answer(self.target, lambda s, t, admit=admit: admit(s, token=t)).error is Errors.NONE
            self.at_source(precopy_source.confirm_step, self.session, page)
            page = exported.next_page
        return int(started.groups)

    def switch(self) -> Any:
        return self.at_source(precopy_source.switch_step, GROWN, self.session)


def test_groups_are_copied_while_served_and_frozen_only_for_the_last_delta() -> None:
    moving, staying = groups_on(2, 4, 5), groups_on(0, 4, 2)
    h = source(moving, staying)
    copy = Copy(h)
    assert copy.begin().groups == 5
    assert copy.round() == 5
    assert h.commit(moving[0], {("t", 0): 50}) == {("t", 0): Errors.NONE}, "served while copied"
    h.commit(staying[0], {("t", 0): 51})
    assert copy.switch().error is Errors.REBALANCE_IN_PROGRESS, "a group changed since its copy"
    assert copy.round() == 1, "the delta: the one moving group written"
    h.commit(moving[1], {("t", 1): 60})
    assert copy.round(freeze=True) == 1, "frozen: only what is still dirty travels"
    frozen = h.commit(moving[2], {("t", 0): 1})
    assert frozen == {("t", 0): Errors.NOT_COORDINATOR}, "every moving group frozen"
    expected = {g: deepcopy(h.shard.persistent_view()[g]) for g in moving}
    assert copy.switch().error is Errors.NONE
    assert h.shard.copying is None
    handoff.route_step(copy.target, GROWN, h.now)
    view = copy.target.persistent_view()
    assert {g: view[g] for g in moving} == expected
    assert view[moving[0]][1][OffsetCommitKey(moving[0], "t", 0)].offset == 50
    assert view[moving[1]][1][OffsetCommitKey(moving[1], "t", 1)].offset == 60
    assert not copy.target.copies


def test_a_group_deleted_mid_copy_is_deleted_at_its_target_before_the_switch() -> None:
    moving = groups_on(2, 4, 2)
    h = source(moving, [])
    copy = Copy(h)
    copy.begin()
    copy.round()
    assert h.call(DeleteGroupsRequest((moving[0],))).results == ((moving[0], Errors.NONE),)
    copy.round(freeze=True)
    assert copy.switch().error is Errors.NONE
    handoff.route_step(copy.target, GROWN, h.now)
    assert moving[0] not in copy.target.groups and moving[1] in copy.target.groups


def test_a_new_leader_knows_no_session_and_a_switched_source_says_so() -> None:
    moving = groups_on(2, 4, 1)
    h = source(moving, [])
    copy = Copy(h)
    copy.begin()
    copy.round(freeze=True)
    assert copy.switch().error is Errors.NONE
    reloaded = Shard(h.shard.config)
    reloaded.replay_many(h.log)  # a new leader: its log has the switch record, no tracker
    refused = answer(reloaded, lambda s, t: precopy_source.round_step(s, 1, t))
    assert refused.error is Errors.REBALANCE_IN_PROGRESS and "no copy session" in refused.detail
    begun = answer(reloaded, lambda s, t: precopy_source.begin_step(s, GROWN, 2, t))
    assert begun.error is Errors.NONE and begun.detail == "switched"
    again = answer(reloaded, lambda s, t: precopy_source.switch_step(s, GROWN, 2, t))
    assert again.error is Errors.NONE, "a retried switch is answered done"


def test_a_switch_needs_the_freeze_even_when_nothing_is_dirty() -> None:
    moving = groups_on(2, 4, 1)
    h = source(moving, [])
    copy = Copy(h)
    copy.begin()
    copy.round()
    refused = copy.switch()
    assert refused.error is Errors.REBALANCE_IN_PROGRESS, "not frozen: a commit could land after the copy"


def test_a_frozen_source_with_a_dirty_group_does_not_switch() -> None:
    moving = groups_on(2, 4, 2)
    h = source(moving, [])
    copy = Copy(h)
    copy.begin()
    copy.round()
    h.commit(moving[0], {("t", 0): 9})
    assert copy.at_source(precopy_source.freeze_step, copy.session).groups == 1
    refused = copy.switch()
    assert refused.error is Errors.REBALANCE_IN_PROGRESS and "1 moving groups" in refused.detail
    assert h.shard.switched is None


def test_a_copy_session_ends_with_its_leader_or_its_repartition() -> None:
    h = source(groups_on(2, 4, 1), [])
    copy = Copy(h)
    copy.begin()
    handoff.route_step(h.shard, Routing(4, previous=2, version=1), h.now)
    assert h.shard.copying is not None, "the same repartition's routing: the session goes on"
    handoff.route_step(h.shard, Routing(8, previous=4, version=2), h.now)
    assert h.shard.copying is None
    unloaded = source(groups_on(2, 4, 1), [])
    Copy(unloaded).begin()
    assert unloaded.shard.copying is not None
    unloaded.absorb(unloaded.shard.unload(unloaded.now))
    assert unloaded.shard.copying is None


def test_through_the_runtime_each_answer_waits_for_what_it_read_and_only_the_switch_needs_min_isr() -> None:
    """The actor drives the source's steps through `PartitionRuntime.drive`: a page is
    answered only once what it captured is durable at the source (a copy of a commit the
    source could still lose must not reach a target), and below min ISR every step but the
    switch (the one that writes) still runs: a copy goes on while a follower catches up."""
    moving = groups_on(2, 4, 2)
    h = source(moving, [])
    driven = Driven(h.shard)
    handoff.route_step(h.shard, PLANNED, h.now)
    driven.drive("begin", lambda s, t: precopy_source.begin_step(s, GROWN, 1, t))
    driven.drive("round", lambda s, t: precopy_source.round_step(s, 1, t))
    assert driven.answers.pop("begin").groups == 2 and driven.answers.pop("round").groups == 2
    h.commit(moving[0], {("t", 0): 70})  # written, not durable yet
    driven.runtime.written_end = len(h.log)
    driven.runtime._pending.extend(h.log)
    driven.drive("page", lambda s, t: precopy_source.export_step(s, 1, 0, t))
    assert "page" not in driven.answers, "answered before what it captured is durable"
    driven.durable()
    page = driven.answers.pop("page")
    offsets = [r.value.offset for r in page.exported[2] if r.key == OffsetCommitKey(moving[0], "t", 0)]
    assert page.error is Errors.NONE and offsets == [70]

    driven.runtime.writable = False  # below min ISR
    steps = {
        "confirm": lambda s, t: precopy_source.confirm_step(s, 1, 0, t),
        "freeze": lambda s, t: precopy_source.freeze_step(s, 1, t),
    }
    for name, step in steps.items():
        driven.drive(name, step, False)
    assert {name: driven.answers.pop(name).error for name in steps} == dict.fromkeys(steps, Errors.NONE)
    driven.drive("switch", lambda s, t: precopy_source.switch_step(s, GROWN, 1, t), True)
    assert driven.answers.pop("switch").error is Errors.NOT_ENOUGH_REPLICAS and h.shard.switched is None
    driven.runtime.writable = True
    driven.drive("switch", lambda s, t: precopy_source.switch_step(s, GROWN, 1, t), True)
    assert "switch" not in driven.answers, "the commit point is answered once durable"
    driven.durable()
    assert driven.answers.pop("switch") == HandoffAnswer(Errors.NONE, groups=2)
