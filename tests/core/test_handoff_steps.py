"""The driver's handoff steps through the runtime (coordinator/handoff.py, `PartitionRuntime.drive`):
answers released at the durable end, the switch record as the commit point, and the fences."""

from __future__ import annotations

from typing import Any

from coordinator import handoff, precopy_target
from coordinator.errors import Errors
from coordinator.handoff import HandoffAnswer
from coordinator.messages import DeleteGroupsRequest, DescribeGroupsRequest
from coordinator.routing import Routing
from coordinator.runtime import PartitionRuntime, RuntimeState
from coordinator.shard import Shard

from tests.core.harness import Harness
from tests.core.test_handoff import groups_on

GROWN = Routing(4, previous=2, switched=frozenset({0}), version=1)


class Driven:
    """A runtime over a harness-built shard, answering driven steps into `answers`."""

    def __init__(self, shard: Shard) -> None:
        self.runtime = PartitionRuntime(shard.partition)
        self.runtime.begin_load()
        self.runtime.on_loaded(shard, 0, 0)
        self.shard = shard
        self.log: list[Any] = []
        self.answers: dict[str, Any] = {}

    def drive(self, name: str, step: Any, writes: bool = False) -> None:
        self._take(self.runtime.drive(step, name, 0, writes))

    def durable(self) -> None:
        self.log += self.runtime.take_batch()
        self._take(self.runtime.on_durable(len(self.log), self.runtime.incarnation))

    def _take(self, released: Any) -> None:
        for token, answer in released:
            self.answers[token] = answer


def source_with(move: str, stay: str) -> Harness:
    h = Harness()
    members, generation = h.form_group(move, 2)
    h.commit(move, {("t", 0): 5}, generation, members[0])
    h.form_group(stay, 1)
    return h


def test_export_admit_switch_moves_a_group_and_the_switch_fences_it_on_replay() -> None:
    move, stay = groups_on(2, 4, 1)[0], groups_on(0, 4, 1)[0]
    h = source_with(move, stay)
    source = Driven(h.shard)
    # records the shard wrote but the log has not made durable: the export waits for them
    source.runtime.written_end = len(h.log)
    source.runtime._pending.extend(h.log)
    source.drive("export", lambda shard, token: handoff.export_step(shard, GROWN, token))
    assert "export" not in source.answers, "answered before what it exports is durable"
    source.durable()
    exported = source.answers.pop("export")
    assert exported.error is Errors.NONE and exported.groups == 1 and set(exported.exported) == {2}

    target = Driven(Shard(h.shard.config, partition=2))
    target.drive("admit", lambda shard, token: handoff.admit_step(shard, exported.exported[2], token), True)
    assert "admit" not in target.answers
    target.durable()
    assert target.answers["admit"] == HandoffAnswer(Errors.NONE, groups=1)
    assert target.log[-1].key == handoff.ADMIT_KEY, "the admit ends with its marker (analytics use it)"
    assert target.log[-1].value.data == f"0;{len(target.log) - 1}".encode(), "version;records written"
    assert {r.key.group_id for r in target.log[:-1]} == {move}
    assert target.shard.persistent_view()[move] == h.shard.persistent_view()[move]

    source.drive("switch", lambda shard, token: handoff.switch_step(shard, GROWN, token), True)
    source.durable()
    assert source.answers.pop("switch") == HandoffAnswer(Errors.NONE, groups=1), "the groups it handed off"
    assert move not in h.shard.groups and stay in h.shard.groups
    source.drive("again", lambda shard, token: handoff.switch_step(shard, GROWN, token), True)
    assert source.answers.pop("again").error is Errors.NONE, "a retried switch is done already"

    # every replica and every reload of the source's log: the moved group is not served there
    reloaded = Shard(h.shard.config)
    reloaded.replay_many(h.log + source.log)
    assert move not in reloaded.groups and stay in reloaded.groups
    answer = reloaded.handle(DescribeGroupsRequest((move,)), 0).responses[0][1]
    assert answer.groups[0].error is Errors.NOT_COORDINATOR
    # a stale routing pushed later does not undo the switch
    handoff.route_step(reloaded, Routing(4, previous=2, version=1), 0)
    assert reloaded.owner is not None and reloaded.owner.partition_for(move) == 2


def test_a_switch_is_refused_unless_this_leader_froze_the_groups() -> None:
    move, stay = groups_on(2, 4, 1)[0], groups_on(0, 4, 1)[0]
    h = source_with(move, stay)
    promoted = Driven(h.replayed())  # a follower promoted after the export: it never froze
    promoted.drive("switch", lambda shard, token: handoff.switch_step(shard, GROWN, token), True)
    answer = promoted.answers["switch"]
    assert answer.error is Errors.REBALANCE_IN_PROGRESS and not promoted.runtime.has_pending
    assert move in promoted.shard.groups


