"""Assignment watches (coordinator/consumer/watch.py): a parked watch is answered
`changed` exactly when a heartbeat would change the member's partitions, and
otherwise at its timeout; it writes nothing."""

from __future__ import annotations

from typing import Any

from coordinator.consumer.watch import MAX_WATCH_MS
from coordinator.errors import Errors
from coordinator.messages import (
    AssignmentWatchRequest,
    AssignmentWatchResponse,
    ConsumerGroupHeartbeatResponse,
)

from tests.consumer.heartbeat_harness import GROUP, Driver, beat, join, owned, tp

CHANGED = AssignmentWatchResponse(Errors.NONE, changed=True)
UNCHANGED = AssignmentWatchResponse(Errors.NONE, changed=False)


class WatchDriver(Driver):
    """Requests with their own tokens; what each step answered, parked requests included."""

    def __init__(self, topics: dict[str, int], **config: Any) -> None:
        super().__init__(topics, **config)
        self.answered: dict[str, Any] = {}
        self.count = 0

    def call(self, request: Any, token: str | None = None) -> Any:
        """Handle `request`; its own response (None: parked). Others answered go to `answered`."""
        self.count += 1
        token = token or f"t{self.count}"
        result = self.shard.handle(request, self.now, token)
        self.absorb_records(result.records)
        own = None
        for answered_token, response in result.responses:
            if answered_token == token:
                own = response
            else:
                self.answered[answered_token] = response
        return own

    def beat(self, request: Any) -> ConsumerGroupHeartbeatResponse:
        response = self.call(request)
        assert response.error is Errors.NONE, response
        return response

    def watch(self, member_id: str, epoch: int, timeout_ms: int = 5_000) -> Any:
        request = AssignmentWatchRequest(GROUP, member_id, epoch, timeout_ms)
        return self.call(request, token=f"watch-{member_id}")

    def take(self, member_id: str) -> Any:
        return self.answered.pop(f"watch-{member_id}", None)

    def tick(self, ms: int) -> None:
        self.now += ms
        for result in self.shard.poll_timers(self.now):
            self.absorb_records(result.records)
            self.answered.update(result.responses)

    def topics(self, counts: dict[str, int]) -> list[Any]:
        result = self.shard.update_topics(counts, self.now)
        self.absorb_records(result.records)
        if hasattr(self, "answered"):
            self.answered.update(result.responses)
        return self.last


def two_stable_members(partitions: int = 4) -> tuple[WatchDriver, int]:
    d = WatchDriver({"a": partitions})
    first = d.beat(join("m1", "a"))
    d.beat(beat("m1", first.member_epoch, owns=first.assignment))
    second = d.beat(join("m2", "a"))
    assert owned(second.assignment) == {}  # m1 still owns what m2 is to get
    r1 = d.beat(beat("m1", first.member_epoch, owns=first.assignment))
    r1 = d.beat(beat("m1", r1.member_epoch, owns=r1.assignment))
    r2 = d.beat(beat("m2", second.member_epoch, owns=()))
    assert r1.member_epoch == r2.member_epoch
    d.beat(beat("m2", r2.member_epoch, owns=r2.assignment))
    return d, r1.member_epoch


def test_a_watch_of_a_reconciled_member_waits_for_its_timeout_and_writes_nothing() -> None:
    d, epoch = two_stable_members()
    before = len(d.log)
    assert d.watch("m1", epoch, timeout_ms=3_000) is None
    d.tick(2_999)
    assert d.take("m1") is None
    d.tick(1)
    assert d.take("m1") == UNCHANGED
    assert len(d.log) == before
    assert d.shard.assignment_watches == {}


