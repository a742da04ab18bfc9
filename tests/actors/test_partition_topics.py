"""The partition actor gives its shard the registry's topics (actors/partition/topics_watch.py),
without Ray: a fake registry answers `topics_if_changed` as the real one does."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from actors.core.settings import ServiceSettings
from actors.partition.actor import OffsetPartition
from actors.partition.topics_watch import TopicsWatch
from coordinator import CoordinatorConfig, Errors
from coordinator.messages import ConsumerGroupHeartbeatRequest

from tests.actors.support import WAIT_S, Answers, run, until

TOPIC_ID = uuid.uuid4()


class FakeRegistry:
    """`topics_if_changed` as TopicRegistry answers it; `down` makes every call fail."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.changes = 0
        self.down = False
        self.calls = 0

    def grow(self, name: str, count: int) -> None:
        self.counts[name] = count
        self.changes += 1

    @property
    def topics_if_changed(self) -> Any:
        return self

    def remote(self, token: str | None) -> Any:
        self.calls += 1
        return self._answer(token)

    async def _answer(self, token: str | None) -> Any:
        if self.down:
            raise ConnectionError("registry down")
        current = f"fake:{self.changes}"
        if token == current:
            return None
        return current, dict(self.counts), {name: TOPIC_ID for name in self.counts}


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> FakeRegistry:
    registry = FakeRegistry()
    monkeypatch.setattr(TopicsWatch, "lookup", lambda self: registry)
    return registry


def settings_for(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings(
        data_dir=str(tmp_path), num_partitions=1, topics_refresh_interval_s=0.01,
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
    )


def join(member: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        "g", member, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), topic_partitions=()
    )


def assigned(response: Any) -> int:
    return sum(len(tp.partitions) for tp in response.assignment or ())


async def heartbeat(partition: OffsetPartition, request: ConsumerGroupHeartbeatRequest) -> Any:
    answers = Answers()
    return await answers.wait(answers.send(partition, request))


def test_the_leader_gives_its_shard_the_topics_and_their_growth(
    tmp_path: Path, fake_registry: FakeRegistry
) -> None:
    async def scenario() -> None:
        fake_registry.grow("t", 2)
        partition = OffsetPartition(0, 1, settings_for(tmp_path))
        await partition.activate()
        assert await partition.wait_active(WAIT_S) == "ACTIVE"
        await until(lambda: "t" in partition.runtime.shard.topics, "the registry's topics")
        response = await heartbeat(partition, join("m1"))
        assert response.error is Errors.NONE and assigned(response) == 2
        assert response.assignment[0].topic_id == TOPIC_ID
        group = partition.runtime.shard.consumer_groups["g"]
        epoch = group.group_epoch
        fake_registry.grow("t", 5)  # the poll delivers it: the group epoch is bumped, durably
        await until(lambda: group.group_epoch > epoch, "the group epoch bump")
        await until(lambda: partition.runtime.durable_end == partition.runtime.written_end, "durable")
        again = await heartbeat(partition, ConsumerGroupHeartbeatRequest("g", "m1", response.member_epoch))
        assert again.member_epoch > response.member_epoch and assigned(again) == 5
        await partition.unload(partition.epoch)

    run(scenario())


def test_a_reload_keeps_the_topics_and_a_dead_registry_breaks_nothing(
    tmp_path: Path, fake_registry: FakeRegistry
) -> None:
    async def scenario() -> None:
        settings = settings_for(tmp_path)
        fake_registry.grow("t", 3)
        first = OffsetPartition(0, 1, settings)
        await first.activate()
        assert await first.wait_active(WAIT_S) == "ACTIVE"
        await until(lambda: "t" in first.runtime.shard.topics, "the registry's topics")
        joined = await heartbeat(first, join("m1"))
        epoch = first.runtime.shard.consumer_groups["g"].group_epoch
        await first.unload(first.epoch)

        fake_registry.down = True  # the next leader loads without the registry
        second = OffsetPartition(0, 2, settings)
        await second.activate(first.runtime.durable_end)
        assert await second.wait_active(WAIT_S) == "ACTIVE"
        calls = fake_registry.calls
        await until(lambda: fake_registry.calls > calls + 2, "polls of the dead registry")
        assert second.runtime.state.name == "ACTIVE"
        group = second.runtime.shard.consumer_groups["g"]
        assert group.group_epoch == epoch  # the log's own topics: nothing moved
        again = await heartbeat(second, ConsumerGroupHeartbeatRequest("g", "m1", joined.member_epoch))
        assert again.error is Errors.NONE and again.member_epoch == joined.member_epoch

        fake_registry.down = False
        fake_registry.grow("t", 4)
        await until(lambda: group.group_epoch > epoch, "the growth once the registry is back")
        await second.unload(second.epoch)
        await asyncio.sleep(0)

    run(scenario())


