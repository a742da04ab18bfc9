"""Consumer-protocol members (KIP-848) on the session's service: real GroupMembers and
AsyncGroupMembers with group_protocol="consumer", in this process and in Ray actors.

Each check waits (bounded) for a settled group: every member reconciled, the
partitions complete and disjoint. The coordinator's heartbeat interval is the
session service's (tests/conftest.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import pytest
import ray

from actors import Client, GroupMember
from coordinator.consumer.watch import MAX_WATCH_MS
from coordinator.errors import Errors
from coordinator.messages import AssignmentWatchRequest, AssignmentWatchResponse
from coordinator.topic_partition import TopicPartition

from tests.ray.member_support import (
    FAST,
    TIMEOUT_S,
    AsyncMemberHost,
    Cleanup,
    Recorder,
    partitions,
    unique,
    wait_until,
)

pytestmark = pytest.mark.ray
CONSUMER = {"group_protocol": "consumer", "max_poll_interval_ms": 60_000}
View = tuple[bool, int, frozenset[TopicPartition]]


def local_view(member: GroupMember) -> View:
    return member.is_stable, member.generation_id, frozenset(member.assignment())


def settled(views: Iterable[View], expected: frozenset[TopicPartition]) -> bool:
    """Every member reconciled in the group (epoch > 0), and the partitions split among them."""
    views = list(views)
    owned = [a for _, _, a in views]
    return (
        all(stable and epoch > 0 for stable, epoch, _ in views)
        and sum(map(len, owned)) == len(expected)
        and frozenset().union(*owned) == expected
    )


def balanced(members: list[GroupMember]) -> bool:
    sizes = {len(m.assignment()) for m in members}
    return max(sizes) - min(sizes) <= 1


def consumer(cleanup: Cleanup, group: str, topic: str, recorder: Recorder, **options: Any) -> GroupMember:
    member = cleanup.member(group, [topic], recorder, **{**CONSUMER, **options})
    member.start()
    return member


def test_members_split_the_partitions_and_move_only_what_must_move(
    registry: Client, cleanup: Cleanup
) -> None:
    topic, group = unique("t"), unique("kip848")
    registry.create_topic(topic, 6)
    expected = partitions(topic, 6)
    recorders = [Recorder() for _ in range(4)]
    members = [consumer(cleanup, group, topic, recorders[i]) for i in range(3)]
    wait_until(lambda: settled(map(local_view, members), expected) and balanced(members))
    assert {len(m.assignment()) for m in members} == {2}
    assert all(m.group_protocol == "consumer" and not m.is_leader for m in members)

    before = [frozenset(m.assignment()) for m in members]
    marks = [len(r.events) for r in recorders]
    members.append(consumer(cleanup, group, topic, recorders[3]))
    wait_until(lambda: settled(map(local_view, members), expected) and balanced(members))
    for i in range(3):  # incremental: each revoked only what moved, and kept the rest
        revoked = recorders[i].since(marks[i], "revoked")
        assert frozenset(members[i].assignment()) == before[i] - revoked
        assert recorders[i].since(marks[i], "lost") == frozenset()
    newcomer = frozenset(members[3].assignment())
    assert frozenset().union(*(recorders[i].since(marks[i], "revoked") for i in range(3))) == newcomer

    leaving = members.pop(0)
    held = frozenset(leaving.assignment())
    before = [frozenset(m.assignment()) for m in members]
    marks = [len(r.events) for r in recorders[1:]]
    leaving.close()
    assert recorders[0].events[-1] == ("revoked", held)
    wait_until(lambda: settled(map(local_view, members), expected) and balanced(members))
    for member, recorder, kept, mark in zip(members, recorders[1:], before, marks):
        assert frozenset(member.assignment()) >= kept  # nobody gave anything up
        assert recorder.since(mark, "revoked") == frozenset()


def test_commits_carry_the_member_epoch(registry: Client, cleanup: Cleanup) -> None:
    topic, group = unique("t"), unique("kip848-commit")
    registry.create_topic(topic, 4)
    member = consumer(cleanup, group, topic, Recorder())
    owned = member.wait_for_assignment(TIMEOUT_S)
    wait_until(lambda: len(member.poll()) == 4)
    owned = member.assignment()
    member.commit({tp: 100 + tp.partition for tp in owned}, metadata="epoch")
    committed = member.committed(owned)
    assert {tp: c.offset for tp, c in committed.items() if c} == {tp: 100 + tp.partition for tp in owned}
    # An async member in an async actor commits with its own epoch into the same group.
    host = cleanup.host(AsyncMemberHost)
    ray.get(host.add.remote("async", group, [topic], **{**FAST, **CONSUMER}), timeout=TIMEOUT_S)
    mine = ray.get(host.wait_and_commit.remote("async", 500), timeout=TIMEOUT_S)
    wait_until(lambda: len(member.poll()) + len(mine) <= 4)


@ray.remote(num_cpus=0)
class StuckRevoker:
    """A consumer-protocol member whose revoke listener, once armed, never returns
    (then its process is killed)."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.revoking = threading.Event()
        self.member: GroupMember | None = None

    def add(self, group_id: str, topics: list[str], **options: Any) -> None:
        def on_revoked(parts: set[TopicPartition]) -> None:
            if self.armed.is_set():
                self.revoking.set()
                threading.Event().wait()  # stuck for good

        self.member = GroupMember(group_id, topics, on_revoked=on_revoked, **options).start()

    def arm(self) -> None:
        self.armed.set()

    def owned(self) -> tuple[bool, int, frozenset[TopicPartition]]:
        assert self.member is not None
        self.member.poll()  # the application is alive (max.poll.interval.ms is short here)
        return local_view(self.member)

    def is_revoking(self) -> bool:
        return self.revoking.is_set()

    def close_all(self) -> None:
        pass  # stuck in its listener: the test kills it