def test_a_joiner_wakes_the_member_giving_up_partitions_then_is_woken_when_they_are_released() -> None:
    d = WatchDriver({"a": 4})
    first = d.beat(join("m1", "a"))
    r1 = d.beat(beat("m1", first.member_epoch, owns=first.assignment))
    assert owned(first.assignment) == owned((tp("a", 0, 1, 2, 3),))
    assert d.watch("m1", r1.member_epoch) is None

    second = d.beat(join("m2", "a"))
    assert d.take("m1") == CHANGED  # the join's assignor took two of m1's partitions
    assert d.watch("m2", second.member_epoch) is None  # m2 waits for them
    assert d.take("m2") is None

    revoke = d.beat(beat("m1", r1.member_epoch, owns=first.assignment))
    assert d.take("m2") is None  # told to revoke, not yet revoked
    d.beat(beat("m1", revoke.member_epoch, owns=revoke.assignment))
    assert d.take("m2") == CHANGED  # released: m2 need not wait for its interval
    got = d.beat(beat("m2", second.member_epoch, owns=()))
    assert sum(len(p) for p in owned(got.assignment).values()) == 2


def test_a_waiting_member_is_woken_for_each_partition_released_not_only_the_last() -> None:
    d, epoch = two_stable_members(partitions=6)
    joined = d.beat(join("m3", "a"))
    revocations = {m: d.beat(beat(m, epoch)) for m in ("m1", "m2")}
    assert all(sum(len(p) for p in owned(r.assignment).values()) == 2 for r in revocations.values())
    acked = d.beat(beat("m3", joined.member_epoch, owns=()))
    assert d.watch("m3", acked.member_epoch) is None
    d.beat(beat("m1", revocations["m1"].member_epoch, owns=revocations["m1"].assignment))
    assert d.take("m3") == CHANGED
    first = d.beat(beat("m3", acked.member_epoch, owns=()))
    assert sum(len(p) for p in owned(first.assignment).values()) == 1
    assert d.watch("m3", first.member_epoch) is None
    d.beat(beat("m2", revocations["m2"].member_epoch, owns=revocations["m2"].assignment))
    assert d.take("m3") == CHANGED
    second = d.beat(beat("m3", first.member_epoch, owns=first.assignment))
    assert sum(len(p) for p in owned(second.assignment).values()) == 2


def test_a_grown_topic_wakes_one_watcher_whose_heartbeat_runs_the_assignor_then_those_it_concerns() -> None:
    d, epoch = two_stable_members()
    assert d.watch("m1", epoch) is None
    assert d.watch("m2", epoch) is None
    d.topics({"a": 8})
    assert d.take("m1") == CHANGED  # the oldest watcher runs the assignor
    assert d.take("m2") is None
    grown = d.beat(beat("m1", epoch))
    assert grown.member_epoch > epoch
    assert d.take("m2") == CHANGED  # the new target gives m2 new partitions too
    assert sum(len(p) for p in owned(grown.assignment).values()) == 4


def test_a_member_leaving_wakes_one_watcher_to_take_its_partitions() -> None:
    d, epoch = two_stable_members()
    assert d.watch("m1", epoch) is None
    d.beat(beat("m2", -1))
    assert d.take("m1") == CHANGED
    got = d.beat(beat("m1", epoch))
    assert sum(len(p) for p in owned(got.assignment).values()) == 4


def test_a_watch_stays_parked_across_the_members_heartbeats_at_its_new_epoch() -> None:
    d, epoch = two_stable_members()
    assert d.watch("m1", epoch) is None
    d.beat(beat("m1", epoch))
    assert d.take("m1") is None
    d.topics({"a": 8})
    assert d.take("m1") == CHANGED  # the oldest watcher runs the assignor
    grown = d.beat(beat("m1", epoch))
    assert d.watch("m1", grown.member_epoch) is None
    assert d.watch("m2", epoch) == CHANGED  # m2 is behind, with partitions to get
    got = d.beat(beat("m2", epoch))
    assert d.watch("m2", got.member_epoch) is None
    d.beat(beat("m2", got.member_epoch, owns=got.assignment))
    d.beat(beat("m1", grown.member_epoch, owns=grown.assignment))
    assert d.take("m1") is None and d.take("m2") is None  # their own heartbeats: nothing new
    assert {m: w.epoch for m, w in d.shard.assignment_watches[GROUP].by_member.items()} == {
        "m1": grown.member_epoch, "m2": got.member_epoch,
    }


