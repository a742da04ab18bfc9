"""Building a ControlPlane over the fake cluster, and running it in tests."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from actors.controller.plane import ControlPlane
from actors.core.metrics import ControllerMetrics
from actors.core.settings import ServiceSettings

from tests.controller.fake import FakeCluster, ManualClock, MemoryStore


def make_settings(**overrides: Any) -> ServiceSettings:
    values: dict[str, Any] = {
        "data_dir": "/nonexistent/raygroups",
        "num_partitions": 3,
        "standby_actors": 0,
        "probe_timeout_s": 5.0,
        "kill_wait_s": 1.0,
        "load_stall_timeout_s": 30.0,
    }
    values.update(overrides)
    return ServiceSettings(**values)


def make_plane(
    cluster: FakeCluster, store: MemoryStore, clock: ManualClock | None = None, **overrides: Any
) -> ControlPlane:
    """The operator declares the data directory shared when the fake's nodes share one disk."""
    overrides.setdefault("shared_data_dir", cluster.shared_disk)
    return ControlPlane(
        make_settings(**overrides), cluster, store, ControllerMetrics(), clock or ManualClock()
    )


async def watch(
    plane: ControlPlane, rounds: int = 1, clock: ManualClock | None = None, step_s: float = 1.0
) -> None:
    """`rounds` watch rounds, each finished before the next (the clock moves between them)."""
    for _ in range(rounds):
        await plane.watch_once()
        await plane.settle()
        if clock is not None:
            clock.advance(step_s)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def leader_of(cluster: FakeCluster, partition: int) -> Any:
    [leader] = cluster.leaders_of(partition)
    return leader
