"""A manual-clock driver for groups mixing classic and consumer-protocol members on one Shard.

It extends the heartbeat driver: classic requests may be parked and answered
later (responses are collected by token), and replay-equals-live also checks
the classic groups and every group id's offsets.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from coordinator import CoordinatorConfig, Shard
from coordinator.classic.state import GroupState
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from coordinator.errors import Errors
from coordinator.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.topic_partition import TopicPartition

from tests.consumer.group_history import state
from tests.consumer.heartbeat_harness import GROUP, Driver

SESSION_MS = 10_000
CLASSIC_REBALANCE_MS = 30_000


def subscription(*topics: str, owned: tuple[tuple[str, int], ...] = (), version: int = 3) -> bytes:
    owned_tps = tuple(TopicPartition(t, p) for t, p in owned)
    return encode_subscription(Subscription(tuple(topics), None, owned_tps), version)


def assignment(*partitions: tuple[str, int], version: int = 3) -> bytes:
    return encode_assignment(Assignment(tuple(TopicPartition(t, p) for t, p in partitions)), version)


def decoded(data: bytes) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in decode_assignment(data).partitions}


def classic_join(
    member_id: str = "",
    *topics: str,
    owned: tuple[tuple[str, int], ...] = (),
    protocols: tuple[str, ...] = ("range",),
    **fields: Any,
) -> JoinGroupRequest:
    metadata = subscription(*topics, owned=owned)
    fields.setdefault("require_known_member_id", False)
    fields.setdefault("client_id", "client-id")
    fields.setdefault("client_host", "client-host")
    return JoinGroupRequest(
        GROUP,
        fields.pop("session_timeout_ms", SESSION_MS),
        fields.pop("rebalance_timeout_ms", CLASSIC_REBALANCE_MS),
        fields.pop("protocol_type", "consumer"),
        tuple((name, metadata) for name in protocols),
        member_id=member_id,
        **fields,
    )


class MixedDriver(Driver):
    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        self.config = CoordinatorConfig(**config)
        super().__init__(topics, **config)
        self.released: dict[Any, Any] = {}
        self._tokens = 0

    def handle(self, request: Any) -> Any:
        """Any request answered at once; other responses it releases are kept in `released`."""
        token = self.submit(request)
        assert token in self.released, f"{request} was parked"
        return self.released.pop(token)

    def submit(self, request: Any) -> Any:
        """Send a request; returns its token. Every response released is kept in `released`."""
        self._tokens += 1
        token = f"t{self._tokens}"
        result = self.shard.handle(request, self.now, token)
        self.absorb_records(result.records)
        self.released.update(result.responses)
        return token

    def call(self, request: Any) -> Any:
        """A request answered at once."""
        token = self.submit(request)
        assert token in self.released, f"{request} was parked"
        return self.released.pop(token)

    def take(self, token: Any) -> Any:
        return self.released.pop(token)

    def advance(self, ms: int) -> list:
        self.now += ms
        written: list = []
        for result in self.shard.poll_timers(self.now):
            written += result.records
            self.released.update(result.responses)
        self.absorb_records(written)
        return written

    def classic_group(self, *members: tuple[str, tuple[str, ...], tuple[tuple[str, int], ...]]) -> int:
        """A Stable classic group: each (member id hint, topics, assigned partitions); returns its generation.

        Member ids are those the coordinator gives; they are returned in `self.ids` by hint.
        """
        self.ids: dict[str, str] = {}
        tokens = {}
        for hint, topics, _ in members:
            tokens[hint] = self.submit(classic_join("", *topics, client_id=hint))
        for _ in range(50):
            if all(token in self.released for token in tokens.values()):
                break
            self.advance(1_000)
        responses = {hint: self.take(token) for hint, token in tokens.items()}
        for hint, response in responses.items():
            assert isinstance(response, JoinGroupResponse) and response.error is Errors.NONE, response
            self.ids[hint] = response.member_id
        generation = next(iter(responses.values())).generation_id
        leader = next(iter(responses.values())).leader
        assignments = tuple(
            (self.ids[hint], assignment(*owned)) for hint, _, owned in members
        )
        sync_tokens = [
            self.submit(
                SyncGroupRequest(
                    GROUP, generation, member_id, assignments=assignments if member_id == leader else ()
                )
            )
            for member_id in self.ids.values()
        ]
        for token in sync_tokens:
            assert self.take(token).error is Errors.NONE
        return generation

    def sync(self, member_id: str, generation: int, **fields: Any) -> SyncGroupResponse:
        response = self.call(SyncGroupRequest(GROUP, generation, member_id, **fields))
        assert isinstance(response, SyncGroupResponse)
        return response

    def heartbeat_classic(self, member_id: str, generation: int, **fields: Any) -> Errors:
        return self.call(HeartbeatRequest(GROUP, generation, member_id, **fields)).error

    def leave_classic(self, *members: MemberIdentity) -> Any:
        return self.call(LeaveGroupRequest(GROUP, tuple(members)))

    def replayed(self) -> Shard:
        shard = Shard(self.config, member_id_seed=11)
        shard.replay_many(self.log)
        return shard

    def assert_replay_equals_live(self) -> None:
        replayed = self.replayed()
        assert state(replayed.consumer_groups) == state(self.shard.consumer_groups)
        assert_classic_replay_equals_live(self.shard, replayed)


def assert_classic_replay_equals_live(live: Shard, replayed: Shard) -> None:
    """The classic groups a reload rebuilds: every group id's offsets, and the stored membership
    of the groups not in a rebalance (a rebalance in progress is volatile: a reload restarts it)."""
    assert set(replayed.groups) == set(live.groups)
    for group_id, group in live.groups.items():
        other = replayed.groups[group_id]
        assert other.offsets == group.offsets, group_id
        if group.state in (GroupState.STABLE, GroupState.EMPTY) and group.generation_id > 0:
            ours = group.to_record_value()._replace(current_state_timestamp_ms=0)
            theirs = other.to_record_value()._replace(current_state_timestamp_ms=0)
            assert ours == theirs, group_id
        else:
            assert other.generation_id == group.generation_id or group.generation_id == 0, group_id


def owners(driver: Driver) -> dict[tuple[UUID, int], list[str]]:
    """Every partition some member of the consumer group owns (assigned or pending revocation)."""
    owned: dict[tuple[UUID, int], list[str]] = {}
    group = driver.shard.consumer_groups.get(GROUP)
    for member in () if group is None else group.members.values():
        for assignment_ in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment_.items():
                for partition in partitions:
                    owned.setdefault((topic_id, partition), []).append(member.member_id)
    return owned


def tid(topic: str) -> UUID:
    return topic_id_for(topic)
