"""GroupMembers in other processes: sync Ray actors (and the kill of one), Ray
tasks, and AsyncGroupMember in an async Ray actor, next to members in this
process."""

from __future__ import annotations

from typing import Any

import pytest
import ray

from actors import Client, GroupMember
from coordinator.topic_partition import TopicPartition

from tests.ray.member_support import (
    FAST,
    TIMEOUT_S,
    AsyncMemberHost,
    Cleanup,
    partitions,
    settled_generation,
    unique,
    view,
    wait_until,
)

pytestmark = pytest.mark.ray


def views(hosts: list[Any], local: list[GroupMember]) -> list[Any]:
    remote = [v for views in ray.get([h.views.remote() for h in hosts]) for v in views.values()]
    return remote + [view(m) for m in local]


def test_killed_member_process_partitions_are_taken_over(registry: Client, cleanup: Cleanup) -> None:
    topic, group = unique("t"), unique("kill")
    registry.create_topic(topic, 6)
    expected = partitions(topic, 6)
    doomed, survivor = cleanup.host(), cleanup.host()
    options = {**FAST, "session_timeout_ms": 1_500}
    ray.get(doomed.add.remote("a", group, [topic], **options))
    ray.get(survivor.add.remote("b", group, [topic], **options))
    local = cleanup.member(group, [topic], session_timeout_ms=1_500).start()
    generation = wait_until(lambda: settled_generation(views([doomed, survivor], [local]), expected))
    lost = ray.get(doomed.views.remote())["a"][2]
    assert lost

    ray.kill(doomed)  # kill -9 of the process: no LeaveGroup, no more heartbeats
    after = wait_until(lambda: settled_generation(views([survivor], [local]), expected, generation))
    taken = ray.get(survivor.views.remote())["b"][2] | local.assignment()
    assert after > generation and lost <= taken


@ray.remote(num_cpus=0)
def consume_in_task(group: str, topic: str, peers: int, total: int) -> list[TopicPartition]:
    """A member in a Ray task: waits for its share, commits, meets the others through the offsets."""
    with GroupMember(group, [topic], **FAST) as member:
        wait_until(lambda: member.is_stable and len(member.poll()) == total // peers)
        owned = member.assignment()
        member.commit({tp: 1_000 + tp.partition for tp in owned})
        everything = partitions(topic, total)
        wait_until(lambda: all(member.committed(everything).values()))
        return sorted(owned)


def test_members_in_ray_tasks(registry: Client) -> None:
    topic, group = unique("t"), unique("tasks")
    registry.create_topic(topic, 4)
    shares = ray.get([consume_in_task.remote(group, topic, 2, 4) for _ in range(2)], timeout=2 * TIMEOUT_S)
    assert sorted(shares[0] + shares[1]) == sorted(partitions(topic, 4))
    offsets = registry.fetch_offsets(group).offsets()
    assert offsets == {(topic, p): 1_000 + p for p in range(4)}


def test_async_member_in_an_async_actor(registry: Client, cleanup: Cleanup) -> None:
    topic, group = unique("t"), unique("async")
    registry.create_topic(topic, 6)
    expected = partitions(topic, 6)
    host = cleanup.host(AsyncMemberHost)
    ray.get(host.add.remote("a", group, [topic], assignors=["cooperative-sticky"]))
    local = cleanup.member(group, [topic], assignors=["cooperative-sticky"]).start()
    wait_until(lambda: settled_generation(views([host], [local]), expected))

    owned = ray.get(host.wait_and_commit.remote("a", 500), timeout=TIMEOUT_S)
    assert owned and set(owned).isdisjoint(local.assignment())
    offsets = {tp: c.offset for tp, c in local.committed(owned).items() if c}
    assert offsets == {tp: 500 + tp.partition for tp in owned}
    events = ray.get(host.events.remote("a"))
    assert frozenset(owned) <= frozenset().union(*(p for k, p in events if k == "assigned"))

    generation = local.generation_id
    ray.get(host.close_all.remote(), timeout=TIMEOUT_S)  # LeaveGroup: `local` takes everything
    wait_until(lambda: settled_generation([view(local)], expected, generation))