def test_a_member_killed_mid_revocation_is_fenced_and_its_partitions_reassigned(
    registry: Client, cleanup: Cleanup
) -> None:
    topic, group = unique("t"), unique("kip848-stuck")
    registry.create_topic(topic, 4)
    expected = partitions(topic, 4)
    stuck = cleanup.host(StuckRevoker)
    # The rebalance timeout is max.poll.interval.ms, as Kafka's consumer sends it.
    ray.get(stuck.add.remote(group, [topic], **{**FAST, **CONSUMER, "max_poll_interval_ms": 3_000}))
    first = consumer(cleanup, group, topic, Recorder())

    def stuck_view() -> list[View]:
        return [ray.get(stuck.owned.remote(), timeout=TIMEOUT_S)]

    wait_until(lambda: settled([*stuck_view(), local_view(first)], expected))
    held = stuck_view()[0][2]
    assert held
    ray.get(stuck.arm.remote())
    # Two more members: a share of one partition each, so the stuck member must revoke one.
    others = [first, *(consumer(cleanup, group, topic, Recorder()) for _ in range(2))]
    wait_until(lambda: ray.get(stuck.is_revoking.remote(), timeout=TIMEOUT_S))
    ray.kill(stuck)  # mid-revocation: it never acknowledges
    wait_until(lambda: settled(map(local_view, others), expected))
    taken = frozenset().union(*(frozenset(m.assignment()) for m in others))
    assert held <= taken


def test_a_grown_topic_and_a_created_one_are_assigned(registry: Client, cleanup: Cleanup) -> None:
    topic, later, group = unique("t"), unique("later"), unique("kip848-grow")
    registry.create_topic(topic, 2)
    members = [
        cleanup.member(group, [topic, later], Recorder(), **CONSUMER).start() for _ in range(2)
    ]  # `later` does not exist yet: nothing of it to assign
    wait_until(lambda: settled(map(local_view, members), partitions(topic, 2)))
    epochs = [m.generation_id for m in members]
    registry.create_partitions(topic, 6)  # the registry's change reaches the coordinator by itself
    wait_until(lambda: settled(map(local_view, members), partitions(topic, 6)) and balanced(members))
    assert all(m.generation_id > e for m, e in zip(members, epochs))
    registry.create_topic(later, 2)
    everything = partitions(topic, 6) | partitions(later, 2)
    wait_until(lambda: settled(map(local_view, members), everything) and balanced(members))


def test_topic_ids_are_stable_and_distinct(registry: Client) -> None:
    names = [unique("ids"), unique("ids")]
    for name in names:
        registry.create_topic(name, 1)
    ids = registry.topic_ids(names)
    assert set(ids) == set(names) and len(set(ids.values())) == 2
    registry.create_partitions(names[0], 3)
    assert registry.topic_ids(names) == ids


def test_a_watch_parked_at_the_partition_actor_is_answered_when_a_joiner_takes_partitions(
    registry: Client, cleanup: Cleanup
) -> None:
    """The path a member's assignment watch takes: Client.send_later, the actor, the shard."""
    topic, group = unique("t"), unique("watch")
    registry.create_topic(topic, 4)
    first = consumer(cleanup, group, topic, Recorder(), assignment_watch=False)
    wait_until(lambda: settled([local_view(first)], partitions(topic, 4)))
    watch = AssignmentWatchRequest(group, first.member_id, first.generation_id, MAX_WATCH_MS)
    answer = registry.send_later(watch)
    consumer(cleanup, group, topic, Recorder())
    assert answer.result(timeout=TIMEOUT_S) == AssignmentWatchResponse(Errors.NONE, changed=True)