def test_an_export_of_an_older_repartition_or_another_partition_is_refused() -> None:
    move, stay = groups_on(2, 4, 1)[0], groups_on(0, 4, 1)[0]
    h = source_with(move, stay)
    source = Driven(h.shard)
    handoff.route_step(h.shard, Routing(2, version=2), h.now)  # a later repartition, done
    source.drive("old", lambda shard, token: handoff.export_step(shard, GROWN, token))
    assert source.answers["old"].error is Errors.FENCED_LEADER_EPOCH
    other = Routing(4, previous=2, switched=frozenset({1}), version=3)
    source.drive("other", lambda shard, token: handoff.export_step(shard, other, token))
    assert source.answers["other"].error is Errors.INVALID_REQUEST
    member = next(iter(h.shard.groups[move].members))
    assert h.heartbeat(move, member, 1) is Errors.NONE, "nothing was frozen"


def test_a_frozen_source_shows_and_records_only_the_committed_routing_until_its_switch() -> None:
    """A source frozen by its export owns as if switched, but what a state file records (a full
    restart resumes the plan from it) and a probe shows is only what is committed: its switch
    record and the controller's pushes. Else a restart cut mid-export resumes the plan with this
    source switched, and its moving groups go to targets that never admitted them."""
    move, stay = groups_on(2, 4, 1)[0], groups_on(0, 4, 1)[0]
    h = source_with(move, stay)
    source = Driven(h.shard)
    planned = Routing(4, previous=2, version=1)
    handoff.route_step(h.shard, planned, h.now)
    source.drive("export", lambda shard, token: handoff.export_step(shard, GROWN, token))
    handoff.route_step(h.shard, planned, h.now)  # the controller's push while the groups are frozen
    assert h.shard.owner == GROWN, "the frozen groups stay fenced"
    assert handoff.committed_routing(h.shard) == planned
    source.drive("switch", lambda shard, token: handoff.switch_step(shard, GROWN, token), True)
    source.durable()
    assert source.answers["switch"].error is Errors.NONE
    assert handoff.committed_routing(h.shard) == GROWN, "its own switch record is committed"


def test_an_aborted_export_serves_the_group_again_and_a_readmission_replaces_stale_state() -> None:
    move, stay = groups_on(2, 4, 1)[0], groups_on(0, 4, 1)[0]
    h = source_with(move, stay)
    source = Driven(h.shard)
    source.drive("export", lambda shard, token: handoff.export_step(shard, GROWN, token))
    first = source.answers.pop("export").exported[2]
    member = next(iter(h.shard.groups[move].members))
    assert h.heartbeat(move, member, 1) is Errors.NOT_COORDINATOR
    source.drive("abort", lambda shard, token: handoff.abort_step(shard, token))
    assert h.heartbeat(move, member, 1) is Errors.NONE
    h.commit(move, {("t", 1): 7}, 1, member)

    target = Driven(Shard(h.shard.config, partition=2))
    target.drive("a1", lambda shard, token: handoff.admit_step(shard, first, token), True)
    source.drive("export", lambda shard, token: handoff.export_step(shard, GROWN, token))
    second = source.answers.pop("export").exported[2]
    h.shard.groups[move].offsets.clear()  # (the source's state is not the target's)
    target.drive("a2", lambda shard, token: handoff.admit_step(shard, second, token), True)
    offsets = {key.partition: value.offset for key, value in target.shard.groups[move].offsets.items()}
    assert offsets == {0: 5, 1: 7}


def test_an_export_comes_in_pages_that_may_be_asked_again_and_cover_every_moving_group() -> None:
    h = Harness()
    moving_ids = groups_on(2, 4, 7)
    for group in moving_ids + groups_on(0, 4, 3):
        h.commit(group, {("t", 0): 1, ("t", 1): 2}, -1, "")
    source = Driven(h.shard)
    whole: dict[int, list[Any]] = {}

    def page(start: int) -> HandoffAnswer:
        source.drive("page", lambda shard, token: handoff.export_step(shard, GROWN, token, start, 5))
        return source.answers.pop("page")  # type: ignore[no-any-return]

    start, pages = 0, 0
    while start >= 0:
        answer = page(start)
        assert answer == page(start), "a page asked again is the same page"
        for target, records in answer.exported.items():
            whole.setdefault(target, []).extend(records)
        start, pages = answer.next_page, pages + 1
    assert pages == 3  # 7 groups of 2 offsets, pages of at least 5 records: 3 + 3 + 1 groups
    assert sorted({r.key.group_id for r in whole[2]}) == sorted(moving_ids)
    single = Driven(h.replayed())
    single.drive("all", lambda shard, token: handoff.export_step(shard, GROWN, token, 0, 10**9))
    assert single.answers["all"].exported == whole and single.answers["all"].next_page == -1


