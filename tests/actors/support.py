"""Driving an `OffsetPartition` without Ray: it is a plain class until
`ray.remote` wraps it, so a test runs it on an asyncio loop of its own with a
real log in a temporary directory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from actors.partition import OffsetPartition
from actors.settings import ServiceSettings
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest

WAIT_S = 20.0


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` (bounded): synchronisation, not timing."""
    for _ in range(int(WAIT_S / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def commit(group: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group, (OffsetCommitPartition("t", 0, offset),))


async def active(settings: ServiceSettings, known_end: int = -1, epoch: int = 1) -> OffsetPartition:
    """A partition leader of `settings`, loaded and serving."""
    partition = OffsetPartition(0, epoch, settings)
    await partition.activate(known_end)
    assert await partition.wait_active(WAIT_S) == "ACTIVE"
    return partition
