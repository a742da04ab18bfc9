"""End offsets reach every leader's live lag (actors/client/end_feed.py,
actors/partition/ends_watch.py), without Ray: the real registry class over a real
partition-0 shard (`ShardStore`), behind a handle that answers `.remote` as Ray's does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from actors.client.end_feed import FEED_SAMPLES_MAX
from actors.client.topic_registry import TopicRegistry
from actors.core.settings import ServiceSettings
from actors.partition.actor import OffsetPartition
from actors.partition.topics_watch import TopicsWatch
from coordinator import CoordinatorConfig
from coordinator.lag_query import LagRequest

from tests.actors.service_store_support import ShardStore
from tests.actors.support import WAIT_S, Answers, commit, run, until
from tests.actors.test_end_history import ManualClock


def test_a_reader_gets_the_samples_since_its_cursor_and_the_whole_history_otherwise() -> None:
    clock = ManualClock(1_000)
    store = ShardStore()
    registry = TopicRegistry(ServiceSettings(data_dir="/nonexistent"), clock, store=store)
    registry.create_topic("t", 2)
    registry.set_end_offsets({("t", 0): 5, ("t", 1): 7})
    cursor, samples, whole = registry.end_offsets_since(None)
    assert whole and samples == [("t", 0, 1_000, 5), ("t", 1, 1_000, 7)]
    assert registry.end_offsets_since(cursor) is None, "nothing new"
    registry.set_end_offsets({("t", 0): 9}, at_ms=2_000)
    registry.set_end_offsets({("t", 0): 9}, at_ms=2_001)  # a repeat the history does not keep
    newer, samples, whole = registry.end_offsets_since(cursor)
    assert not whole and samples == [("t", 0, 2_000, 9)]
    assert registry.end_offsets_since(("someone else", 3))[2], "a foreign cursor gets everything"
    assert registry.end_offsets_since("garbage")[2]
    restarted = TopicRegistry(ServiceSettings(data_dir="/nonexistent"), clock, store=store.restarted())
    _, samples, whole = restarted.end_offsets_since(newer)
    assert whole and ("t", 0, 2_000, 9) in samples, "a restarted registry: the whole history again"


def test_a_cursor_older_than_the_feed_keeps_gets_the_whole_history() -> None:
    registry = TopicRegistry(ServiceSettings(data_dir="/nonexistent"), ManualClock(0), store=ShardStore())
    registry.create_topic("t", 1)
    registry.set_end_offsets({("t", 0): 1}, at_ms=0)
    cursor, _, _ = registry.end_offsets_since(None)
    for i in range(FEED_SAMPLES_MAX // 50_000 + 1):
        registry.feed.record([("t", 0, 1 + i, 2 + i)] * 50_000)
    assert registry.end_offsets_since(cursor)[2]


class Handle:
    """A Ray actor handle's shape over a plain object: `handle.method.remote(...)` is awaitable."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.target, name)

        class Remote:
            @staticmethod
            async def remote(*args: Any) -> Any:
                return method(*args)

        return Remote


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> TopicRegistry:
    real = TopicRegistry(ServiceSettings(data_dir="/nonexistent"), ManualClock(10_000), store=ShardStore())
    monkeypatch.setattr(TopicsWatch, "lookup", lambda self: Handle(real))
    return real


async def lag_rows(partition: OffsetPartition) -> Any:
    answers = Answers()
    return await answers.wait(answers.send(partition, LagRequest(None)))


def test_a_leader_keeps_lag_from_commits_and_the_ends_it_is_nudged_about(
    tmp_path: Path, registry: TopicRegistry
) -> None:
    async def scenario() -> None:
        registry.create_topic("t", 1)
        settings = ServiceSettings(
            data_dir=str(tmp_path), num_partitions=1, topics_refresh_interval_s=3_600,
            coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
        )
        partition = OffsetPartition(0, 1, settings)
        await partition.activate()
        assert await partition.wait_active(WAIT_S) == "ACTIVE"
        answers = Answers()
        await answers.wait(answers.send(partition, commit("g", 40)))
        response = await lag_rows(partition)
        assert response.groups == (("g", None, None, 0),), "no end reported yet: unknown"
        registry.set_end_offsets({("t", 0): 100})
        await partition.topics_changed()  # the registry's nudge (Ray-less here)
        await until(lambda: partition.runtime.shard.lag.end(("t", 0)) == 100, "the pushed end")
        assert (await lag_rows(partition)).groups[0][1] == 60
        await answers.wait(answers.send(partition, commit("g", 90)))
        assert (await lag_rows(partition)).groups[0][1] == 10
        await partition.unload(partition.epoch)

        again = OffsetPartition(0, 2, settings)  # a new leader: its first read is the whole history
        await again.activate(partition.runtime.durable_end)
        assert await again.wait_active(WAIT_S) == "ACTIVE"
        await until(lambda: again.runtime.shard.lag.end(("t", 0)) == 100, "the history after a load")
        assert (await lag_rows(again)).groups[0][1] == 10
        await again.unload(again.epoch)
        await asyncio.sleep(0)

    run(scenario())
