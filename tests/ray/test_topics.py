"""The topic registry (Kafka's topic admin and metadata, end offsets) and what
members do with it: a partition increase rebalances the subscribed group, a
pattern subscription picks up a new matching topic."""

from __future__ import annotations

import re
import time

import pytest
import ray

from actors import Client, TopicError
from actors.client.topics import registry_for
from coordinator.errors import Errors
from coordinator.topic_partition import TopicPartition

from tests.ray.member_support import (
    Cleanup,
    partitions,
    settled_generation,
    unique,
    view,
    wait_until,
)

pytestmark = pytest.mark.ray


def test_registry_answers_as_kafka_admin_and_keeps_end_offsets(registry: Client) -> None:
    a, missing = unique("a"), unique("missing")
    registry.create_topic(a, 3)
    for call, error in [
        (lambda: registry.create_topic(a, 3), Errors.TOPIC_ALREADY_EXISTS),
        (lambda: registry.create_topic(unique("b"), 0), Errors.INVALID_PARTITIONS),
        (lambda: registry.create_partitions(a, 3), Errors.INVALID_PARTITIONS),
        (lambda: registry.create_partitions(missing, 5), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (lambda: registry.set_end_offsets({(a, 3): 1, (a, 0): 9}), Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]:
        with pytest.raises(TopicError) as refused:
            call()
        assert refused.value.error is error
    with pytest.raises(ValueError):
        registry.create_topic("no spaces", 1)

    registry.create_partitions(a, 5)
    assert registry.describe_topics([a, missing]) == {a: 5}
    assert registry.describe_topics()[a] == 5
    registry.set_end_offsets({(a, 0): 10, (a, 4): 7})
    assert registry.end_offsets([a]) == {TopicPartition(a, p): o for p, o in enumerate([10, 0, 0, 0, 7])}


def test_registry_restart_reloads_its_state_and_clients_ride_over_it(registry: Client) -> None:
    name = unique("kept")
    registry.create_topic(name, 2)
    registry.set_end_offsets({(name, 1): 42})
    ray.kill(registry_for(registry.controller), no_restart=False)  # Ray restarts it; it reads partition 0
    assert registry.describe_topics([name]) == {name: 2}
    assert registry.end_offsets([name]) == {TopicPartition(name, 0): 0, TopicPartition(name, 1): 42}


def test_end_offset_history_is_served_and_survives_a_registry_restart(registry: Client) -> None:
    name = unique("history")
    registry.create_topic(name, 2)
    past = time.time_ns() // 1_000_000 - 3_600_000  # reported by a producer, an hour ago
    registry.set_end_offsets({(name, 0): 10, (name, 1): 3}, at_ms=past)
    registry.set_end_offsets({(name, 0): 25}, at_ms=past + 1_000)
    registry.set_end_offsets({(name, 1): 8})  # at the registry's wall clock
    rows = registry.end_offset_history([name])
    assert rows[:3] == [(name, 0, past, 10), (name, 0, past + 1_000, 25), (name, 1, past, 3)]
    assert rows[3][:2] == (name, 1) and rows[3][2] > past + 1_000 and rows[3][3] == 8
    with pytest.raises(TopicError) as refused:
        registry.set_end_offsets({(name, 0): 20})
    assert refused.value.error is Errors.INVALID_REQUEST and "never decrease" in str(refused.value)

    ray.kill(registry_for(registry.controller), no_restart=False)  # Ray restarts it; it reads partition 0
    assert registry.end_offset_history([name]) == rows
    assert registry.end_offset_history([name], since_ms=past + 500) == rows
    assert registry.end_offset_history([name], since_ms=rows[3][2]) == [rows[1], rows[3]]
    registry.set_start_offsets({(name, 0): 4})
    assert registry.start_offsets([name]) == {TopicPartition(name, 0): 4, TopicPartition(name, 1): 0}


def test_registry_state_lives_in_partition_0s_log_and_rides_over_its_failover(registry: Client) -> None:
    """The registry keeps nothing on its node's disk: its state is partition 0's, so it
    survives the registry's restart together with a failover of partition 0's leader."""
    name = unique("replicated")
    registry.create_topic(name, 3)
    registry.set_end_offsets({(name, 2): 5})
    ids = registry.topic_ids([name])
    registry.reassign(0)  # a new leader of partition 0, which loads its log
    ray.kill(registry_for(registry.controller), no_restart=False)
    assert registry.describe_topics([name]) == {name: 3}
    assert registry.topic_ids([name]) == ids
    assert registry.end_offsets([name])[TopicPartition(name, 2)] == 5


def test_partition_increase_rebalances_the_group(registry: Client, cleanup: Cleanup) -> None:
    topic, group = unique("grow"), unique("grow")
    registry.create_topic(topic, 2)
    members = [cleanup.member(group, [topic], assignors=["range"]).start() for _ in range(2)]
    generation = wait_until(lambda: settled_generation([view(m) for m in members], partitions(topic, 2)))

    registry.create_partitions(topic, 6)  # the leader's metadata refresh sees it and rejoins
    wait_until(lambda: settled_generation([view(m) for m in members], partitions(topic, 6), generation))
    assert {len(m.assignment()) for m in members} == {3}


def test_pattern_subscription_picks_up_a_new_topic(registry: Client, cleanup: Cleanup) -> None:
    prefix = unique("orders")
    first, other = f"{prefix}-eu", unique("payments")
    registry.create_topic(first, 2)
    registry.create_topic(other, 2)
    pattern = re.compile(re.escape(prefix) + r"-.*")
    group = unique("pattern")
    members = [cleanup.member(group, pattern=pattern).start(), cleanup.member(group, pattern=pattern.pattern)]
    members[1].start()
    generation = wait_until(lambda: settled_generation([view(m) for m in members], partitions(first, 2)))
    assert members[0].subscription == (first,)

    second = f"{prefix}-us"
    registry.create_topic(second, 2)
    expected = partitions(first, 2) | partitions(second, 2)
    wait_until(lambda: settled_generation([view(m) for m in members], expected, generation))
    assert {m.subscription for m in members} == {(first, second)}