def test_a_step_held_past_the_commit_timeout_is_answered_timed_out_once_and_the_partition_serves_on() -> None:
    move, stay = groups_on(2, 4, 1)[0], groups_on(0, 4, 1)[0]
    h = source_with(move, stay)
    source = Driven(h.shard)
    source.runtime.written_end = len(h.log)
    source.runtime._pending.extend(h.log)
    source.drive("export", lambda shard, token: handoff.export_step(shard, GROWN, token))
    assert "export" not in source.answers
    source._take(source.runtime.expire_held(5_000, 5_000))
    assert source.answers.pop("export").error is Errors.REQUEST_TIMED_OUT
    assert source.runtime.state is RuntimeState.ACTIVE and source.runtime.inflight == 0
    source.durable()
    assert "export" not in source.answers, "answered once"
    source.drive("again", lambda shard, token: handoff.export_step(shard, GROWN, token))
    assert source.answers["again"].error is Errors.NONE and source.answers["again"].groups == 1


def test_a_group_deleted_between_attempts_is_not_served_again_by_its_target() -> None:
    # An attempt admitted the group at its target, then was abandoned; the group was deleted
    # at its source; the next attempt's export leaves it out. The target must not keep the
    # first attempt's copy: the driver fences it (a new session) before the next admits.
    gone, kept = groups_on(2, 4, 2)
    h = Harness()
    h.commit(gone, {("t", 0): 5})
    h.commit(kept, {("t", 0): 6})
    source = Driven(h.shard)
    target = Driven(Shard(h.shard.config, partition=2))
    handoff.route_step(target.shard, Routing(4, previous=2, version=1), h.now)  # the driver's push
    source.drive("export", lambda shard, token: handoff.export_step(shard, GROWN, token))
    first = source.answers.pop("export")
    assert not first.switched
    target.drive("a1", lambda shard, token: handoff.admit_step(shard, first.exported[2], token), True)
    source.drive("abort", lambda shard, token: handoff.abort_step(shard, token))
    assert h.call(DeleteGroupsRequest((gone,))).results[0][1] is Errors.NONE

    source.drive("export", lambda shard, token: handoff.export_step(shard, GROWN, token))
    second = source.answers.pop("export")
    assert {r.key.group_id for r in second.exported[2]} == {kept} and not second.switched
    target.drive("discard", lambda shard, token: precopy_target.fence_step(shard, 0, GROWN, 1, token), True)
    target.durable()
    assert target.answers.pop("discard") == HandoffAnswer(Errors.NONE, groups=2), "both copies forgotten"
    target.drive("a2", lambda shard, token: handoff.admit_step(shard, second.exported[2], token), True)
    source.drive("switch", lambda shard, token: handoff.switch_step(shard, GROWN, token), True)
    source.durable()
    handoff.route_step(target.shard, GROWN, h.now)
    assert set(target.shard.groups) == {kept}
    reloaded = Shard(target.shard.config, partition=2)
    reloaded.replay_many(target.log + target.runtime.take_batch())
    assert set(reloaded.groups) == {kept}, "the discard is in the target's log: a reload agrees"
    # A retry after the switch was saved: the export says so, and the driver discards nothing.
    source.drive("again", lambda shard, token: handoff.export_step(shard, GROWN, token))
    source.durable()
    assert source.answers.pop("again").switched


def test_a_discard_leaves_what_the_target_owns_and_refuses_a_bad_source() -> None:
    own = groups_on(2, 4, 1)[0]
    target = Driven(Shard(Harness().shard.config, partition=2))
    handoff.route_step(target.shard, GROWN, 0)  # source 0 switched: its groups are the target's
    h = Harness()
    h.commit(own, {("t", 0): 1})
    target.drive("a", lambda shard, token: handoff.admit_step(shard, h.log, token), True)
    target.drive("d", lambda shard, token: precopy_target.fence_step(shard, 0, GROWN, 1, token), True)
    target.durable()
    assert target.answers["d"] == HandoffAnswer(Errors.NONE, groups=0) and own in target.shard.groups
    target.drive("bad", lambda shard, token: precopy_target.fence_step(shard, 2, GROWN, 1, token), True)
    target.durable()
    assert target.answers["bad"].error is Errors.INVALID_REQUEST
