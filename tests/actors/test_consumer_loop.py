"""The consumer-protocol member loop (actors/member/consumer_loop.py) without Ray.

Members are `ConsumerLoop`s driven on a manual clock against the real core (a
`Shard`), standing in for the client: what they send is what the coordinator
decides on, so reconciliation is checked end to end: incremental moves,
revoke before assign, acknowledgements, fencing and rejoining, leaving.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from actors.member.api import (
    CommitFailedError,
    GroupMemberError,
    MemberConfig,
    Notify,
    Send,
    TopicIds,
    Wait,
)
from actors.member.consumer_loop import COMMIT_VERSION, ConsumerLoop
from coordinator import CoordinatorConfig, Errors, Shard
from coordinator.messages import ConsumerGroupHeartbeatRequest
from coordinator.topic_partition import TopicPartition

TICK_MS = 10
REBALANCE_TIMEOUT_MS = 3_000
SESSION_TIMEOUT_MS = 10_000


class Coordinator:
    """A Shard on a manual clock, answering requests as a partition leader does."""

    def __init__(self, counts: dict[str, int]) -> None:
        config = CoordinatorConfig(
            group_consumer_heartbeat_interval_ms=100, group_consumer_session_timeout_ms=SESSION_TIMEOUT_MS
        )
        self.shard = Shard(config)
        self.now_ms = 0
        self.ids = {name: uuid.uuid4() for name in counts}
        self.shard.update_topics(counts, 0, self.ids)
        self.members: list[Member] = []
        self.sent: list[Any] = []

    def send(self, request: Any) -> Any:
        self.sent.append(request)
        token = object()
        result = self.shard.handle(request, self.now_ms, token)
        return dict(result.responses)[token]

    def grow(self, name: str, count: int) -> None:
        counts = {t.name: t.partition_count for t in self.shard.topics.values()}
        self.shard.update_topics({**counts, name: count}, self.now_ms, self.ids)

    def run(self, ms: int) -> None:
        for _ in range(ms // TICK_MS):
            for member in self.members:
                member.drive()
            self.now_ms += TICK_MS
            self.shard.poll_timers(self.now_ms)

    def run_until(self, condition: Any, ms: int = 30_000) -> None:
        for _ in range(ms // TICK_MS):
            if condition():
                return
            self.run(TICK_MS)
        raise AssertionError("condition not met on the manual clock")


class Member:
    """One ConsumerLoop and its effects, performed as GroupMember's driver does."""

    def __init__(self, coordinator: Coordinator, topics: tuple[str, ...], **config: Any) -> None:
        self.coordinator = coordinator
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.alive = True
        self.crash_on_revoke = False
        self.loop = ConsumerLoop(
            member_config(topics, **config), wake=lambda: None, set_stable=lambda _: None,
            clock=lambda: coordinator.now_ms / 1000,
        )
        self.steps = self.loop.run()
        self.effect: Any = next(self.steps)
        self.wake_at = self._wake_at(self.effect)
        coordinator.members.append(self)

    def _wake_at(self, effect: Any) -> float:
        return self.coordinator.now_ms + effect.timeout_s * 1000 if isinstance(effect, Wait) else 0

    def drive(self) -> None:
        """Perform effects until the loop waits for a time still to come."""
        while self.alive:
            effect = self.effect
            if isinstance(effect, Wait) and self.coordinator.now_ms < self.wake_at:
                return
            value = self.perform(effect)
            if not self.alive:
                return
            self.effect = self.steps.send(value)
            self.wake_at = self._wake_at(self.effect)

    def perform(self, effect: Any) -> Any:
        if isinstance(effect, Send):
            return self.coordinator.send(effect.request)
        if isinstance(effect, TopicIds):
            return dict(self.coordinator.ids)
        if isinstance(effect, Notify):
            if effect.listener == "revoked" and self.crash_on_revoke:
                self.alive = False  # killed inside its revoke listener: never acknowledges
            self.events.append((effect.listener, effect.partitions))
        return None

    def close(self) -> None:
        self.loop.close()
        self.steps.close()
        steps = self.loop.leave()
        value = None
        while True:
            try:
                effect = steps.send(value)
            except StopIteration:
                break
            value = self.perform(effect)
        self.coordinator.members.remove(self)

    def owned(self) -> frozenset[TopicPartition]:
        return frozenset(self.loop.assignment())

    def since(self, index: int, kind: str) -> frozenset[TopicPartition]:
        return frozenset().union(*(p for k, p in self.events[index:] if k == kind))


