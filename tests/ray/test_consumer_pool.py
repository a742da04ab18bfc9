"""A real ConsumerPool (actors/pool/) on the session's service: it scales up when the end
offsets jump past the target (pushed by its lag watch, not polled), back down after the
cooldown, nothing is committed twice, and a function that raises restarts its member
without losing the partition."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import pytest

from actors import Client, ConsumerPool

from tests.ray.member_support import FAST, unique, wait_until

pytestmark = pytest.mark.ray
PARTITIONS = 4
STEP = 150


class Source:
    """The user's source, simulated: the registry's end offsets are the records; each call
    processes up to `batch` of them at `per_record_s`. Raises once at partition 0's start."""

    def __init__(self, marker: str, batch: int = 10, per_record_s: float = 0.004) -> None:
        self.marker, self.batch, self.per_record_s = marker, batch, per_record_s
        self.client: Any = None

    def __call__(self, topic: str, partition: int, start: int) -> int:
        if self.client is None:
            import actors
            self.client = actors.connect()
        if partition == 0 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError("poison record")
        end = self.client.end_offsets([topic])[(topic, partition)]
        upto = min(end, start + self.batch)
        time.sleep(self.per_record_s * (upto - start))
        return upto


def test_pool_scales_up_on_lag_and_down_after_cooldown(registry: Client) -> None:
    topic, group = unique("pool-t"), unique("pool-g")
    registry.create_topic(topic, PARTITIONS)
    registry.set_end_offsets({(topic, p): 0 for p in range(PARTITIONS)})
    marker = os.path.join(tempfile.mkdtemp(prefix="pool-"), "raised")
    pool = ConsumerPool(
        group, [topic], Source(marker), min_members=1, max_members=10,
        target_lag_messages=50, cooldown_s=1.0, scale_up_interval_s=0.3, keep_alive_s=60.0,
        member_cpus=0, member_options=FAST,
    ).start()
    try:
        assert pool.max_members == PARTITIONS and "capped" in pool.notes[0]  # 10 asked, 4 partitions
        registry.set_end_offsets({(topic, p): STEP for p in range(PARTITIONS)})
        # Pushed: the leader answers the pool's lag watch as the end offsets cross the target,
        # long before its 60 s keep-alive; the cooldown's end is the pool's own next check.
        wait_until(lambda: pool.size > 1, timeout_s=20)
        wait_until(lambda: (lag := registry.lag([group])) and lag[0].lag == 0)
        wait_until(lambda: pool.size == 1)  # after the cooldown
        errors = pool.errors()
        assert errors and "poison record" in errors[0]["error"], (pool.notes, pool.history, pool.status())
    finally:
        pool.stop()
    sizes = [members for _, members, *_ in pool.history]
    assert max(sizes) > 1 and sizes[-1] == 0
    by_partition: dict[int, list[tuple[int, int]]] = {}
    for _, partition, start, end in pool.commits():
        by_partition.setdefault(partition, []).append((start, end))
    for partition in range(PARTITIONS):
        ranges = sorted(by_partition[partition])
        # Contiguous from 0 to the end: no range committed twice, none lost.
        assert ranges[0][0] == 0 and ranges[-1][1] == STEP
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    final = {(p.topic, p.partition): p.committed for p in registry.lag([group])[0].partitions}
    assert final == {(topic, p): STEP for p in range(PARTITIONS)}


def test_restarted_members_keep_their_place_and_their_record(registry: Client) -> None:
    """Ray restarts a killed member (max_restarts): the standby comes back out of the group,
    the active member back in it, and what each recorded (errors, commits) is still there."""
    import ray

    topic, group = unique("pool-rt"), unique("pool-rg")
    registry.create_topic(topic, 2)
    registry.set_end_offsets({(topic, p): 20 for p in range(2)})
    pool = ConsumerPool(
        group, [topic], Source(os.path.join(tempfile.mkdtemp(prefix="pool-"), "raised")),
        min_members=1, max_members=2, target_lag_messages=10_000, keep_alive_s=60.0,
        member_cpus=0, member_options=FAST,
    ).start()

    def status(actor: Any) -> dict[str, Any]:
        try:
            return ray.get(actor.status.remote(), timeout=30)  # type: ignore[no-any-return]
        except ray.exceptions.RayError:  # restarting
            return {"incarnation": 0, "owned": [], "active": None}

    def in_group() -> int:
        return len(registry.describe_consumer_groups([group])[0].members)

    try:
        wait_until(lambda: (lag := registry.lag([group])) and lag[0].lag == 0)
        before = pool.commits()
        assert pool.spare is not None and before
        (_, spare), (_, active) = pool.spare, pool.members[0]
        ray.kill(spare, no_restart=False)
        ray.kill(active, no_restart=False)
        wait_until(lambda: status(spare)["incarnation"] == 2 and status(active)["incarnation"] == 2)
        assert not status(spare)["active"] and status(spare)["owned"] == []
        # The dead process's membership expires (2 s session); the restarted one takes both
        # partitions: in the group, exactly the members the pool counts.
        wait_until(lambda: in_group() == pool.size == 1 and len(status(active)["owned"]) == 2)
        registry.set_end_offsets({(topic, p): 40 for p in range(2)})
        wait_until(lambda: (lag := registry.lag([group])) and lag[0].lag == 0)
        assert in_group() == 1 and not status(spare)["active"]
        errors = pool.errors()
        assert any("poison record" in e["error"] for e in errors), errors
        assert set(before) <= set(pool.commits())
        assert pool.control_status()["running"] and pool.control_status()["errors"] == 0
    finally:
        pool.stop()
