"""A partition without replicas whose disk fails: it fails and reloads by itself once
the disk works, from what it had durably written (never from the page cache)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from actors.core.settings import ServiceSettings, partition_dir
from coordinator import CoordinatorConfig, Errors
from coordinator.messages import OffsetFetchRequest

from tests.actors.support import Answers, active, commit, run, until
from tests.failing_disk import FailingDisk


def test_a_single_copy_partition_reloads_by_itself_from_its_durable_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        settings = ServiceSettings(
            data_dir=str(tmp_path), num_partitions=1,
            coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
        )
        disk = FailingDisk(monkeypatch, partition_dir(settings.data_dir, 0))
        partition = await active(settings)
        answers = Answers()
        assert (await answers.wait(answers.send(partition, commit("g", 1)))).errors()[("t", 0)] is Errors.NONE
        disk.fail(errno.EIO, {"fsync"})  # the write reaches the page cache, the fsync fails
        failed = await answers.wait(answers.send(partition, commit("g", 2)))
        assert failed.errors() == {("t", 0): Errors.NOT_COORDINATOR}
        await until(lambda: partition.disk.retries >= 1, "the reload to find the disk still broken")
        probe = await partition.probe()
        assert probe["disk"]["failed"] and "Input/output error" in probe["disk"]["error"]
        assert probe["state"] in ("LOADING", "FAILED")
        disk.heal()
        assert await partition.wait_active() == "ACTIVE"
        assert not (await partition.probe())["disk"]["failed"]
        fetched = await answers.wait(answers.send(partition, OffsetFetchRequest("g", (("t", 0),))))
        assert fetched.offsets() == {("t", 0): 1}  # the unsynced commit 2 is gone with the page cache
        assert partition.log is not None and partition.log.log_end_offset == 1
        answers.all_once()
        await partition.unload(partition.epoch)

    run(scenario())
