"""Handing groups from one offsets partition to another (coordinator/handoff.py): which
counts are allowed, the fence, and a group's state moved whole through the log's codec."""

from __future__ import annotations

import copy

import pytest

from coordinator.errors import Errors
from coordinator.handoff import group_records, moving, refusal, release_moved
from coordinator.messages import DescribeGroupsRequest, ListGroupsRequest
from coordinator.routing import Routing, partition_for
from coordinator.shard import Shard
from log.codec import decode_records, encode_payload

from tests.consumer.group_history import History, state
from tests.core.harness import SESSION_MS, Harness


def groups_on(partition: int, count: int, n: int) -> list[str]:
    names = (f"group-{i}" for i in range(100_000))
    return [g for g in names if partition_for(g, count) == partition][:n]


@pytest.mark.parametrize(("current", "count"), [(8, 16), (8, 24), (8, 4), (8, 1), (1, 50), (50, 10)])
def test_multiples_and_divisors_are_allowed(current: int, count: int) -> None:
    assert refusal(current, count) is None


@pytest.mark.parametrize(
    ("current", "count", "why"),
    [(8, 12, "neither a multiple nor a divisor"), (8, 8, "already has 8"), (8, 0, "at least 1")],
)
def test_other_counts_are_refused_with_the_reason(current: int, count: int, why: str) -> None:
    reason = refusal(current, count)
    assert reason is not None and why in reason
    if "neither" in why:
        assert "16" in reason and "4" in reason, "it names counts that would do"


def test_growing_moves_each_group_to_one_partition_of_its_own_residue() -> None:
    for group in groups_on(3, 8, 50):
        assert partition_for(group, 32) % 8 == 3
        assert partition_for(group, 4) == 3 % 4


def moved_through_the_codec(source: Shard, group_id: str) -> list:  # type: ignore[type-arg]
    return decode_records(encode_payload(group_records(source, group_id)))


def test_a_classic_group_moves_whole_and_the_source_is_fenced() -> None:
    h = Harness()
    h.shard.owner = Routing(2)
    stay, move = groups_on(0, 4, 1)[0], groups_on(2, 4, 1)[0]  # both on partition 0 of 2
    members, generation = h.form_group(move, 3)
    h.commit(move, {("t", 0): 5, ("t", 1): 9}, generation, members[0])
    h.form_group(stay, 2)
    parked = h.join(move, members[0])  # a rejoin parks: the join phase waits for the others
    before = copy.deepcopy(h.shard.persistent_view()[move])

    grown = Routing(4, previous=2, switched=frozenset({0}))
    h.absorb(h.shard.begin_handoff(grown, h.now))
    assert h.take(parked).error is Errors.NOT_COORDINATOR, "parked requests are answered"
    assert moving(h.shard, grown) == [move]
    assert h.heartbeat(move, members[1], generation) is Errors.NOT_COORDINATOR
    assert h.fetch(stay) == {}  # the group that stays is served
    described = h.call(DescribeGroupsRequest((move, stay))).groups
    assert [d.error for d in described] == [Errors.NOT_COORDINATOR, Errors.NONE]
    assert [g.group_id for g in h.call(ListGroupsRequest()).groups] == [stay]
    h.advance(10 * SESSION_MS)  # frozen: its members' sessions do not expire here
    assert h.shard.persistent_view()[move] == before

    target = Shard(h.shard.config, partition=2)
    target.owner = grown
    target.admit_groups(moved_through_the_codec(h.shard, move), h.now)
    assert target.persistent_view()[move] == before
    assert release_moved(h.shard) == [move]
    assert move not in h.shard.groups and stay in h.shard.groups

    # the admitted members' sessions run at the target: silent members expire there
    assert target.groups[move].members
    assert any(r.records for r in target.poll_timers(h.now + 2 * SESSION_MS))
    assert not target.groups[move].members

    # the source's log still holds the moved group: a reload under the new count never serves it
    reloaded = Shard(h.shard.config)
    reloaded.replay_many(h.log)
    reloaded.owner = Routing(4)
    assert reloaded.handle(DescribeGroupsRequest((move,)), h.now).responses[0][1].groups[0].error is (
        Errors.NOT_COORDINATOR
    )
    assert release_moved(reloaded) == [move]


def test_an_abandoned_handoff_serves_the_frozen_groups_again() -> None:
    h = Harness()
    move = groups_on(1, 2, 1)[0]
    members, generation = h.form_group(move, 2)
    h.absorb(h.shard.begin_handoff(Routing(2), h.now))
    assert h.heartbeat(move, members[0], generation) is Errors.NOT_COORDINATOR
    h.absorb(h.shard.abort_handoff(None, h.now))
    assert h.heartbeat(move, members[0], generation) is Errors.NONE
    h.advance(2 * SESSION_MS)  # its timers run again: both members go silent and expire
    assert not h.shard.groups[move].members


@pytest.mark.parametrize("seed", range(4))
def test_consumer_groups_and_offsets_move_whole_under_a_grow(seed: int) -> None:
    history = History(seed).run(150)
    source = Shard(partition=0)
    for batch in history.batches:
        source.replay_many(batch)
    want = copy.deepcopy(state(source.consumer_groups))
    offsets = {g: dict(group.offsets) for g, group in source.groups.items()}
    assert want, "the history is not trivial"

    grown = Routing(4, previous=1, switched=frozenset({0}))
    source.begin_handoff(grown, 0)
    targets = {q: Shard(partition=q) for q in (1, 2, 3)}
    for group_id in moving(source, grown):
        target = targets[partition_for(group_id, 4)]
        target.admit_groups(moved_through_the_codec(source, group_id), 0)
    release_moved(source)

    for shard in (source, *targets.values()):
        for group_id, group in shard.consumer_groups.items():
            assert partition_for(group_id, 4) == shard.partition
            assert state({group_id: group}) == {group_id: want[group_id]}
        for group_id, group in shard.groups.items():
            assert group.offsets == offsets[group_id]
    held = [g for shard in (source, *targets.values()) for g in shard.consumer_groups]
    assert sorted(held) == sorted(want)


def test_a_target_serves_only_the_groups_of_switched_sources() -> None:
    """Growing 2 -> 4: partition 2 takes partition 0's groups once 0 switched, never 1's."""
    from_0, from_1 = groups_on(2, 4, 1)[0], groups_on(3, 4, 1)[0]
    assert (partition_for(from_0, 2), partition_for(from_1, 2)) == (0, 1)
    during = Routing(4, previous=2, switched=frozenset({0}))
    assert during.partition_for(from_0) == 2 and during.partition_for(from_1) == 1
    assert Routing(4, previous=2, switched=frozenset({0, 1})).partition_for(from_1) == 3
    shrunk = Routing(1, previous=2, switched=frozenset({1}))
    assert shrunk.partition_for(from_1) == 0 and shrunk.partition_for(from_0) == 0
