"""Garbage sent to a real partition actor, as any process of the cluster can: malformed
ConsumerGroupHeartbeatRequests through the Client and through the actor handle, and
objects that are not messages at all. The caller gets a clear InvalidRequestError (or
Kafka's error response for a well-formed request that makes no sense), at once and
never retried; a consumer-protocol GroupMember of the same offsets partition keeps its
assignment and its epoch, and commits.
"""

from __future__ import annotations

import threading
from dataclasses import fields
from typing import Any
from uuid import UUID

import pytest
import ray

from actors import Client
from actors.client.retry import UNREACHABLE, Retry
from actors.core.wire import loads_response
from coordinator import Errors, InvalidRequestError
from coordinator.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
)

from tests.ray.member_support import TIMEOUT_S, Cleanup, Recorder, partitions, unique, wait_until

pytestmark = pytest.mark.ray
CONSUMER = {"group_protocol": "consumer", "max_poll_interval_ms": 60_000}


def forged(**changes: Any) -> ConsumerGroupHeartbeatRequest:
    """A heartbeat set field by field, without its checks, as a hostile process can pickle one."""
    base = ConsumerGroupHeartbeatRequest("g", "x", 0, rebalance_timeout_ms=1_000, topic_partitions=())
    request = object.__new__(ConsumerGroupHeartbeatRequest)
    for f in fields(base):
        object.__setattr__(request, f.name, changes.get(f.name, getattr(base, f.name)))
    return request


class NotAMessage:
    group_id = "g"


class ArrivesUnset:
    """Pickles as a ConsumerGroupHeartbeatRequest none of whose fields is set: what a
    hostile pickle can make the actor rebuild."""

    group_id = "g"

    def __reduce__(self) -> tuple[Any, ...]:
        return object.__new__, (ConsumerGroupHeartbeatRequest,)


def garbage(group: str) -> list[tuple[object, str]]:
    """(request, what the error names) for the group `group`."""
    return [
        (forged(group_id=group, member_epoch="1"), "member_epoch must be int, got str"),
        (forged(group_id=group, member_epoch=2**64), "member_epoch must be within int64"),
        (forged(group_id=group, topic_partitions=(("not-a-uuid", (0,)),)), "topic_partitions must be"),
        (
            forged(group_id=group, topic_partitions=(ConsumerGroupTopicPartitions(UUID(int=1), [0]),)),
            r"topic_partitions\[0\]\.partitions must be tuple\[int, \.\.\.\], got list",
        ),
        (forged(group_id=group, subscribed_topic_names=["t"]), "subscribed_topic_names must be"),
        (forged(group_id=group, subscribed_topic_regex=b".*"), "subscribed_topic_regex must be str | None"),
        (forged(group_id=group, rebalance_timeout_ms=float("nan")), "rebalance_timeout_ms must be int"),
        (forged(group_id=group, member_id="m\ud800"), "member_id must be valid UTF-8"),
        (ArrivesUnset(), "ConsumerGroupHeartbeatRequest.group_id is not set"),
        (NotAMessage(), "not a group protocol request: NotAMessage"),
        ({"group_id": group}, "not a group protocol request: dict"),
    ]


def test_garbage_gets_a_clear_error_and_the_group_next_door_is_served(
    registry: Client, cleanup: Cleanup, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, group = unique("t"), unique("hostile")
    registry.create_topic(topic, 4)
    member = cleanup.member(group, [topic], Recorder(), **CONSUMER).start()
    wait_until(lambda: member.is_stable and frozenset(member.assignment()) == partitions(topic, 4))
    epoch, owned = member.generation_id, frozenset(member.assignment())
    partition = registry.partition_for(group)

    def routed_leader() -> Any:
        """The partition's leader in the controller's routing now (the client's copy may
        predate the leader's start, and name none)."""
        registry.refresh()
        return registry.leader(partition)

    leader = wait_until(routed_leader)

    retried: list[object] = []  # what each retry of this thread's calls came after
    backoff, me = Retry.delay_or_raise, threading.get_ident()

    def counted(self: Retry, attempt: int, deadline: float, last: object) -> float:
        if threading.get_ident() == me:  # not the member's heartbeats
            retried.append(last)
        return backoff(self, attempt, deadline, last)

    monkeypatch.setattr(Retry, "delay_or_raise", counted)
    for request, named in garbage(group):
        with pytest.raises(InvalidRequestError, match=named):
            registry.send(request, partition=partition)  # type: ignore[arg-type]
        # The client retries a leader it could not reach; never a refusal.
        refusals = [last for last in retried if not isinstance(last, UNREACHABLE)]
        assert not refusals, f"retried after {refusals}: a refusal is final"
        with pytest.raises(InvalidRequestError, match=named):
            ray.get(leader.handle.remote(request), timeout=TIMEOUT_S)
        with pytest.raises(InvalidRequestError, match=named):
            ray.get(leader.handle_wire.remote(request), timeout=TIMEOUT_S)
    for thing in (None, 42, b"\x00" * 10, [None], lambda: None):
        with pytest.raises(InvalidRequestError, match="not a group protocol request"):
            ray.get(leader.handle.remote(thing), timeout=TIMEOUT_S)
    with pytest.raises(InvalidRequestError, match="handle_batch takes a list of requests"):
        ray.get(leader.handle_batch.remote(1, 0, "not a list"), timeout=TIMEOUT_S)
    with pytest.raises(InvalidRequestError, match="caller must be an int"):
        ray.get(leader.handle_batch.remote("me", 0, []), timeout=TIMEOUT_S)
    # A stranger's collect: this leader holds nothing for it (no mailbox, no answers).
    floor, answers = loads_response(ray.get(leader.collect.remote(12345, 1), timeout=TIMEOUT_S))
    assert floor >= 1 and answers == []

    # Well-formed nonsense gets Kafka's answer, and writes nothing.
    stranger = ConsumerGroupHeartbeatRequest(group, "stranger", 7, topic_partitions=())
    answer = registry.consumer_group_heartbeat(stranger)
    assert isinstance(answer, ConsumerGroupHeartbeatResponse)
    assert answer.error is Errors.UNKNOWN_MEMBER_ID and answer.error_message
    future = ConsumerGroupHeartbeatRequest(group, member.member_id, epoch + 5, topic_partitions=None)
    assert registry.consumer_group_heartbeat(future).error is Errors.FENCED_MEMBER_EPOCH

    # The real member kept its partitions and its epoch, and commits with it.
    member.poll()
    assert member.is_stable and member.generation_id == epoch
    assert frozenset(member.assignment()) == owned
    member.commit({tp: 7 + tp.partition for tp in owned})
    committed = member.committed(owned)
    assert {tp: c.offset for tp, c in committed.items() if c} == {tp: 7 + tp.partition for tp in owned}
