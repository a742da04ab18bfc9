"""Group commit on the partition's real write path, without Ray: commits that
gather while an fsync runs share the next one, and a failed fsync answers
every commit waiting on it or gathered behind it.

`OffsetPartition` is a plain class until `ray.remote` wraps it, so these tests
drive it on an asyncio loop of their own through `handle`, with a real log in
a temporary directory. The log's fdatasync is replaced by a gate that counts
calls and holds the first one until the test has gathered more commits.
"""

from __future__ import annotations

import asyncio
import errno
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import log.partition as log_partition
from actors.core.settings import ServiceSettings
from actors.partition.actor import OffsetPartition
from coordinator import Errors
from coordinator.messages import OffsetFetchRequest

from tests.actors.support import WAIT_S, active, commit, run, until

GATHERED = 25


class GatedSync:
    """Stands in for the log's fdatasync: counts calls, holds the first until
    `gate` opens, and fails it if asked to."""

    def __init__(self, original: Callable[[int], None], fail_first: bool) -> None:
        self.original = original
        self.fail_first = fail_first
        self.calls = 0
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            self.gate.wait(WAIT_S)
            if self.fail_first:
                raise OSError(errno.ENOSPC, "No space left on device")
        self.original(fd)


def settings_for(tmp_path: Path) -> ServiceSettings:
    # Maintenance (snapshots, compaction) is kept out of the way: these tests count fsyncs.
    return ServiceSettings(data_dir=str(tmp_path), num_partitions=1, maintenance_interval_s=3600)


async def gather_behind_a_held_fsync(
    partition: OffsetPartition, sync: GatedSync
) -> list[asyncio.Task[Any]]:
    """One commit whose fsync is held, then GATHERED more that reach the
    partition meanwhile; returns their tasks, the first first."""
    first = asyncio.create_task(partition.handle(commit("g0", 0)))
    await until(sync.entered.is_set, "the first commit's fsync to start")
    gathered = [asyncio.create_task(partition.handle(commit(f"g{n}", n))) for n in range(1, GATHERED + 1)]
    await until(lambda: partition.runtime.inflight == GATHERED + 1, "every commit to reach the partition")
    await asyncio.sleep(0.05)  # room for a wrong, early answer to show
    assert not any(task.done() for task in [first, *gathered]), "a commit was answered before its fsync"
    return [first, *gathered]


async def commit_through_a_held_fsync(
    partition: OffsetPartition, monkeypatch: pytest.MonkeyPatch, fail_first: bool
) -> tuple[GatedSync, list[Any]]:
    """Gate the log's fsync, gather commits behind the held one, release it;
    returns the gate (its call count) and every commit's answer, in order."""
    sync = GatedSync(log_partition._fdatasync, fail_first=fail_first)
    monkeypatch.setattr(log_partition, "_fdatasync", sync)
    try:
        tasks = await gather_behind_a_held_fsync(partition, sync)
    finally:
        sync.gate.set()
    return sync, list(await asyncio.gather(*tasks))


def test_one_fsync_covers_every_commit_that_gathered_while_the_last_one_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        partition = await active(settings_for(tmp_path))
        sync, responses = await commit_through_a_held_fsync(partition, monkeypatch, fail_first=False)
        assert all(r.errors() == {("t", 0): Errors.NONE} for r in responses)
        # The first commit's fsync, then one for all the commits that gathered behind it.
        assert sync.calls == 2
        assert partition.log is not None
        assert partition.log.high_watermark == partition.runtime.durable_end == partition.runtime.written_end
        for n in range(GATHERED + 1):
            fetched = await partition.handle(OffsetFetchRequest(f"g{n}", (("t", 0),)))
            assert fetched.offsets() == {("t", 0): n}
        await partition.unload(partition.epoch)

    run(scenario())


def test_a_failed_fsync_answers_every_waiting_commit_and_the_partition_reloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        partition = await active(settings_for(tmp_path))
        sync, responses = await commit_through_a_held_fsync(partition, monkeypatch, fail_first=True)
        assert all(r.errors() == {("t", 0): Errors.NOT_COORDINATOR} for r in responses)
        assert await partition.wait_active(WAIT_S) == "ACTIVE"
        assert partition.runtime.failures == 1
        # The commits that gathered behind the failed fsync were never written, so never kept.
        for n in range(1, GATHERED + 1):
            fetched = await partition.handle(OffsetFetchRequest(f"g{n}", (("t", 0),)))
            assert fetched.offsets() == {("t", 0): -1}
        after = await partition.handle(commit("g1", 100))
        assert after.errors() == {("t", 0): Errors.NONE}
        await partition.unload(partition.epoch)

    run(scenario())
