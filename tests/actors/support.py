"""Driving an `OffsetPartition` without Ray: it is a plain class until
`ray.remote` wraps it, so a test runs it on an asyncio loop of its own with a
real log in a temporary directory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from actors.core.settings import ServiceSettings
from actors.partition.actor import OffsetPartition
from coordinator.errors import Errors
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


class Answers:
    """Every answer per request, to check each gets exactly one; `watch` is
    called at each answer and its result kept beside it."""

    def __init__(self, watch: Any = None) -> None:
        self.got: dict[int, list[Any]] = {}
        self.seen: dict[int, Any] = {}
        self.watch = watch

    def send(self, partition: OffsetPartition, request: Any) -> int:
        key = len(self.got)
        self.got[key] = []

        def deliver(response: Any) -> None:
            self.got[key].append(response)
            if self.watch is not None:
                self.seen[key] = self.watch()

        partition._submit(request, deliver, partition.clock.now_ms(), time.perf_counter())
        partition._after_requests()
        return key

    def one(self, key: int) -> Any:
        assert len(self.got[key]) == 1, f"request {key} answered {len(self.got[key])} times"
        return self.got[key][0]

    async def wait(self, key: int) -> Any:
        await until(lambda: bool(self.got[key]), f"an answer to request {key}")
        await asyncio.sleep(0.01)  # room for a second, wrong answer to show
        return self.one(key)

    def all_once(self) -> None:
        for key in self.got:
            self.one(key)


async def acknowledged(answers: Answers, partition: OffsetPartition, group: str, offset: int) -> Any:
    """Commit `offset` until it is not refused for want of replicas, as the client retries
    that refusal; its last answer. A follower that answers later than the replica lag
    time (a busy machine) leaves the ISR below min.insync.replicas for a while, and a
    commit then is answered COORDINATOR_NOT_AVAILABLE at once, never written; the
    retry waits for the leader to take writes again."""
    while True:
        answer = await answers.wait(answers.send(partition, commit(group, offset)))
        if answer.errors() != {("t", 0): Errors.COORDINATOR_NOT_AVAILABLE}:
            return answer
        await until(lambda: partition.runtime.writable, "the ISR back at min.insync.replicas")
