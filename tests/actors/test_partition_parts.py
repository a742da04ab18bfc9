"""A part of the partition actor driven alone (actors/partition/actor.py's structure):
it takes the host and the narrow interface it declares, so a test hands it a fake
for the rest. Here the disk part (`actors.partition.recovery`) with fake roles."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

from actors.partition.host import PartitionHost
from actors.partition.recovery import RECOVERY_TASK, DiskRecovery
from log.partition import PartitionLog

from tests.actors.replication_support import settings_for
from tests.actors.support import run, until


class FakeRoles:
    """`RoleHolder`: what the disk part may ask of the roles, recorded."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.stepped_aside = 0
        self.resumed: list[tuple[Any, str]] = []

    def step_aside(self) -> tuple[int, str] | None:
        self.stepped_aside += 1
        return (4, "b")  # it followed replica b at leader epoch 4

    def resume_following(self, log: Any, shard: Any, leader: str) -> None:
        self.resumed.append((log, leader))


def test_the_disk_part_alone_steps_the_roles_aside_once_and_follows_again_when_the_disk_works(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        host = PartitionHost(0, 4, settings_for(tmp_path), node_id="a")
        recovery, roles = DiskRecovery(host), FakeRoles()
        recovery.attach(roles)
        host.wire(on_failure=lambda: None, storage_failed=recovery.storage_failed)
        os.makedirs(host.directory())
        host.log = PartitionLog.open(host.directory(), 4, host.settings.log, create=True)
        host.deliver(host.runtime.follow(host.clock.now_ms()))
        failure = OSError(errno.EIO, "injected")

        assert host.storage_failed(failure, "append")  # a replica's storage error is a disk failure
        assert roles.stepped_aside == 1 and host.log is None and recovery.disk.failed
        assert host.running(RECOVERY_TASK)
        host.cancel_tasks()  # a role change or a reload meanwhile: the recovery survives it
        await asyncio.sleep(0)
        assert host.running(RECOVERY_TASK)
        recovery.on_disk_failure(failure, "append")  # already failed: nothing more happens
        assert roles.stepped_aside == 1

        await until(lambda: bool(roles.resumed), "the recovery to reopen the log")
        log, leader = roles.resumed[0]
        assert leader == "b" and host.log is log and not recovery.disk.failed
        await host.stop_tasks()
        log.close()

    run(scenario())
