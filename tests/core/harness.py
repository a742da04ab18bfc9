"""A manual-clock driver for the Shard, used by the core tests.

It hands each request a fresh token, keeps the responses it gets back, and
checks the core's promise that every request is answered exactly once.
"""

from __future__ import annotations

from typing import Any

from coordinator import CoordinatorConfig, Errors, Result, Shard
from coordinator.consumer_protocol import Subscription, encode_subscription
from coordinator.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from coordinator.records import Record

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str) -> bytes:
    return encode_subscription(Subscription(tuple(topics)))


def protocols(*names: str, topics: tuple[str, ...] = ("t",)) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, subscription(*topics)) for name in (names or ("range",)))


class Harness:
    def __init__(self, config: CoordinatorConfig | None = None, **config_overrides: Any) -> None:
        if config is None:
            config = CoordinatorConfig(**config_overrides)
        self.shard = Shard(config, member_id_seed=7)
        self.now = 1_000
        self.log: list[Record] = []
        self.answers: dict[int, Any] = {}
        self.open: set[int] = set()
        self.rebalances: list[int] = []  # join-phase durations the shard reported
        self._next_token = 0
        self.absorb(self.shard.on_loaded(self.now))

    # ------------------------------------------------------------ driving

    def send(self, request: Any) -> int:
        self._next_token += 1
        token = self._next_token
        self.open.add(token)
        self.absorb(self.shard.handle(request, self.now, token))
        return token

    def call(self, request: Any) -> Any:
        token = self.send(request)
        assert token in self.answers, f"{type(request).__name__} was parked, expected an answer"
        return self.answers.pop(token)

    def take(self, token: int) -> Any:
        return self.answers.pop(token)

    def answered(self, token: int) -> bool:
        return token in self.answers

    def advance(self, ms: int) -> None:
        self.now += ms
        for result in self.shard.poll_timers(self.now):
            self.absorb(result)

    def advance_until_answered(
        self, tokens: list[int], step_ms: int = 1_000, limit_ms: int = 600_000
    ) -> None:
        waited = 0
        self.advance(0)
        while not all(t in self.answers for t in tokens):
            assert waited < limit_ms, "requests still parked"
            self.advance(step_ms)
            waited += step_ms

    def absorb(self, result: Result) -> None:
        self.log.extend(result.records)
        self.rebalances.extend(result.rebalances)
        for token, response in result.responses:
            assert token in self.open, f"token {token} answered twice or never sent: {response}"
            self.open.remove(token)
            self.answers[token] = response

    def replayed(self) -> Shard:
        shard = Shard(self.shard.config)
        shard.replay_many(self.log)
        return shard

    # ----------------------------------------------------- member helpers

    def join_request(self, group: str = "g", member_id: str = "", **kw: Any) -> JoinGroupRequest:
        kw.setdefault("session_timeout_ms", SESSION_MS)
        kw.setdefault("rebalance_timeout_ms", REBALANCE_MS)
        kw.setdefault("protocol_type", "consumer")
        kw.setdefault("protocols", protocols())
        kw.setdefault("client_id", "client")
        return JoinGroupRequest(group, member_id=member_id, **kw)

    def join(self, group: str = "g", member_id: str = "", **kw: Any) -> int:
        """Send JoinGroup; for a new dynamic member do the KIP-394 round first."""
        if member_id == "" and kw.get("group_instance_id") is None:
            first = self.call(self.join_request(group, "", **kw))
            assert first.error is Errors.MEMBER_ID_REQUIRED, first
            member_id = first.member_id
        return self.send(self.join_request(group, member_id, **kw))

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        **kw: Any,
    ) -> int:
        return self.send(
            SyncGroupRequest(
                group, generation, member_id, assignments=tuple((assignments or {}).items()), **kw
            )
        )

    def heartbeat(self, group: str, member_id: str, generation: int, **kw: Any) -> Errors:
        return self.call(HeartbeatRequest(group, generation, member_id, **kw)).error

    def leave(self, group: str, *member_ids: str) -> Any:
        return self.call(LeaveGroupRequest(group, tuple(MemberIdentity(m) for m in member_ids)))

    def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        generation: int = -1,
        member_id: str = "",
        **kw: Any,
    ) -> dict[tuple[str, int], Errors]:
        parts = tuple(OffsetCommitPartition(t, p, o) for (t, p), o in offsets.items())
        response = self.call(OffsetCommitRequest(group, parts, generation, member_id, **kw))
        return response.errors()

    def fetch(
        self, group: str, partitions: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], int]:
        parts = tuple(partitions) if partitions is not None else None
        response = self.call(OffsetFetchRequest(group, parts))
        assert response.error is Errors.NONE
        return response.offsets()

    def form_group(self, group: str, n: int, **kw: Any) -> tuple[list[str], int]:
        """n members join and sync; returns member ids (leader first) and generation."""
        tokens = [self.join(group, **kw) for _ in range(n)]
        self.advance_until_answered(tokens)
        responses: list[JoinGroupResponse] = [self.take(t) for t in tokens]
        assert all(r.error is Errors.NONE for r in responses), responses
        generation = responses[0].generation_id
        leader = responses[0].leader
        ids = [r.member_id for r in responses]
        followers = [m for m in ids if m != leader]
        follower_tokens = [self.sync(group, m, generation) for m in followers]
        assignment = {m: m.encode() for m in ids}
        leader_token = self.sync(group, leader, generation, assignment)
        assert self.take(leader_token).error is Errors.NONE
        for t in follower_tokens:
            assert self.take(t).error is Errors.NONE
        return [leader] + followers, generation