def test_a_promoted_follower_serves_the_group_with_its_topics(
    tmp_path: Path, fake_registry: FakeRegistry
) -> None:
    """The hot shard of a follower gets the topics its log names when promoted, so the
    group goes on at its epoch even before the registry answers (here: never)."""
    from tests.actors.replication_support import Cluster

    async def scenario() -> None:
        fake_registry.grow("t", 3)
        cluster = Cluster(tmp_path, topics_refresh_interval_s=0.01)
        a = await cluster.start()
        await until(lambda: "t" in a.runtime.shard.topics, "the registry's topics")
        joined = await heartbeat(a, join("m1"))
        assert assigned(joined) == 3
        epoch = a.runtime.shard.consumer_groups["g"].group_epoch
        b = cluster.replicas["b"]
        end = a.log.log_end_offset
        await until(lambda: b.follower is not None and b.follower.high_watermark == end, "b to catch up")
        fake_registry.down = True
        cluster.handles["a"].stop()
        await cluster.elect("b", ("b", "c"), ("c",))
        assert b.runtime.shard.topics["t"].partition_count == 3
        again = await heartbeat(b, ConsumerGroupHeartbeatRequest("g", "m1", joined.member_epoch))
        assert again.error is Errors.NONE and again.member_epoch == joined.member_epoch
        assert b.runtime.shard.consumer_groups["g"].group_epoch == epoch
        await cluster.close()

    run(scenario())


def test_a_promoted_follower_fences_a_member_stuck_mid_revocation(
    tmp_path: Path, fake_registry: FakeRegistry
) -> None:
    """A member that never acknowledges its revocation is fenced by the promoted follower
    after its rebalance timeout (the timer is armed again at the promotion, as Kafka's
    onLoaded does), and its partitions go to the member waiting for them; the session
    timeout, far longer, plays no part."""
    from tests.actors.replication_support import Cluster

    async def scenario() -> None:
        fake_registry.grow("t", 4)
        config = CoordinatorConfig(
            group_initial_rebalance_delay_ms=0, group_consumer_session_timeout_ms=60_000
        )
        cluster = Cluster(tmp_path, topics_refresh_interval_s=0.01, coordinator=config)
        a = await cluster.start()
        await until(lambda: "t" in a.runtime.shard.topics, "the registry's topics")
        stuck = await heartbeat(a, replace(join("stuck"), rebalance_timeout_ms=1_000))
        assert assigned(stuck) == 4
        owned = stuck.assignment
        acked = await heartbeat(a, ConsumerGroupHeartbeatRequest("g", "stuck", 1, topic_partitions=owned))
        assert acked.error is Errors.NONE
        waiting = await heartbeat(a, join("waiting"))
        assert waiting.error is Errors.NONE and assigned(waiting) == 0
        # "stuck" hears it must revoke 2 partitions, and crashes in its revoke listener.
        told = await heartbeat(a, ConsumerGroupHeartbeatRequest("g", "stuck", 1))
        assert told.error is Errors.NONE and assigned(told) == 2 and told.member_epoch == 1
        group = a.runtime.shard.consumer_groups["g"]
        assert group.members["stuck"].state.name == "UNREVOKED_PARTITIONS"
        b = cluster.replicas["b"]
        end = a.log.log_end_offset
        await until(lambda: b.follower is not None and b.follower.high_watermark == end, "b to catch up")
        cluster.handles["a"].stop()
        await cluster.elect("b", ("b", "c"), ("c",))
        promoted = b.runtime.shard.consumer_groups["g"]
        assert promoted.members["stuck"].state.name == "UNREVOKED_PARTITIONS"
        epoch, parts = waiting.member_epoch, 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while parts < 4:  # the waiting member heartbeats until it has everything
            assert loop.time() < deadline, f"not reassigned: {promoted.members}"
            await asyncio.sleep(0.05)
            response = await heartbeat(b, ConsumerGroupHeartbeatRequest("g", "waiting", epoch))
            assert response.error is Errors.NONE, response
            epoch = response.member_epoch
            parts = assigned(response) if response.assignment is not None else parts
        assert "stuck" not in promoted.members
        await cluster.close()

    run(scenario())
