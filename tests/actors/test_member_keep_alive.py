"""The drivers' keep-alive heartbeats while a listener runs go on across a coordinator
that does not answer for a while (a leader failover), without Ray.

Found by tests/ray/consumer_failover_scenario.py: a member whose revoke listener
ran through a failover sent one keep-alive, which the moving coordinator did not
answer, and then none, so the new leader fenced it after the session timeout
although Kafka's heartbeat thread would have kept it in the group.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from actors import AsyncGroupMember, GroupMember
from actors.client.retry import CoordinatorUnavailableError
from coordinator import Errors
from coordinator.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
)
from coordinator.topic_partition import TopicPartition

TOPIC_ID = uuid.uuid4()
UNANSWERED = 3  # keep-alives the "failing over" coordinator does not answer
WAIT_S = 30.0


class FailingOverClient:
    """Answers a consumer member's join with one partition; the keep-alives sent
    while its listener runs are not answered `UNANSWERED` times, then answered."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.unanswered = 0
        self.answered_after = 0
        self.enough = threading.Event()

    def topic_ids(self, names: Any = None) -> dict[str, uuid.UUID]:
        return {"t": TOPIC_ID}

    async def topic_ids_async(self, names: Any = None) -> dict[str, uuid.UUID]:
        return self.topic_ids(names)

    def send(self, request: Any, partition: int | None = None, timeout_s: float | None = None) -> Any:
        assert isinstance(request, ConsumerGroupHeartbeatRequest), request
        if request.member_epoch == 0:  # the join
            return ConsumerGroupHeartbeatResponse(
                Errors.NONE, member_id=request.member_id, member_epoch=1, heartbeat_interval_ms=20,
                assignment=(ConsumerGroupTopicPartitions(TOPIC_ID, (0,)),),
            )
        if request.topic_partitions is None and request.subscribed_topic_names is None:  # a keep-alive
            with self.lock:
                if self.unanswered < UNANSWERED:
                    self.unanswered += 1
                    raise CoordinatorUnavailableError("no coordinator answered in time (failover)")
                self.answered_after += 1
                if self.answered_after >= 2:
                    self.enough.set()
        return ConsumerGroupHeartbeatResponse(Errors.NONE, member_id=request.member_id, member_epoch=1,
                                              heartbeat_interval_ms=20)

    async def send_async(self, request: Any, partition: int | None = None, **kw: Any) -> Any:
        return self.send(request, partition, kw.get("timeout_s"))


def test_a_listener_running_through_a_failover_keeps_heartbeating() -> None:
    client = FailingOverClient()
    seen: list[set[TopicPartition]] = []

    def on_assigned(parts: set[TopicPartition]) -> None:
        client.enough.wait(WAIT_S)  # the listener runs until keep-alives are answered again
        seen.append(parts)

    member = GroupMember("g", ["t"], client=client, group_protocol="consumer",  # type: ignore[arg-type]
                         topic_partitions={"t": 1}, on_assigned=on_assigned, retry_backoff_ms=20)
    member.start()
    try:
        assert member.wait_for_assignment(WAIT_S) == {TopicPartition("t", 0)}
    finally:
        member.close(timeout_s=5)
    assert client.unanswered == UNANSWERED and client.enough.is_set()
    assert seen == [{TopicPartition("t", 0)}]


def test_an_async_listener_running_through_a_failover_keeps_heartbeating() -> None:
    client = FailingOverClient()

    async def scenario() -> None:
        async def on_assigned(parts: set[TopicPartition]) -> None:
            await asyncio.to_thread(client.enough.wait, WAIT_S)

        member = AsyncGroupMember("g", ["t"], client=client, group_protocol="consumer",  # type: ignore[arg-type]
                                  topic_partitions={"t": 1}, on_assigned=on_assigned, retry_backoff_ms=20)
        await member.start()
        try:
            assert await member.wait_for_assignment(WAIT_S) == {TopicPartition("t", 0)}
        finally:
            await member.close()

    asyncio.run(scenario())
    assert client.unanswered == UNANSWERED and client.enough.is_set()
