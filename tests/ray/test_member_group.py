"""GroupMember in this process against the real service: joins and leaves with
eager and cooperative assignors, commits across a rebalance, static
membership (restart without rebalance, fencing) and max.poll.interval.ms."""

from __future__ import annotations

import pytest

from actors import Client, CommitFailedError, FencedInstanceError, GroupMember
from coordinator.topic_partition import TopicPartition

from tests.ray.helpers import form_group, group_state
from tests.ray.member_support import (
    TIMEOUT_S,
    Cleanup,
    Recorder,
    partitions,
    settled_generation,
    unique,
    view,
    wait_until,
)

pytestmark = pytest.mark.ray
SESSION_MS = 1_000


@pytest.fixture
def topic(registry: Client) -> tuple[str, frozenset[TopicPartition]]:
    """A new topic of 10 partitions: (name, its partitions)."""
    name = unique("t")
    registry.create_topic(name, 10)
    return name, partitions(name, 10)


def settle(members: list[GroupMember], expected: frozenset[TopicPartition], after: int = -1) -> int:
    return wait_until(lambda: settled_generation([view(m) for m in members], expected, after))


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_members_join_then_leave_one_by_one(cleanup: Cleanup, topic: tuple, assignor: str) -> None:
    """Every intermediate assignment is complete and disjoint; cooperative never
    revokes a partition that stays with its owner."""
    name, expected = topic
    group = unique("join-leave")
    recorders = [Recorder() for _ in range(5)]
    members = [cleanup.member(group, [name], r, assignors=[assignor]) for r in recorders]
    steps = [(members[: i + 1], members[i].start) for i in range(5)]
    steps += [(members[i + 1 :], members[i].close) for i in range(4)]
    generation = -1
    for current, step in steps:
        marks = [len(r.events) for r in recorders]
        step()
        generation = settle(current, expected, after=generation)
        if assignor == "cooperative-sticky":
            for member, recorder, mark in zip(members, recorders, marks):
                if member in current:
                    assert not recorder.since(mark, "revoked") & member.assignment()
                    assert not recorder.since(mark, "lost")
    assert members[-1].assignment() == expected
    assert members[-1].protocol_name == assignor


def test_commit_and_committed_across_a_rebalance(cleanup: Cleanup, topic: tuple) -> None:
    name, expected = topic
    group = unique("commit")
    first = cleanup.member(group, [name], assignors=["range"]).start()
    assert first.wait_for_assignment(TIMEOUT_S) == expected
    first.commit({tp: 100 + tp.partition for tp in expected}, metadata="before")
    generation = first.generation_id

    second = cleanup.member(group, [name], assignors=["range"]).start()
    settle([first, second], expected, after=generation)
    moved = second.assignment()
    assert moved and moved.isdisjoint(first.assignment())
    committed = second.committed(moved)
    assert {tp: c.offset for tp, c in committed.items() if c} == {tp: 100 + tp.partition for tp in moved}
    assert {c.metadata for c in committed.values() if c} == {"before"}
    first.commit({tp: 200 for tp in first.assignment()})
    assert {c.offset for c in second.committed(first.assignment()).values() if c} == {200}


def test_commit_with_a_stale_generation_fails_and_rejoins(
    registry: Client, cleanup: Cleanup, topic: tuple
) -> None:
    name, expected = topic
    group = unique("stale")
    first = cleanup.member(group, [name], heartbeat_interval_ms=1_000).start()
    first.wait_for_assignment(TIMEOUT_S)
    stale = first.core.commit_request({(name, 0): 1}, "")
    second = cleanup.member(group, [name]).start()
    wait_until(lambda: first.generation_id not in (-1, stale.generation_id))
    with pytest.raises(CommitFailedError) as refused:
        first.core.on_commit_response(registry.send(stale))
    assert set(refused.value.errors) == {TopicPartition(name, 0)}
    settle([first, second], expected, after=stale.generation_id)


def test_static_member_restarts_without_a_rebalance(registry: Client, cleanup: Cleanup, topic: tuple) -> None:
    name, expected = topic
    group = unique("static")
    options = {"session_timeout_ms": 3_000, "assignors": ["range"]}
    a = cleanup.member(group, [name], group_instance_id="a", **options).start()
    b = cleanup.member(group, [name], group_instance_id="b", **options).start()
    generation = settle([a, b], expected)
    owned, rebalances = a.assignment(), b.rebalances

    a.close()  # a static member sends no LeaveGroup
    restarted = cleanup.member(group, [name], group_instance_id="a", **options).start()
    assert restarted.wait_for_assignment(TIMEOUT_S) == owned
    assert restarted.generation_id == generation
    mark = b.core.next_heartbeat
    wait_until(lambda: b.core.next_heartbeat > mark + 0.3)  # b has heartbeat a few times since
    assert (b.generation_id, b.rebalances, b.is_stable) == (generation, rebalances, True)
    [described] = registry.describe_groups([group])
    assert described.state == "Stable" and len(described.members) == 2


