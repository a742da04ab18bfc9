"""Disk failures of an offsets partition replica, healed without a person (DESIGN 5b).

`DiskRecovery` is a part of `OffsetPartition` (`actors.partition.actor`). It
owns the disk's health (`disk`, a `DiskHealth`), the leader to follow once
the disk works again and the durable end of the log that failed; it reaches
the roles only through `RoleHolder` (drop both roles, follow again, the role
lock) and everything else through the host (`actors.partition.host`). Rules:
- A storage error (`log.errors.is_storage_error`: a failed write, fsync,
  open or rename: ENOSPC, EROFS, EIO, EDQUOT, any OSError) of a replicated
  replica's log is a disk failure (`on_disk_failure`), taken in one step of
  the event loop: the replica stops trusting its log at once. A leader
  steps down (everything it held is answered NOT_COORDINATOR: nothing the
  ISR has not made durable is acknowledged); a follower stops following
  and answers every push KAFKA_STORAGE_ERROR, so its leader drops it from
  the ISR now rather than after the lag time. The failed log is closed.
  The probe's `disk` entry (`coordinator.replication.DiskHealth`) says
  which error, since when and the next retry; the controller never elects
  such a replica, removes it from the ISR and sends it no role until it
  recovered.
- One task (`disk-recovery`) retries with backoff (at most `RETRY_MAX_MS`,
  whether or not anyone writes): no role change or reload cancels it, and
  the controller's probe starts it again should it have ended anyway
  (`ensure_disk_recovery`). Each try is a write and an fsync in
  the replica's directory (`log.fsutil.check_disk`), then the log reopened
  and cut at the durable end the failed writer had reached (after a failed
  fsync the page cache may hold bytes the disk never got), and replayed
  into a new shard. A former follower follows again: the leader it
  followed, or the one the controller named meanwhile; a former leader
  keeps its log, deposed, until the controller gives it a role (leader
  again if every other copy is gone too). It then catches up and is
  truncated by leader epoch like any returning replica, and the leader
  admits it to the ISR again.
- A partition without replicas keeps the runtime's path: it fails and
  reloads (`PartitionLoader.recover`), and its load checks the disk and
  cuts the log at the durable end in the same way (`PartitionLoader.open_and_replay`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from functools import partial
from typing import Protocol

from actors.partition.follower import PushAnswer
from actors.partition.host import PartitionHost
from coordinator import Shard
from coordinator.errors import Errors
from coordinator.replication import UNDEFINED_EPOCH, DiskHealth
from log.epoch import read_leader_epoch
from log.errors import is_storage_error
from log.fsutil import check_disk
from log.loader import load_into
from log.partition import PartitionLog

logger = logging.getLogger(__name__)
RECOVERY_TASK = "disk-recovery"


class RoleHolder(Protocol):
    """What the disk part asks of the roles (`actors.partition.roles.ReplicaRoles`)."""

    lock: asyncio.Lock

    def step_aside(self) -> tuple[int, str] | None: ...

    def resume_following(self, log: PartitionLog, shard: Shard, leader: str) -> None: ...


class DiskRecovery:
    """Disk failures of one replica and the recovery from them (module docstring)."""

    def __init__(self, host: PartitionHost) -> None:
        self.host = host
        self.disk = DiskHealth()
        # The leader to follow once the disk works again: (leader epoch, leader id).
        self._follow_after_recovery: tuple[int, str] | None = None
        # The durable end of the last log that failed: the reopened log is cut there.
        self.durable_after_failure: int | None = None
        self._roles: RoleHolder | None = None
        host.survive_cancel(RECOVERY_TASK)

    def attach(self, roles: RoleHolder) -> None:
        """The roles, made after this part (they ask it about the disk)."""
        self._roles = roles

    @property
    def roles(self) -> RoleHolder:
        assert self._roles is not None, "DiskRecovery.attach was not called"
        return self._roles

    def storage_failed(self, exc: BaseException, where: str) -> bool:
        """True if `exc` was taken as a disk failure (a replica steps aside: the caller
        stops); False if the caller goes on with the runtime's failure path (not a
        storage error, or one of a partition without replicas, shown and counted)."""
        if not is_storage_error(exc):
            return False
        if self.host.replicated:
            self.on_disk_failure(exc, where)
            return True
        self._note_storage_error(f"{where}: {exc!r}")
        return False

    def _note_storage_error(self, error: str) -> None:
        """A partition without replicas hit a storage error: shown and counted; its
        runtime fails and reloads with its own backoff (module rules)."""
        now = self.host.clock.now_ms()
        if self.disk.failed:
            self.disk.on_retry_failed(error, now)
        elif self.disk.on_failure(error, now):
            self.host.metrics.disk_failed(self.host.replica_id)

    def on_disk_failure(self, exc: BaseException, where: str) -> None:
        """The log failed under `where`: stop trusting it, step aside, start recovering."""
        host = self.host
        now = host.clock.now_ms()
        if not self.disk.on_failure(f"{where}: {exc}", now):
            return  # already failed: the recovery task is running
        logger.error(
            "partition %d: the disk under replica %s failed (%s: %r); it steps aside and retries",
            host.partition, host.replica_id, where, exc,
        )
        host.metrics.disk_failed(host.replica_id)
        self._follow_after_recovery = self.roles.step_aside()
        host.deliver(host.runtime.step_down(now))
        log, host.log = host.log, None
        if log is not None:
            self.durable_after_failure = log.high_watermark
            host.io.submit(close_quietly, log, host.partition)
        host.cancel_tasks()
        host.spawn(self._recover_disk(), RECOVERY_TASK)

    def ensure_disk_recovery(self) -> None:
        """Restart the recovery of a failed disk if no task runs it (on every probe of the
        controller, so a failed replica is retried on its own, whatever ended the task)."""
        host = self.host
        if not (host.replicated and self.disk.failed):
            return
        if host.running(RECOVERY_TASK):
            return
        logger.warning(
            "partition %d: replica %s has a failed disk and no recovery running: recovery restarted",
            host.partition, host.replica_id,
        )
        host.spawn(self._recover_disk(), RECOVERY_TASK)

    def storage_refusal(self) -> PushAnswer:
        """A push to a replica whose disk failed: nothing to acknowledge."""
        return PushAnswer(Errors.KAFKA_STORAGE_ERROR, self.host.epoch, -1, UNDEFINED_EPOCH, 0)

    def note_follow_while_failed(self, leader_epoch: int, leader: str) -> None:
        """The controller named a leader while the disk is failed: follow it once recovered."""
        if leader_epoch >= self.host.epoch:
            self.host.epoch = leader_epoch
            self._follow_after_recovery = (leader_epoch, leader)

    async def _recover_disk(self) -> None:
        """Retry the disk with backoff until the log reopens (module rules)."""
        host = self.host
        while True:
            await asyncio.sleep(self.disk.retry_in_ms(host.clock.now_ms()) / 1000)
            try:
                log, shard, epoch = await host.open_on_io(partial(self._reopen_after_failure, host.epoch))
            except Exception as exc:
                self.disk.on_retry_failed(repr(exc), host.clock.now_ms())
                logger.warning(
                    "partition %d: the disk of replica %s still fails (%r); next try in %.1f s",
                    host.partition, host.replica_id, exc, self.disk.retry_in_ms(host.clock.now_ms()) / 1000,
                )
                continue
            async with self.roles.lock:
                host.epoch = max(host.epoch, epoch)
                self._on_disk_recovered(log, shard)
            return

    def _reopen_after_failure(self, epoch: int) -> tuple[PartitionLog | None, Shard | None, int]:
        """On the I/O thread: check the disk, reopen the log cut at its durable end, replay it.
        No log if the directory is gone with the disk: the replica then
        follows afresh when the controller tells it to (it is out of the ISR)."""
        host = self.host
        directory = host.directory()
        check_disk(directory)
        if not os.path.isdir(directory):
            return None, None, epoch
        epoch = max(epoch, read_leader_epoch(directory))
        log = PartitionLog.open(
            directory, epoch, host.settings.log, create=False, durable_end=self.durable_after_failure
        )
        try:
            shard = host.new_shard()
            load_into(shard, log)
        except BaseException:
            log.close()
            raise
        return log, shard, epoch

    def _on_disk_recovered(self, log: PartitionLog | None, shard: Shard | None) -> None:
        host = self.host
        self.disk.on_recovered()
        self.durable_after_failure = None
        target, self._follow_after_recovery = self._follow_after_recovery, None
        host.deliver(host.runtime.follow(host.clock.now_ms()))
        if log is None or shard is None:
            logger.warning("partition %d: the disk works again, but replica %s lost its log", host.partition,
                           host.replica_id)
            return
        host.log = log
        if target is not None:
            self.roles.resume_following(log, shard, target[1])
        logger.info(
            "partition %d: the disk of replica %s works again; log reopened at offset %d, %s",
            host.partition, host.replica_id, log.log_end_offset,
            f"following {target[1]}" if target else "waiting for a role",
        )


def close_quietly(log: PartitionLog, partition: int) -> None:
    try:
        log.close()
    except Exception:
        logger.exception("partition %d: closing the failed log", partition)
