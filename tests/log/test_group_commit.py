"""GroupCommitter: concurrent coroutine appends share fsyncs; failures reach every waiter."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from log import GroupCommitter, LogFailedError, PartitionLog, materialize
from log import partition as partition_module

from tests.log.helpers import EPOCH, NOW_MS, commit, model


def test_concurrent_appends_are_durable_when_acknowledged_with_fewer_fsyncs(tmp_path: Path) -> None:
    async def scenario(log: PartitionLog) -> tuple[list[tuple[int, int]], int]:
        committer = GroupCommitter(log)

        async def producer(n: int) -> tuple[int, int]:
            base, end = await committer.append([commit(f"g{n}", "t", 0, n)], EPOCH, NOW_MS)
            assert log.high_watermark >= end
            return base, end

        results = await asyncio.gather(*(producer(n) for n in range(50)))
        await committer.close()
        return results, committer.syncs

    with PartitionLog.open(tmp_path, EPOCH) as log:
        results, syncs = asyncio.run(scenario(log))
        assert sorted(results) == [(n, n + 1) for n in range(50)]
        assert 1 <= syncs < 50
        assert log.high_watermark == 50
    with PartitionLog.open(tmp_path, EPOCH) as log:
        assert materialize(log) == model(commit(f"g{n}", "t", 0, n) for n in range(50))


def test_wait_durable_and_flush(tmp_path: Path) -> None:
    async def scenario(log: PartitionLog) -> None:
        committer = GroupCommitter(log)
        assert await committer.wait_durable(0) == 0
        log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
        log.append([commit("g", "t", 0, 2)], EPOCH, NOW_MS)
        assert await committer.flush() == 2
        with pytest.raises(ValueError):
            await committer.wait_durable(3)
        await committer.close()

    with PartitionLog.open(tmp_path, EPOCH) as log:
        asyncio.run(scenario(log))


def test_a_failed_fsync_fails_every_waiter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    async def scenario(log: PartitionLog) -> list[BaseException | tuple[int, int]]:
        committer = GroupCommitter(log)
        monkeypatch.setattr(partition_module, "_fdatasync", broken_fsync)
        outcomes = await asyncio.gather(
            *(committer.append([commit("g", "t", 0, n)], EPOCH, NOW_MS) for n in range(5)),
            return_exceptions=True,
        )
        await committer.close()
        return outcomes

    log = PartitionLog.open(tmp_path, EPOCH)
    outcomes = asyncio.run(scenario(log))
    assert all(isinstance(o, LogFailedError) for o in outcomes)
    assert log.high_watermark == 0
    log.close()