def test_same_group_instance_id_fences_the_older_member(cleanup: Cleanup, topic: tuple) -> None:
    name, expected = topic
    group = unique("fenced")
    older = cleanup.member(group, [name], group_instance_id="x").start()
    older.wait_for_assignment(TIMEOUT_S)
    newer = cleanup.member(group, [name], group_instance_id="x").start()
    assert newer.wait_for_assignment(TIMEOUT_S) == expected
    wait_until(lambda: older.core.fatal is not None)
    with pytest.raises(FencedInstanceError):
        older.assignment()
    with pytest.raises(FencedInstanceError):
        older.wait_for_assignment(1)
    assert newer.assignment() == expected


def test_member_that_stops_polling_leaves_the_group(cleanup: Cleanup, topic: tuple) -> None:
    name, expected = topic
    group = unique("poll")
    recorder = Recorder()
    idle = cleanup.member(group, [name], recorder, max_poll_interval_ms=1_500).start()
    busy = cleanup.member(group, [name]).start()
    generation = settle([idle, busy], expected)

    # `idle` never polls again: it leaves, loses its partitions, `busy` takes them all.
    wait_until(lambda: busy.poll() == expected and busy.is_stable and busy.generation_id > generation)
    assert idle.assignment() == set() and not idle.member_id
    assert recorder.since(0, "lost")

    alone = busy.generation_id

    def both_settled() -> int:
        idle.poll()
        return settled_generation([view(idle), view(busy)], expected, alone)

    wait_until(both_settled)


def test_heartbeats_go_on_while_a_listener_runs(registry: Client, cleanup: Cleanup, topic: tuple) -> None:
    """As Kafka's heartbeat thread: a revocation slower than the session timeout keeps the membership.

    The slow listener returns only once the coordinator has expired a witness:
    the member of a group on the same offsets partition, with the same session
    timeout, whose last request came after the slow member's last heartbeat
    from its own loop. Without heartbeats while the listener runs, the slow
    member's session would have ended first."""
    name, expected = topic
    group = unique("slow")
    witness = group_on_same_partition(registry, group, "witness")
    revoked: list[set[TopicPartition]] = []
    members_at_expiry: list[set[str]] = []

    def on_revoked(parts: set[TopicPartition]) -> None:
        if not parts or revoked:
            return
        revoked.append(parts)
        form_group(registry, witness, 1, session_ms=SESSION_MS)  # and never heard from again
        wait_until(lambda: group_state(registry, witness) == "Empty")
        [described] = registry.describe_groups([group])
        members_at_expiry.append({m.member_id for m in described.members})

    options = {"session_timeout_ms": SESSION_MS, "assignors": ["range"]}
    slow = cleanup.member(group, [name], on_revoked=on_revoked, **options).start()
    slow.wait_for_assignment(TIMEOUT_S)
    member_id = slow.member_id
    other = cleanup.member(group, [name], **options).start()
    settle([slow, other], expected)
    assert revoked, "the rebalance revoked nothing from the slow member"
    assert members_at_expiry, "the witness's session never ended (see the listener's logged error)"
    assert member_id in members_at_expiry[0], "the slow member's session ended while its listener ran"
    assert slow.member_id == member_id


def group_on_same_partition(client: Client, group: str, prefix: str) -> str:
    """A new group name that the coordinator keeps on `group`'s offsets partition."""
    while client.partition_for(name := unique(prefix)) != client.partition_for(group):
        pass
    return name


def test_members_ride_over_a_coordinator_move(registry: Client, cleanup: Cleanup, topic: tuple) -> None:
    """The group's offsets partition moves to a new leader: members keep their membership."""
    name, expected = topic
    group = unique("move")
    members = [cleanup.member(group, [name]).start() for _ in range(2)]
    generation = settle(members, expected)
    ids = [m.member_id for m in members]

    registry.reassign(registry.partition_for(group))
    mark = members[0].core.next_heartbeat
    wait_until(lambda: members[0].core.next_heartbeat > mark + 0.5)  # heartbeats to the new leader
    owned = members[0].assignment()
    members[0].commit({tp: 7 for tp in owned})
    assert settle(members, expected, after=generation - 1) >= generation
    assert [m.member_id for m in members] == ids
    assert {c.offset for c in members[1].committed(owned).values() if c} == {7}