def test_a_second_watch_replaces_the_first_which_is_answered_unchanged() -> None:
    d, epoch = two_stable_members()
    assert d.watch("m1", epoch) is None
    d.count += 1
    assert d.call(AssignmentWatchRequest(GROUP, "m1", epoch, 1_000), token="again") is None
    assert d.take("m1") == UNCHANGED
    d.tick(1_000)
    assert d.answered.pop("again") == UNCHANGED


def test_a_stale_epoch_an_unknown_member_or_group_is_answered_changed_at_once() -> None:
    d, epoch = two_stable_members()
    assert d.watch("m1", epoch - 1) == CHANGED
    assert d.watch("nobody", epoch) == CHANGED
    assert d.call(AssignmentWatchRequest("other-group", "m1", 1, 1_000)) == CHANGED
    assert d.shard.assignment_watches == {}


def test_malformed_watches_are_refused_to_that_caller_alone() -> None:
    d, epoch = two_stable_members()
    assert d.watch("m2", epoch) is None
    before = len(d.log)
    for member_id, member_epoch, timeout_ms in [
        ("", epoch, 1_000),
        ("m1", 0, 1_000),
        ("m1", -1, 1_000),
        ("m1", epoch, -1),
        ("m1", epoch, MAX_WATCH_MS + 1),
    ]:
        request = AssignmentWatchRequest(GROUP, member_id, member_epoch, timeout_ms)
        assert d.call(request) == AssignmentWatchResponse(Errors.INVALID_REQUEST)
    assert d.call(AssignmentWatchRequest("", "m1", epoch, 1_000)).error is Errors.INVALID_GROUP_ID
    assert len(d.log) == before
    assert d.take("m2") is None and set(d.shard.assignment_watches[GROUP].by_member) == {"m2"}


def test_unloading_answers_every_watch_not_coordinator() -> None:
    d, epoch = two_stable_members()
    assert d.watch("m1", epoch) is None
    assert d.watch("m2", epoch) is None
    result = d.shard.unload(d.now)
    assert dict(result.responses) == {
        "watch-m1": AssignmentWatchResponse(Errors.NOT_COORDINATOR),
        "watch-m2": AssignmentWatchResponse(Errors.NOT_COORDINATOR),
    }


def test_one_joiner_in_a_large_group_wakes_only_the_members_whose_partitions_move() -> None:
    members, partitions = 200, 1_000
    d = WatchDriver({"a": partitions})
    epochs = {}
    for index in range(members):
        epochs[f"m{index}"] = d.beat(join(f"m{index}", "a")).member_epoch
    # Everyone heartbeats until stable.
    for _ in range(3):
        for member_id in epochs:
            member = d.shard.consumer_groups[GROUP].members[member_id]
            owns = tuple(tp_id(t, ps) for t, ps in member.assigned_partitions.items())
            epochs[member_id] = d.beat(beat(member_id, epochs[member_id], owns=owns)).member_epoch
    for member_id, epoch in epochs.items():
        assert d.watch(member_id, epoch) is None
    d.beat(join("newcomer", "a"))
    woken = {token for token, response in d.answered.items() if response == CHANGED}
    group = d.shard.consumer_groups[GROUP]
    target, members_now = group.target_assignment, group.members
    moved = {f"watch-{m}" for m in epochs if target[m] != members_now[m].assigned_partitions}
    assert woken == moved
    assert 0 < len(moved) < members // 2


def tp_id(topic_id: Any, partitions: frozenset[int]) -> Any:
    from coordinator.messages import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(topic_id, tuple(sorted(partitions)))