def member_config(topics: tuple[str, ...], **overrides: Any) -> MemberConfig:
    values: dict[str, Any] = {
        "group_id": "g", "topics": topics, "pattern": None, "assignors": ("range",),
        "session_timeout_ms": 10_000, "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
        "heartbeat_interval_ms": 3_000, "max_poll_interval_ms": REBALANCE_TIMEOUT_MS,
        "metadata_max_age_ms": 300_000, "retry_backoff_ms": 50, "group_instance_id": None,
        "client_id": "test", "client_host": "", "group_protocol": "consumer",
    }
    values.update(overrides)
    return MemberConfig(**values)


def all_partitions(topic: str, count: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in range(count))


def split(members: list[Member], expected: frozenset[TopicPartition]) -> bool:
    owned = [m.owned() for m in members]
    sizes = {len(o) for o in owned}
    return sum(map(len, owned)) == len(expected) and frozenset().union(*owned) == expected and (
        max(sizes) - min(sizes) <= 1
    )


def keep_polling(coordinator: Coordinator) -> None:
    for member in coordinator.members:
        member.loop.poll()


def settle(coordinator: Coordinator, members: list[Member], expected: frozenset[TopicPartition]) -> None:
    def done() -> bool:
        keep_polling(coordinator)
        return split(members, expected) and all(m.loop.stable for m in members)

    coordinator.run_until(done)


def test_three_members_split_the_partitions_and_a_fourth_moves_only_what_it_takes() -> None:
    coordinator = Coordinator({"t": 6})
    members = [Member(coordinator, ("t",)) for _ in range(3)]
    settle(coordinator, members, all_partitions("t", 6))
    assert all(m.loop.member_epoch > 0 for m in members)
    first = coordinator.sent[0]
    assert first.member_epoch == 0 and first.subscribed_topic_names == ("t",) and first.topic_partitions == ()
    assert first.rebalance_timeout_ms == REBALANCE_TIMEOUT_MS and len(first.member_id) == 22
    before = {id(m): m.owned() for m in members}
    marks = {id(m): len(m.events) for m in members}

    members.append(Member(coordinator, ("t",)))
    settle(coordinator, members, all_partitions("t", 6))
    for member in members[:3]:
        revoked = member.since(marks[id(member)], "revoked")
        assert member.owned() == before[id(member)] - revoked  # kept the rest, never lost anything
        assert member.since(marks[id(member)], "lost") == frozenset()
        assert member.since(marks[id(member)], "assigned") == frozenset()
    newcomer = members[3]
    assert newcomer.since(0, "assigned") == newcomer.owned()
    moved = frozenset().union(*(m.since(marks[id(m)], "revoked") for m in members[:3]))
    assert moved == newcomer.owned()  # only what the newcomer took moved


def test_a_member_that_leaves_hands_over_its_partitions_and_the_others_keep_theirs() -> None:
    coordinator = Coordinator({"t": 6})
    members = [Member(coordinator, ("t",)) for _ in range(3)]
    settle(coordinator, members, all_partitions("t", 6))
    leaving = members.pop()
    held = leaving.owned()
    before = {id(m): m.owned() for m in members}
    marks = {id(m): len(m.events) for m in members}
    leaving.close()
    assert leaving.events[-1] == ("revoked", held)
    assert isinstance(coordinator.sent[-1], ConsumerGroupHeartbeatRequest)
    assert coordinator.sent[-1].member_epoch == -1
    settle(coordinator, members, all_partitions("t", 6))
    for member in members:
        assert member.owned() >= before[id(member)]
        assert member.since(marks[id(member)], "revoked") == frozenset()
    assert frozenset().union(*(m.since(marks[id(m)], "assigned") for m in members)) == held


