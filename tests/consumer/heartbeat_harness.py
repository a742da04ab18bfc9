"""A manual-clock driver for ConsumerGroupHeartbeat scenarios on the Shard.

It keeps the records the shard wrote (per step and in total) so a test can
assert the exact records, and rebuilds a shard from them to check that
loading is replaying.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from coordinator import CoordinatorConfig, Shard
from coordinator.consumer.subscriptions import topic_id_for
from coordinator.errors import Errors
from coordinator.messages import (
    AssignmentWatchResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
)
from coordinator.records import Record

from tests.consumer.group_history import state

GROUP = "g"
REBALANCE_MS = 60_000


def tp(topic: str, *partitions: int) -> ConsumerGroupTopicPartitions:
    return ConsumerGroupTopicPartitions(topic_id_for(topic), tuple(partitions))


def owned(assignment: tuple[ConsumerGroupTopicPartitions, ...] | None) -> dict[UUID, frozenset[int]]:
    return {entry.topic_id: frozenset(entry.partitions) for entry in assignment or ()}


def join(member_id: str, *topics: str, **fields: Any) -> ConsumerGroupHeartbeatRequest:
    fields.setdefault("subscribed_topic_names", tuple(topics))
    return ConsumerGroupHeartbeatRequest(
        GROUP, member_id, 0, rebalance_timeout_ms=REBALANCE_MS, topic_partitions=(), **fields
    )


def beat(
    member_id: str, epoch: int, owns: tuple[ConsumerGroupTopicPartitions, ...] | None = None, **fields: Any
) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(GROUP, member_id, epoch, topic_partitions=owns, **fields)


class Driver:
    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        self.shard = Shard(CoordinatorConfig(**config), member_id_seed=11)
        self.now = 1_000
        self.log: list[Record] = []
        self.last: list[Record] = []
        self.absorb_records(self.shard.on_loaded(self.now).records)
        if topics is not None:
            self.topics(topics)

    def absorb_records(self, records: list[Record]) -> None:
        self.last = list(records)
        self.log += records

    def topics(self, counts: dict[str, int]) -> list[Record]:
        self.absorb_records(self.shard.update_topics(counts, self.now).records)
        return self.last

    def handle(self, request: Any) -> Any:
        """Any request, answered at once; its records join the log."""
        result = self.shard.handle(request, self.now, "token")
        assert len(result.responses) == 1 and result.responses[0][0] == "token"
        self.absorb_records(result.records)
        return result.responses[0][1]

    def send(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        response = self.handle(request)
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        return response

    def ok(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        response = self.send(request)
        assert response.error is Errors.NONE, response
        return response

    def refused(
        self, request: ConsumerGroupHeartbeatRequest, error: Errors
    ) -> ConsumerGroupHeartbeatResponse:
        before = len(self.log)
        response = self.send(request)
        assert response.error is error, response
        assert len(self.log) == before, "a refused heartbeat writes nothing"
        return response

    def advance(self, ms: int) -> list[Record]:
        self.now += ms
        written: list[Record] = []
        for result in self.shard.poll_timers(self.now):
            written += result.records
            # Timers answer nothing but parked assignment watches.
            assert all(type(response) is AssignmentWatchResponse for _, response in result.responses)
        self.absorb_records(written)
        return written

    def replayed(self) -> Shard:
        """A shard rebuilt from every record written so far (crash and load)."""
        shard = Shard(CoordinatorConfig(), member_id_seed=11)
        shard.replay_many(self.log)
        return shard

    def assert_replay_equals_live(self) -> None:
        assert state(self.replayed().consumer_groups) == state(self.shard.consumer_groups)
