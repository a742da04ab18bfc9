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
    Watch,
)
from actors.member.consumer_loop import COMMIT_VERSION, ConsumerLoop
from coordinator import CoordinatorConfig, Errors, Shard
from coordinator.messages import AssignmentWatchResponse, ConsumerGroupHeartbeatRequest
from coordinator.topic_partition import TopicPartition

TICK_MS = 10
REBALANCE_TIMEOUT_MS = 3_000
SESSION_TIMEOUT_MS = 10_000


class Coordinator:
    """A Shard on a manual clock, answering requests as a partition leader does."""

    def __init__(self, counts: dict[str, int], heartbeat_interval_ms: int = 100) -> None:
        config = CoordinatorConfig(
            group_consumer_heartbeat_interval_ms=heartbeat_interval_ms,
            group_consumer_session_timeout_ms=SESSION_TIMEOUT_MS,
        )
        self.shard = Shard(config)
        self.now_ms = 0
        self.ids = {name: uuid.uuid4() for name in counts}
        self.shard.update_topics(counts, 0, self.ids)
        self.members: list[Member] = []
        self.sent: list[Any] = []
        self.answers: dict[object, Any] = {}  # responses to parked requests (watches), by token
        self.kill_next_revoker = False  # the next member to revoke dies in its listener

    def submit(self, request: Any) -> object:
        """Hand the request to the shard; its response lands in `answers` (now or later)."""
        self.sent.append(request)
        token = object()
        self.answers.update(self.shard.handle(request, self.now_ms, token).responses)
        return token

    def send(self, request: Any) -> Any:
        return self.answers.pop(self.submit(request))

    def grow(self, name: str, count: int) -> None:
        counts = {t.name: t.partition_count for t in self.shard.topics.values()}
        result = self.shard.update_topics({**counts, name: count}, self.now_ms, self.ids)
        self.answers.update(result.responses)

    def run(self, ms: int) -> None:
        for _ in range(ms // TICK_MS):
            for member in self.members:
                member.drive()
            self.now_ms += TICK_MS
            for result in self.shard.poll_timers(self.now_ms):
                self.answers.update(result.responses)

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
        self.keep_alives = 0  # keep-alive heartbeats sent during each listener call, answers ignored
        self.in_listener = False
        self.loop = ConsumerLoop(
            member_config(topics, **config), wake=lambda: None, set_stable=lambda _: None,
            clock=lambda: coordinator.now_ms / 1000,
        )
        self.watch_token: object | None = None  # the parked watch's, as the drivers keep one
        self.steps = self.loop.run()
        self.effect: Any = next(self.steps)
        self.wake_at = self._wake_at(self.effect)
        coordinator.members.append(self)

    def _wake_at(self, effect: Any) -> float:
        waits = isinstance(effect, (Wait, Watch))
        return self.coordinator.now_ms + effect.timeout_s * 1000 if waits else 0

    def drive(self) -> None:
        """Perform effects until the loop waits for a time still to come."""
        while self.alive and not self.in_listener:
            effect = self.effect
            if isinstance(effect, Watch):  # as the drivers: one watch parked across heartbeats
                if self.watch_token is None:
                    self.watch_token = self.coordinator.submit(effect.request)
                answer = self.coordinator.answers.pop(self.watch_token, None)
                if answer is None and self.coordinator.now_ms < self.wake_at:
                    return
                if answer is not None:
                    self.watch_token = None
                value = answer
            elif isinstance(effect, Wait) and self.coordinator.now_ms < self.wake_at:
                return
            else:
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
            if effect.listener == "revoked" and self.coordinator.kill_next_revoker:
                self.coordinator.kill_next_revoker = False
                self.alive = False  # killed inside its revoke listener: never acknowledges
            self.events.append((effect.listener, effect.partitions))
            self.in_listener = True
            for _ in range(self.keep_alives):
                if (request := self.loop.heartbeat_request()) is not None:
                    self.coordinator.send(request)
                keep_polling(self.coordinator)
                self.coordinator.run(100)  # the others go on meanwhile
            self.in_listener = False
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
    coordinator.kill_next_revoker = True  # whichever must give a partition up dies doing it
    members.append(Member(coordinator, ("t",)))

    def one_died() -> bool:
        keep_polling(coordinator)
        return not all(m.alive for m in members)

    coordinator.run_until(one_died)
    died_ms = coordinator.now_ms
    victim = next(m for m in members if not m.alive)
    survivors = [m for m in members if m is not victim]
    settle(coordinator, survivors, all_partitions("t", 4))
    # Fenced by the rebalance timeout, well before its session would have expired.
    assert died_ms + REBALANCE_TIMEOUT_MS <= coordinator.now_ms < died_ms + SESSION_TIMEOUT_MS
    # Revived, it hears it was fenced: partitions lost, rejoined at epoch 0 with the same id.
    member_id = victim.loop.member_id
    victim.alive = True
    victim.effect = victim.steps.send(None)
    mark = len(victim.events)
    settle(coordinator, members, all_partitions("t", 4))
    assert victim.events[mark][0] == "lost"
    assert victim.loop.member_id == member_id
    assert any(
        getattr(r, "member_id", None) == member_id and r.member_epoch == 0 for r in coordinator.sent[-50:]
    )


def test_keep_alives_during_listeners_lose_nothing() -> None:
    """Heartbeats while a listener runs (the drivers' keep-alive) answer things the loop
    never sees; its next full heartbeat learns them, and no partition is lost or doubled."""
    coordinator = Coordinator({"t": 6})
    members = [Member(coordinator, ("t",)) for _ in range(3)]
    for member in members:
        member.keep_alives = 3
    settle(coordinator, members, all_partitions("t", 6))
    members.append(Member(coordinator, ("t",)))
    members[-1].keep_alives = 3
    coordinator.grow("t", 9)
    settle(coordinator, members, all_partitions("t", 9))
    members.pop(0).close()
    settle(coordinator, members, all_partitions("t", 9))
    assert all(m.since(0, "lost") == frozenset() for m in members)


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


def test_a_static_member_leaves_for_now_and_gets_its_partitions_back() -> None:
    coordinator = Coordinator({"t": 4})
    static = Member(coordinator, ("t",), group_instance_id="static-1")
    other = Member(coordinator, ("t",))
    settle(coordinator, [static, other], all_partitions("t", 4))
    held = static.owned()
    static.close()
    assert coordinator.sent[-1].member_epoch == -2 and coordinator.sent[-1].instance_id == "static-1"
    coordinator.run(500)
    assert other.owned() == all_partitions("t", 4) - held  # nothing moved while it is away
    back = Member(coordinator, ("t",), group_instance_id="static-1")
    settle(coordinator, [back, other], all_partitions("t", 4))
    assert back.owned() == held and other.since(0, "revoked") == frozenset()


def test_an_instance_id_still_held_is_fatal_for_the_newcomer() -> None:
    coordinator = Coordinator({"t": 2})
    first = Member(coordinator, ("t",), group_instance_id="dup")
    settle(coordinator, [first], all_partitions("t", 2))
    Member(coordinator, ("t",), group_instance_id="dup")
    with pytest.raises(GroupMemberError, match="UNRELEASED_INSTANCE_ID"):
        coordinator.run(200)


def test_a_settled_member_sends_only_its_epoch() -> None:
    """Kafka's HeartbeatState: once acknowledged, a heartbeat carries no unchanged field."""
    coordinator = Coordinator({"t": 2})
    member = Member(coordinator, ("t",))
    settle(coordinator, [member], all_partitions("t", 2))
    coordinator.run(1_000)
    last = [r for r in coordinator.sent if isinstance(r, ConsumerGroupHeartbeatRequest)][-3:]
    assert all(r.topic_partitions is None and r.subscribed_topic_names is None for r in last)
    assert all(r.member_epoch == member.loop.member_epoch for r in last)


def test_a_consumer_member_fetches_offsets_with_its_epoch() -> None:
    from actors.member.group_member import GroupMember

    member = GroupMember("g", ["t"], group_protocol="consumer")
    assert member._fetch_request([("t", 0)]).member_id is None  # not in the group yet
    member.core.member_epoch = 4
    request = member._fetch_request([("t", 0)])
    assert (request.member_id, request.member_epoch) == (member.member_id, 4)
    classic = GroupMember("g", ["t"])._fetch_request([("t", 0)])
    assert (classic.member_id, classic.member_epoch) == (None, -1)


# ------------------------------------------------------------ assignment watches

SLOW_HEARTBEAT_MS = 5_000
PATIENT = {"max_poll_interval_ms": 60_000}


def stable_group(members: int, watch: bool) -> tuple[Coordinator, list[Member]]:
    coordinator = Coordinator({"t": 6}, heartbeat_interval_ms=SLOW_HEARTBEAT_MS)
    group = [Member(coordinator, ("t",), assignment_watch=watch, **PATIENT) for _ in range(members)]
    settle(coordinator, group, all_partitions("t", 6))
    coordinator.run(SLOW_HEARTBEAT_MS)  # every member past its join: heartbeating at the interval
    return coordinator, group


def settles_within(
    coordinator: Coordinator, members: list[Member], expected: frozenset[TopicPartition], ms: int
) -> bool:
    try:
        coordinator.run_until(lambda: (keep_polling(coordinator), split(members, expected))[1], ms=ms)
    except AssertionError:
        return False
    return all(m.loop.stable for m in members)


@pytest.mark.parametrize("watch", [True, False])
def test_with_watches_a_joiner_settles_well_within_one_heartbeat_interval(watch: bool) -> None:
    """Kafka's members need a heartbeat per step (the owner's revocation, then the joiner's
    assignment): up to an interval each. A watch answers each step at once."""
    coordinator, members = stable_group(2, watch)
    members.append(Member(coordinator, ("t",), assignment_watch=watch, **PATIENT))
    assert settles_within(coordinator, members, all_partitions("t", 6), SLOW_HEARTBEAT_MS // 10) is watch


@pytest.mark.parametrize("watch", [True, False])
def test_with_watches_a_grown_topic_is_assigned_well_within_one_heartbeat_interval(watch: bool) -> None:
    coordinator, members = stable_group(2, watch)
    coordinator.grow("t", 12)
    assert settles_within(coordinator, members, all_partitions("t", 12), SLOW_HEARTBEAT_MS // 10) is watch


def test_a_watch_that_woke_the_member_for_nothing_is_not_sent_again_before_the_next_heartbeat() -> None:
    """A wrong `changed` costs one heartbeat, never a loop of them."""
    coordinator, (member,) = stable_group(1, watch=True)
    effect = member.effect
    assert isinstance(effect, Watch)
    steps = member.steps
    member.coordinator.answers.pop(member.watch_token, None)  # answered here instead
    heartbeat = steps.send(AssignmentWatchResponse(Errors.NONE, changed=True))
    assert isinstance(heartbeat, Send) and isinstance(heartbeat.request, ConsumerGroupHeartbeatRequest)
    after = steps.send(coordinator.send(heartbeat.request))  # nothing new: same epoch, no assignment
    assert isinstance(after, Wait)


def test_one_watch_stays_parked_across_heartbeats() -> None:
    """In a stable group a member's watch is not sent again at every heartbeat."""
    coordinator, members = stable_group(2, watch=True)
    sent = len(coordinator.sent)
    coordinator.run(10 * SLOW_HEARTBEAT_MS)
    kinds = [type(r).__name__ for r in coordinator.sent[sent:]]
    assert kinds.count("ConsumerGroupHeartbeatRequest") >= 2 * 9
    assert kinds.count("AssignmentWatchRequest") == 0
    assert all(m.watch_token is not None for m in members)