def test_a_member_killed_mid_revocation_is_fenced_and_its_partitions_reassigned() -> None:
    coordinator = Coordinator({"t": 4})
    members = [Member(coordinator, ("t",)) for _ in range(2)]
    settle(coordinator, members, all_partitions("t", 4))
    victim = members[0]
    victim.crash_on_revoke = True
    members.append(Member(coordinator, ("t",)))
    coordinator.run_until(lambda: not victim.alive)
    died_ms = coordinator.now_ms
    survivors = members[1:]
    settle(coordinator, survivors, all_partitions("t", 4))
    # Fenced by the rebalance timeout, well before its session would have expired.
    assert died_ms + REBALANCE_TIMEOUT_MS <= coordinator.now_ms < died_ms + SESSION_TIMEOUT_MS
    # Revived, it hears it was fenced: partitions lost, rejoined at epoch 0 with the same id.
    member_id = victim.loop.member_id
    victim.alive, victim.crash_on_revoke = True, False
    victim.effect = victim.steps.send(None)
    mark = len(victim.events)
    settle(coordinator, members, all_partitions("t", 4))
    assert victim.events[mark][0] == "lost"
    assert victim.loop.member_id == member_id
    assert any(
        getattr(r, "member_id", None) == member_id and r.member_epoch == 0 for r in coordinator.sent[-50:]
    )


def test_a_grown_topic_is_assigned() -> None:
    coordinator = Coordinator({"t": 2})
    members = [Member(coordinator, ("t",)) for _ in range(2)]
    settle(coordinator, members, all_partitions("t", 2))
    coordinator.grow("t", 6)
    settle(coordinator, members, all_partitions("t", 6))


def test_commits_carry_the_member_epoch() -> None:
    coordinator = Coordinator({"t": 2})
    member = Member(coordinator, ("t",))
    settle(coordinator, [member], all_partitions("t", 2))
    request = member.loop.commit_request({TopicPartition("t", 0): 5}, "")
    assert request.version == COMMIT_VERSION and request.generation_id == member.loop.member_epoch
    member.loop.on_commit_response(coordinator.send(request))
    stale = member.loop.commit_request({TopicPartition("t", 0): 6}, "")
    stale = type(stale)(stale.group_id, stale.partitions, stale.generation_id + 1, stale.member_id, version=9)
    with pytest.raises(CommitFailedError) as failed:
        member.loop.on_commit_response(coordinator.send(stale))
    assert set(failed.value.errors.values()) == {Errors.STALE_MEMBER_EPOCH}


def test_an_unsupported_assignor_is_fatal() -> None:
    coordinator = Coordinator({"t": 2})
    Member(coordinator, ("t",), group_remote_assignor="no-such")
    with pytest.raises(GroupMemberError, match="UNSUPPORTED_ASSIGNOR"):
        coordinator.run(100)


def test_a_pattern_subscription_is_resolved_by_the_coordinator() -> None:
    coordinator = Coordinator({"orders-eu": 2, "orders-us": 2, "payments": 2})
    member = Member(coordinator, (), subscription_pattern="orders-.*")
    expected = all_partitions("orders-eu", 2) | all_partitions("orders-us", 2)
    settle(coordinator, [member], expected)
    assert coordinator.sent[0].subscribed_topic_regex == "orders-.*"


def test_config_rules() -> None:
    with pytest.raises(ValueError, match="group_protocol"):
        member_config(("t",), group_protocol="eager")
    with pytest.raises(ValueError, match="subscription_pattern"):
        member_config(("t",), group_protocol="classic", subscription_pattern="x.*")
    with pytest.raises(ValueError, match="not both"):
        member_config(("t",), subscription_pattern="x.*")
