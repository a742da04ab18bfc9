"""PartitionRuntime without Ray: a manual clock and a fake log that can succeed, fail or stall."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator import CoordinatorConfig, Errors, Shard
from coordinator.checks import InvalidRequestError
from coordinator.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from coordinator.records import Record
from coordinator.runtime import (
    IllegalRuntimeTransition,
    PartitionRuntime,
    RuntimeState,
    load_refusal,
)

from tests.core.harness import protocols

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=3_000)


class FakeLog:
    """Durable records, plus batches appended but not yet durable (a stalled fsync)."""

    def __init__(self) -> None:
        self.durable: list[Record] = []
        self.unsynced: list[Record] = []

    def append(self, batch: list[Record]) -> None:
        self.unsynced.extend(batch)

    def sync(self) -> int:
        self.durable += self.unsynced
        self.unsynced = []
        return len(self.durable)


class Driver:
    """Drives a runtime as the actor shell does, recording every answer per token."""

    def __init__(self) -> None:
        self.runtime = PartitionRuntime(0)
        self.log = FakeLog()
        self.now = 1_000
        self.answers: dict[int, list[Any]] = {}
        self._tokens = 0
        self.load()

    def load(self) -> None:
        self.runtime.begin_load()
        shard = Shard(CONFIG, member_id_seed=3)
        shard.replay_many(self.log.durable)
        self.log.unsynced = []  # a reopened log recovers only what was synced
        self.take(self.runtime.on_loaded(shard, len(self.log.durable), self.now))

    def take(self, released: list[tuple[Any, Any]]) -> None:
        for token, response in released:
            self.answers.setdefault(token, []).append(response)

    def send(self, request: Any) -> int:
        self._tokens += 1
        self.take(self.runtime.submit(request, self._tokens, self.now))
        return self._tokens

    def answer(self, token: int) -> Any:
        (response,) = self.answers[token]  # exactly one answer
        return response

    def flush(self, stall: bool = False) -> tuple[int, int]:
        """Append what is pending; unless `stall`, sync it and report it durable."""
        incarnation = self.runtime.incarnation
        self.log.append(self.runtime.take_batch())
        if not stall:
            self.take(self.runtime.on_durable(self.log.sync(), incarnation))
        return incarnation, len(self.log.durable) + len(self.log.unsynced)

    def advance(self, ms: int) -> None:
        self.now += ms
        self.take(self.runtime.poll_timers(self.now))


def commit(group: str, offset: int, partition: int = 0) -> OffsetCommitRequest:
    return OffsetCommitRequest(group, (OffsetCommitPartition("t", partition, offset),))


def join(group: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group, 10_000, 30_000, "consumer", protocols("range"), require_known_member_id=False
    )


def test_a_commit_is_answered_only_once_durable() -> None:
    d = Driver()
    token = d.send(commit("g", 5))
    assert token not in d.answers
    incarnation, end = d.flush(stall=True)
    assert token not in d.answers  # written, not yet synced
    d.take(d.runtime.on_durable(d.log.sync(), incarnation))
    assert d.answer(token).errors() == {("t", 0): Errors.NONE}


def test_a_read_answers_the_committed_offsets_at_once_never_an_uncommitted_one() -> None:
    d = Driver()
    d.send(commit("g", 5))
    fetch = d.send(OffsetFetchRequest("g", (("t", 0),)))
    assert d.answer(fetch).offsets() == {("t", 0): -1}  # 5 is not durable yet: never seen
    d.flush()
    again = d.send(OffsetFetchRequest("g", (("t", 0),)))
    assert d.answer(again).offsets() == {("t", 0): 5}
    d.send(commit("g", 6))
    d.send(OffsetCommitRequest("g", (OffsetCommitPartition("u", 1, 7),)))
    every = d.send(OffsetFetchRequest("g", None))  # all partitions: u-1 is not there yet
    assert d.answer(every).offsets() == {("t", 0): 5}
    d.flush()
    assert d.answer(d.send(OffsetFetchRequest("g", None))).offsets() == {("t", 0): 6, ("u", 1): 7}


def test_append_failure_answers_everything_in_flight_once_and_reload_keeps_only_durable() -> None:
    d = Driver()
    d.send(commit("g", 1))
    d.flush()
    lost = d.send(commit("g", 2))
    parked = d.send(join("other"))  # waits for the initial rebalance delay
    d.runtime.take_batch()  # the append that fails
    d.take(d.runtime.on_append_failed("disk full"))
    assert d.runtime.state is RuntimeState.FAILED
    assert d.runtime.failure == "append failed: disk full"
    assert d.answer(lost).errors() == {("t", 0): Errors.NOT_COORDINATOR}
    assert d.answer(parked).error is Errors.NOT_COORDINATOR
    assert d.runtime.inflight == 0
    d.load()
    assert d.runtime.state is RuntimeState.ACTIVE
    fetch = d.send(OffsetFetchRequest("g", (("t", 0),)))
    assert d.answer(fetch).offsets() == {("t", 0): 1}


def test_a_batch_of_an_earlier_load_releases_nothing_after_a_reload() -> None:
    d = Driver()
    first = d.send(commit("g", 1))
    incarnation, _ = d.flush(stall=True)
    d.take(d.runtime.on_task_failed("the timers task failed"))
    d.load()
    assert d.runtime.on_durable(1, incarnation) == []
    assert d.answer(first).errors() == {("t", 0): Errors.NOT_COORDINATOR}


def test_timer_failure_fails_the_partition_and_answers_held_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Driver()
    parked = d.send(join("g"))
    held = d.send(commit("h", 3))
    shard = d.runtime.shard
    assert shard is not None

    def broken(now_ms: int) -> list[Any]:
        raise KeyError("invariant")

    monkeypatch.setattr(shard, "poll_timers", broken)
    d.advance(5_000)
    assert d.runtime.state is RuntimeState.FAILED
    assert "firing timers" in (d.runtime.failure or "")
    assert d.answer(parked).error is Errors.NOT_COORDINATOR
    assert d.answer(held).errors() == {("t", 0): Errors.NOT_COORDINATOR}
    d.load()
    assert d.runtime.state is RuntimeState.ACTIVE


def test_a_shard_that_raises_on_a_request_fails_the_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Driver()
    held = d.send(commit("h", 3))
    shard = d.runtime.shard
    assert shard is not None
    monkeypatch.setattr(shard, "handle", lambda *args: (_ for _ in ()).throw(ValueError("boom")))
    token = d.send(HeartbeatRequest("g", 1, "m"))
    assert d.runtime.state is RuntimeState.FAILED
    assert d.answer(token) == HeartbeatResponse(Errors.NOT_COORDINATOR)
    assert d.answer(held).errors() == {("t", 0): Errors.NOT_COORDINATOR}


@pytest.mark.parametrize("bad", ["a str", None, {"group_id": "g"}, 42, [commit("g", 1)]])
def test_a_malformed_request_is_answered_to_its_caller_alone(bad: Any) -> None:
    d = Driver()
    held = d.send(commit("g", 1))
    token = d.send(bad)
    assert isinstance(d.answer(token), InvalidRequestError)
    assert d.runtime.state is RuntimeState.ACTIVE
    assert d.runtime.has_pending  # only the good commit's record
    d.flush()
    assert d.answer(held).errors() == {("t", 0): Errors.NONE}
    assert len(d.log.durable) == 1


def test_a_commit_built_without_its_checks_is_refused_and_never_written() -> None:
    d = Driver()
    unchecked = object.__new__(OffsetCommitRequest)
    for name, value in (
        ("group_id", "g"),
        ("partitions", (tuple.__new__(OffsetCommitPartition, ("t", 0, "5", "", -1)),)),
        ("generation_id", -1),
        ("member_id", ""),
        ("group_instance_id", None),
        ("retention_time_ms", -1),
    ):
        object.__setattr__(unchecked, name, value)
    token = d.send(unchecked)
    assert isinstance(d.answer(token), InvalidRequestError)
    assert not d.runtime.has_pending
    assert d.runtime.state is RuntimeState.ACTIVE


def test_requests_to_a_partition_that_is_not_active() -> None:
    runtime = PartitionRuntime(0)
    runtime.begin_load()
    released = runtime.submit(commit("g", 1), 1, 0)
    assert released[0][1].errors() == {("t", 0): Errors.COORDINATOR_LOAD_IN_PROGRESS}
    # Kafka answers heartbeats blindly while loading.
    assert runtime.submit(HeartbeatRequest("g", 1, "m"), 2, 0) == [(2, HeartbeatResponse(Errors.NONE))]
    runtime.unload(0)
    closed = runtime.submit(HeartbeatRequest("g", 1, "m"), 3, 0)
    assert closed == [(3, HeartbeatResponse(Errors.NOT_COORDINATOR))]
    assert runtime.inflight == 0


def test_the_lifecycle_is_a_transition_table() -> None:
    runtime = PartitionRuntime(0)
    with pytest.raises(IllegalRuntimeTransition):
        runtime.on_loaded(Shard(CONFIG), 0, 0)  # INITIAL -> ACTIVE
    runtime.begin_load()
    with pytest.raises(IllegalRuntimeTransition):
        runtime.begin_load()  # LOADING -> LOADING
    runtime.on_loaded(Shard(CONFIG), 0, 0)
    with pytest.raises(IllegalRuntimeTransition):
        runtime.begin_load()  # ACTIVE -> LOADING must go through FAILED
    assert runtime.state is RuntimeState.ACTIVE


def test_unload_answers_parked_requests_and_releases_held_ones_once_durable() -> None:
    d = Driver()
    parked = d.send(join("g"))
    held = d.send(commit("h", 3))
    d.take(d.runtime.unload(d.now))
    assert d.runtime.state is RuntimeState.CLOSED
    # The parked join is answered at once: no record of its group waits (h's does not affect it).
    assert d.answer(parked).error is Errors.NOT_COORDINATOR
    assert held not in d.answers
    d.flush()  # the drain
    assert d.answer(held).errors() == {("t", 0): Errors.NONE}
    late = d.send(commit("h", 4))
    assert d.answer(late).errors() == {("t", 0): Errors.NOT_COORDINATOR}
    assert d.runtime.abandon() == []


def test_unload_abandons_what_never_became_durable() -> None:
    d = Driver()
    held = d.send(commit("h", 3))
    d.take(d.runtime.unload(d.now))
    d.take(d.runtime.abandon())
    assert d.answer(held).errors() == {("t", 0): Errors.NOT_COORDINATOR}


def test_a_log_reporting_an_impossible_durable_end_fails_the_partition() -> None:
    d = Driver()
    held = d.send(commit("g", 1))
    d.runtime.take_batch()
    d.take(d.runtime.on_durable(7, d.runtime.incarnation))
    assert d.runtime.state is RuntimeState.FAILED
    assert d.answer(held).errors() == {("t", 0): Errors.NOT_COORDINATOR}


def test_a_failed_load_is_retried_and_a_refused_one_is_marked() -> None:
    runtime = PartitionRuntime(0)
    runtime.begin_load()
    runtime.on_load_failed("LogLockedError")
    assert (runtime.state, runtime.refused) == (RuntimeState.FAILED, False)
    runtime.begin_load()
    runtime.on_load_failed("missing", refused=True)
    assert (runtime.state, runtime.refused, runtime.failure) == (RuntimeState.FAILED, True, "missing")


def test_a_refused_replica_that_follows_a_leader_no_longer_refuses() -> None:
    runtime = PartitionRuntime(0)
    runtime.begin_load()
    runtime.on_load_failed("missing", refused=True)
    assert runtime.follow(0) == []
    assert (runtime.state, runtime.refused, runtime.failure) == (RuntimeState.CLOSED, False, None)
    assert runtime.follow(0) == []  # following again (a new epoch) changes nothing


def test_load_refusal() -> None:
    assert load_refusal("/d", exists=False, log_end=-1, known_end=-1) is None  # a new partition
    assert load_refusal("/d", exists=True, log_end=10, known_end=10) is None
    missing = load_refusal("/d", exists=False, log_end=-1, known_end=0)
    assert missing is not None and "/d is missing" in missing
    behind = load_refusal("/d", exists=True, log_end=3, known_end=10)
    assert behind is not None and "ends at offset 3, behind the durable end 10" in behind


# ------------------------------------------------------------ replication


def promoted(committed: int, written: int) -> Driver:
    """A driver whose runtime was loaded as a promoted follower: its log holds
    `written` records, of which `committed` are below the high watermark."""
    d = Driver()
    for offset in range(written):
        d.send(commit("g", offset))
    d.flush()
    d.runtime = PartitionRuntime(0)
    d.runtime.begin_load()
    shard = Shard(CONFIG, member_id_seed=3)
    shard.replay_many(d.log.durable)
    d.take(d.runtime.on_loaded(shard, committed, d.now, written_end=written))
    return d


def test_a_promoted_follower_releases_at_the_high_watermark_past_its_uncommitted_suffix() -> None:
    d = promoted(committed=1, written=3)
    fetch = d.send(OffsetFetchRequest("g", (("t", 0),)))
    assert fetch not in d.answers  # it observed offsets 1 and 2, not committed yet
    later = d.send(commit("g", 9))
    assert d.runtime.take_batch()  # written at offset 3
    d.take(d.runtime.on_durable(2, d.runtime.incarnation))
    assert fetch not in d.answers and later not in d.answers
    d.take(d.runtime.on_durable(3, d.runtime.incarnation))
    assert d.answer(fetch).offsets() == {("t", 0): 2}
    assert later not in d.answers
    d.take(d.runtime.on_durable(4, d.runtime.incarnation))
    assert d.answer(later).errors() == {("t", 0): Errors.NONE}


def test_a_committed_end_past_the_written_end_is_refused() -> None:
    runtime = PartitionRuntime(0)
    runtime.begin_load()
    with pytest.raises(ValueError):
        runtime.on_loaded(Shard(CONFIG), 5, 0, written_end=4)
    assert runtime.state is RuntimeState.LOADING


def test_below_min_isr_writes_are_refused_at_submit_and_reads_go_on() -> None:
    d = Driver()
    d.send(commit("g", 1))
    d.flush()
    d.runtime.writable = False
    refused = [d.send(commit("g", 2)), d.send(join("other"))]
    assert d.answer(refused[0]).errors() == {("t", 0): Errors.COORDINATOR_NOT_AVAILABLE}
    assert d.answer(refused[1]).error is Errors.COORDINATOR_NOT_AVAILABLE
    assert not d.runtime.has_pending and d.runtime.inflight == 0
    assert d.runtime.shard is not None and "other" not in d.runtime.shard.groups
    fetch = d.send(OffsetFetchRequest("g", (("t", 0),)))
    assert d.answer(fetch).offsets() == {("t", 0): 1}
    beat = d.send(HeartbeatRequest("g", 1, "m"))
    assert d.answer(beat).error is not Errors.COORDINATOR_NOT_AVAILABLE
    d.runtime.writable = True
    again = d.send(commit("g", 3))
    d.flush()
    assert d.answer(again).errors() == {("t", 0): Errors.NONE}


def test_held_responses_time_out_once_and_the_high_watermark_then_releases_nothing_twice() -> None:
    d = Driver()
    first = d.send(commit("g", 1))
    d.now += 2_000
    fetch = d.send(DescribeGroupsRequest(("g",)))  # it observed g's uncommitted record
    d.runtime.take_batch()
    assert d.runtime.oldest_held_ms == d.now - 2_000
    assert d.runtime.expire_held(d.now + 2_999, 5_000) == []
    d.take(d.runtime.expire_held(d.now + 3_000, 5_000))
    assert d.answer(first).errors() == {("t", 0): Errors.COORDINATOR_NOT_AVAILABLE}
    assert fetch not in d.answers
    d.take(d.runtime.expire_held(d.now + 5_000, 5_000))
    assert d.answer(fetch).groups[0].error is Errors.COORDINATOR_NOT_AVAILABLE
    assert d.runtime.oldest_held_ms is None and d.runtime.inflight == 0
    d.take(d.runtime.on_durable(1, d.runtime.incarnation))
    d.take(d.runtime.expire_held(d.now + 60_000, 5_000))
    assert len(d.answers[first]) == 1 and len(d.answers[fetch]) == 1
    assert d.runtime.state is RuntimeState.ACTIVE


def test_a_deposed_leader_answers_everything_not_coordinator_at_once() -> None:
    d = Driver()
    held = d.send(commit("h", 3))
    parked = d.send(join("g"))
    d.runtime.take_batch()
    d.take(d.runtime.step_down(d.now))
    assert d.runtime.state is RuntimeState.CLOSED
    assert d.answer(held).errors() == {("t", 0): Errors.NOT_COORDINATOR}
    assert d.answer(parked).error is Errors.NOT_COORDINATOR
    assert d.runtime.on_durable(1, d.runtime.incarnation) == []
    assert d.runtime.step_down(d.now) == []
    late = d.send(commit("h", 4))
    assert d.answer(late).errors() == {("t", 0): Errors.NOT_COORDINATOR}


# ------------------------------------------- reads wait only for their groups


def fetch(group: str) -> OffsetFetchRequest:
    return OffsetFetchRequest(group, (("t", 0),))


def test_a_read_of_a_committed_group_is_answered_at_once_below_min_isr() -> None:
    """Issue 24 item 2: a write of another group that cannot commit (the ISR is below
    min ISR, the high watermark stays) holds no read of a committed group."""
    d = Driver()
    d.send(commit("g", 1))
    d.flush()
    stuck = d.send(commit("h", 7))
    d.runtime.take_batch()  # written, never committed
    d.runtime.writable = False
    assert d.answer(d.send(fetch("g"))).offsets() == {("t", 0): 1}
    described = d.answer(d.send(DescribeGroupsRequest(("g", "absent"))))
    assert [group.group_id for group in described.groups] == ["g", "absent"]
    # OffsetFetch of h answers what is committed (nothing yet), at once; the reads that
    # observed h's uncommitted record wait, bounded, then get the retriable error.
    assert d.answer(d.send(fetch("h"))).offsets() == {("t", 0): -1}
    several = d.send(DescribeGroupsRequest(("g", "h")))
    listed = d.send(ListGroupsRequest())  # about every group
    assert {several, listed}.isdisjoint(d.answers)
    d.take(d.runtime.expire_held(d.now + 5_000, 5_000))
    assert d.answer(stuck).errors() == {("t", 0): Errors.COORDINATOR_NOT_AVAILABLE}
    assert d.answer(several).groups[0].error is Errors.COORDINATOR_NOT_AVAILABLE
    assert d.runtime.inflight == 0


def test_a_read_waits_for_its_groups_records_and_no_others() -> None:
    d = Driver()
    d.send(commit("g", 1))
    d.runtime.take_batch()  # offset 0: g
    d.send(commit("h", 2))
    d.runtime.take_batch()  # offset 1: h
    g_read, h_read = d.send(DescribeGroupsRequest(("g",))), d.send(DescribeGroupsRequest(("h",)))
    g_fetch, h_fetch = d.send(fetch("g")), d.send(fetch("h"))  # the committed offsets, at once
    assert d.answer(g_fetch).offsets() == d.answer(h_fetch).offsets() == {("t", 0): -1}
    d.take(d.runtime.on_durable(1, d.runtime.incarnation))
    assert d.answer(g_read).groups[0].group_id == "g" and h_read not in d.answers
    assert d.answer(d.send(fetch("g"))).offsets() == {("t", 0): 1}
    assert d.answer(d.send(fetch("h"))).offsets() == {("t", 0): -1}
    d.take(d.runtime.on_durable(2, d.runtime.incarnation))
    assert d.answer(h_read).groups[0].group_id == "h"
    assert d.answer(d.send(fetch("h"))).offsets() == {("t", 0): 2}


def test_a_loaded_suffix_holds_the_reads_of_its_groups_only() -> None:
    d = promoted(committed=1, written=3)  # offsets 1 and 2 are g's, uncommitted
    d.runtime = PartitionRuntime(0)
    d.runtime.begin_load()
    shard = Shard(CONFIG, member_id_seed=3)
    shard.replay_many(d.log.durable)
    d.take(d.runtime.on_loaded(shard, 1, d.now, written_end=3, suffix_groups=["g"]))
    assert d.answer(d.send(fetch("other"))).offsets() == {("t", 0): -1}
    g_read = d.send(fetch("g"))
    assert g_read not in d.answers
    d.take(d.runtime.on_durable(3, d.runtime.incarnation))
    assert d.answer(g_read).offsets() == {("t", 0): 2}
    # Unknown suffix groups: every read waits for the suffix (`promoted` passes none).
    unknown = promoted(committed=1, written=3)
    assert unknown.send(fetch("other")) not in unknown.answers


def test_group_ends_are_dropped_once_everything_is_committed() -> None:
    d = Driver()
    for group in ("a", "b", "c"):
        d.send(commit(group, 1))
    assert len(d.runtime._group_ends) == 3
    d.flush()
    assert d.runtime._group_ends == {}


# ----------------------------------------------------------- read confirmation


def confirming() -> Driver:
    """A leader with followers in its ISR: pushes up to 4 sent, every one answered."""
    d = Driver()
    d.runtime.on_push_sent(4)
    d.take(d.runtime.on_confirmed(4))
    return d


def test_a_read_waits_for_a_push_sent_after_it_to_be_confirmed() -> None:
    """Issue 24 item 3: a read decided after push 4 is answered only once every ISR
    follower answered push 5 or later in this epoch."""
    d = confirming()
    d.send(commit("g", 1))
    d.flush()  # a write is released at the high watermark: its records were acknowledged
    assert d.answer(1).errors() == {("t", 0): Errors.NONE}
    read = d.send(fetch("g"))
    beat = d.send(HeartbeatRequest("g", 1, "m"))
    assert {read, beat}.isdisjoint(d.answers)
    assert d.runtime.fence_wanted == 4  # the driver pushes at once
    d.runtime.on_push_sent(5)
    late = d.send(fetch("g"))  # decided after push 5 was sent
    d.take(d.runtime.on_confirmed(4))  # a late answer to an older push proves nothing
    assert {read, beat, late}.isdisjoint(d.answers)
    d.take(d.runtime.on_confirmed(5))
    assert d.answer(read).offsets() == {("t", 0): 1}
    assert isinstance(d.answer(beat), HeartbeatResponse)
    assert late not in d.answers and d.runtime.fence_wanted == 5
    d.runtime.on_push_sent(6)
    d.take(d.runtime.on_confirmed(6))
    assert d.answer(late).offsets() == {("t", 0): 1}


def test_a_confirmed_read_still_waits_for_its_groups_records() -> None:
    d = confirming()
    d.send(commit("g", 1))
    d.runtime.take_batch()
    read = d.send(DescribeGroupsRequest(("g",)))
    d.runtime.on_push_sent(5)
    d.take(d.runtime.on_confirmed(5))
    assert read not in d.answers  # confirmed, but g's record is not committed
    d.take(d.runtime.on_durable(1, d.runtime.incarnation))
    assert d.answer(read).groups[0].group_id == "g"


def test_a_read_held_for_confirmation_of_a_deposed_leader_is_not_coordinator() -> None:
    d = confirming()
    d.send(commit("g", 1))
    d.flush()
    read = d.send(fetch("g"))  # decided, e.g., by a leader resuming from a pause
    d.take(d.runtime.step_down(d.now))  # its next push met a newer epoch
    assert d.answer(read).error is Errors.NOT_COORDINATOR
    assert d.runtime.on_confirmed(9) == []


def test_an_unconfirmed_read_times_out_retriably_once() -> None:
    d = confirming()
    read = d.send(fetch("g"))
    d.take(d.runtime.expire_held(d.now + 5_000, 5_000))
    assert d.answer(read).error is Errors.NOT_COORDINATOR
    d.runtime.on_push_sent(5)
    d.take(d.runtime.on_confirmed(5))
    assert len(d.answers[read]) == 1


def test_a_leader_alone_in_its_isr_confirms_nothing() -> None:
    d = confirming()
    read = d.send(fetch("g"))
    assert read not in d.answers
    d.take(d.runtime.on_confirmed(None))  # the ISR shrank to the leader: no successor possible
    assert d.answer(read).offsets() == {("t", 0): -1}
    assert d.answer(d.send(fetch("g"))).offsets() == {("t", 0): -1}


def test_a_read_below_min_isr_answers_the_offsets_committed_before_a_stuck_write_or_deletion() -> None:
    """Issue 24 item 2: a group's own write that cannot commit (below min ISR) holds no
    read of it: OffsetFetch answers what is committed, as Kafka's reads at the last
    committed offset do, and the stuck write's values appear only once committed."""
    d = Driver()
    d.send(commit("g", 5))
    d.send(commit("g", 9, partition=1))
    d.flush()
    d.send(commit("g", 6))  # written, stuck: the ISR fell below min ISR
    d.runtime.take_batch()
    d.runtime.writable = False
    assert d.answer(d.send(fetch("g"))).offsets() == {("t", 0): 5}
    assert d.answer(d.send(OffsetFetchRequest("g", None))).offsets() == {("t", 0): 5, ("t", 1): 9}
    d.runtime.writable = True
    d.send(DeleteGroupsRequest(("g",)))  # tombstones, uncommitted
    d.runtime.take_batch()
    assert d.answer(d.send(OffsetFetchRequest("g", None))).offsets() == {("t", 0): 5, ("t", 1): 9}
    d.take(d.runtime.on_durable(d.runtime.written_end - 2, d.runtime.incarnation))  # 6, not the 2 tombstones
    assert d.answer(d.send(fetch("g"))).offsets() == {("t", 0): 6}
    d.take(d.runtime.on_durable(d.runtime.written_end, d.runtime.incarnation))  # the deletion
    assert d.answer(d.send(OffsetFetchRequest("g", None))).offsets() == {}


def test_reads_that_time_out_behind_a_commit_that_never_comes_are_not_kept() -> None:
    d = Driver()
    d.send(commit("h", 1))
    d.runtime.take_batch()  # never committed (below min ISR, say)
    held = d.runtime._held
    for _ in range(5):
        reads = [d.send(DescribeGroupsRequest(("h",))) for _read in range(1_000)]
        d.now += 5_000
        d.take(d.runtime.expire_held(d.now, 5_000))
        assert all(d.answer(read).groups[0].error is Errors.COORDINATOR_NOT_AVAILABLE for read in reads)
    assert len(held._by_barrier) <= 2_000 and d.runtime.oldest_held_ms is None
    assert d.runtime.inflight == 0
