"""Consumer group (KIP-848) histories for the Spark bridge tests, written by the real core and log.

`ConsumerHistory` drives a `coordinator.Shard` (through the mixed-protocol
test driver of `tests/consumer`) with ConsumerGroupHeartbeat, JoinGroup and
SyncGroup requests on a manual clock, and keeps every step's records as one
batch at that step's time, as the partition actor appends them; `write`
puts them in an offsets log with the log layer (`histories.write_history`).

`upgrade_round_trip` is the history the job tests assert: a consumer group
`cg` whose members join, change their subscription and leave, and a group
`g` that is classic, upgraded to a consumer group when a consumer-protocol
member joins, and downgraded back when that member leaves.
"""

from __future__ import annotations

from typing import Any

from coordinator.errors import Errors
from coordinator.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
    SyncGroupRequest,
)
from coordinator.records import Record

from tests.consumer.heartbeat_harness import GROUP, REBALANCE_MS
from tests.consumer.mixed_harness import MixedDriver, assignment, classic_join
from tests.spark.histories import T0, Batch, write_history

CONSUMER_GROUP = "cg"
CLASSIC_THEN_CONSUMER_GROUP = GROUP
STEP_MS = 1_000


class ConsumerHistory(MixedDriver):
    """The mixed driver, keeping each step's records as a batch (offsets partition `partition`)."""

    def __init__(self, topics: dict[str, int], partition: int = 0, **config: Any) -> None:
        self.partition = partition
        self.batches: list[Batch] = []
        self.epochs: dict[tuple[str, str], int] = {}
        self.owns: dict[tuple[str, str], tuple[ConsumerGroupTopicPartitions, ...]] = {}
        super().__init__(None, **config)
        self.now = T0
        self.topics(topics)

    def absorb_records(self, records: list[Record]) -> None:
        super().absorb_records(records)
        if records:
            self.batches.append((self.partition, self.now, list(records)))

    def heartbeat(self, group_id: str, member_id: str, **fields: Any) -> ConsumerGroupHeartbeatResponse:
        """A heartbeat at the member's epoch (0: a join), owning what it was last given, as a
        client that adopts every assignment at once (revoking first) does."""
        epoch = self.epochs.get((group_id, member_id), 0)
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", REBALANCE_MS)
        fields.setdefault("topic_partitions", self.owns.get((group_id, member_id), ()))
        response = self.ok(ConsumerGroupHeartbeatRequest(group_id, member_id, epoch, **fields))
        self.epochs[(group_id, member_id)] = response.member_epoch
        if response.assignment is not None:
            self.owns[(group_id, member_id)] = response.assignment
        return response

    def leave(self, group_id: str, member_id: str) -> ConsumerGroupHeartbeatResponse:
        self.epochs.pop((group_id, member_id), None)
        self.owns.pop((group_id, member_id), None)
        return self.ok(ConsumerGroupHeartbeatRequest(group_id, member_id, -1))

    def write(self, data_dir: str) -> None:
        write_history(data_dir, self.batches)


def upgrade_round_trip() -> ConsumerHistory:
    """The history of the module docstring, one offsets partition, steps `STEP_MS` apart from T0.

    `cg`: A joins (epoch 1); B joins (2); A adds a topic (3: A's metadata rewritten, still two
    members); B leaves (4: no target computed, nobody heartbeats before) and D joins (5).
    `g`: classic, two members (generation 1); C joins with the consumer protocol (the upgrade:
    epoch 1 carried over from the generation, then 2 with C); C leaves (the downgrade: classic
    generation 2 from epoch 2); both classic members rejoin (generation 3).
    """
    history = ConsumerHistory({"foo": 4, "bar": 2})
    history.heartbeat(CONSUMER_GROUP, "A", subscribed_topic_names=("foo",))
    history.advance(STEP_MS)
    history.heartbeat(CONSUMER_GROUP, "B", subscribed_topic_names=("foo",))
    history.advance(STEP_MS)
    for member in ("A", "B", "A", "B"):
        history.heartbeat(CONSUMER_GROUP, member)
    history.advance(STEP_MS)
    history.heartbeat(CONSUMER_GROUP, "A", subscribed_topic_names=("foo", "bar"))
    for member in ("B", "A", "B"):
        history.heartbeat(CONSUMER_GROUP, member)
    history.advance(STEP_MS)
    history.leave(CONSUMER_GROUP, "B")
    history.advance(STEP_MS)
    history.heartbeat(CONSUMER_GROUP, "D", subscribed_topic_names=("bar",))
    history.heartbeat(CONSUMER_GROUP, "A")
    history.advance(STEP_MS)
    history.classic_group(
        ("m1", ("foo",), (("foo", 0), ("foo", 1))), ("m2", ("foo",), (("foo", 2), ("foo", 3)))
    )
    history.advance(STEP_MS)
    history.heartbeat(CLASSIC_THEN_CONSUMER_GROUP, "C", subscribed_topic_names=("foo",))
    history.advance(STEP_MS)
    history.leave(CLASSIC_THEN_CONSUMER_GROUP, "C")
    history.advance(STEP_MS)
    rejoin_classic(history)
    return history


def rejoin_classic(history: ConsumerHistory) -> None:
    """Every member of the classic group `g` rejoins and syncs (the leader keeps the assignment)."""
    ids = list(history.shard.groups[CLASSIC_THEN_CONSUMER_GROUP].members)
    tokens = [history.submit(classic_join(member_id, "foo")) for member_id in ids]
    joined = [history.take(token) for token in tokens]
    generation, leader = joined[0].generation_id, joined[0].leader
    halves = (assignment(("foo", 0), ("foo", 1)), assignment(("foo", 2), ("foo", 3)))
    syncs = [
        history.submit(SyncGroupRequest(
            CLASSIC_THEN_CONSUMER_GROUP, generation, member_id,
            assignments=tuple(zip(ids, halves)) if member_id == leader else (),
        ))
        for member_id in ids
    ]
    assert all(history.take(token).error is Errors.NONE for token in syncs)
