"""Disk failures of an offsets partition replica, healed without a person (DESIGN 5b).

A mixin of `OffsetPartition`. Rules:
- A storage error (`log.errors.is_storage_error`: a failed write, fsync,
  open or rename: ENOSPC, EROFS, EIO, EDQUOT, any OSError) of a replicated
  replica's log is a disk failure (`_on_disk_failure`), taken in one step of
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
  (`_ensure_disk_recovery`). Each try is a write and an fsync in
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
  reloads (`OffsetPartition._recover`), and its load checks the disk and
  cuts the log at the durable end in the same way (`_open_and_replay`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from functools import partial
from typing import Any

from actors.partition.follower import FollowerReplica, PushAnswer
from coordinator import Shard
from coordinator.errors import Errors
from coordinator.replication import UNDEFINED_EPOCH, DiskHealth
from coordinator.runtime import PartitionRuntime
from log.epoch import read_leader_epoch
from log.errors import is_storage_error
from log.fsutil import check_disk
from log.loader import load_into
from log.partition import PartitionLog

logger = logging.getLogger(__name__)
RECOVERY_TASK = "disk-recovery"


class DiskRecovery:
    """Mixin of `OffsetPartition`: disk failures and the recovery from them (module docstring)."""

    # Provided by OffsetPartition and ReplicaRoles.
    partition: int
    epoch: int
    settings: Any
    clock: Any
    runtime: PartitionRuntime
    log: PartitionLog | None
    leader: Any
    follower: FollowerReplica | None
    disk: DiskHealth
    metrics: Any
    _io: Executor
    _tasks: set[asyncio.Task[None]]
    _role_lock: asyncio.Lock
    # The leader to follow once the disk works again: (leader epoch, leader id).
    _follow_after_recovery: tuple[int, str] | None
    # The durable end of the last log that failed: the reopened log is cut there.
    _durable_after_failure: int | None

    _directory: Callable[[], str]
    _new_shard: Callable[[], Shard]
    _deliver: Callable[[Any], None]
    _spawn: Callable[[Coroutine[Any, Any, None], str], None]
    _on_io: Callable[..., Any]
    _open_on_io: Callable[..., Any]
    _follower_maintenance: Callable[[FollowerReplica], Coroutine[Any, Any, None]]
    replica_id: str

    @property
    def replicated(self) -> bool:
        return bool(self.settings.replication_factor > 1)

    def _storage_failed(self, exc: BaseException, where: str) -> bool:
        """True if `exc` was taken as a disk failure (a replica steps aside: the caller
        stops); False if the caller goes on with the runtime's failure path (not a
        storage error, or one of a partition without replicas, shown and counted)."""
        if not is_storage_error(exc):
            return False
        if self.replicated:
            self._on_disk_failure(exc, where)
            return True
        self._note_storage_error(f"{where}: {exc!r}")
        return False

    def _note_storage_error(self, error: str) -> None:
        """A partition without replicas hit a storage error: shown and counted; its
        runtime fails and reloads with its own backoff (module rules)."""
        now = self.clock.now_ms()
        if self.disk.failed:
            self.disk.on_retry_failed(error, now)
        elif self.disk.on_failure(error, now):
            self.metrics.disk_failed(self.replica_id)

    def _on_disk_failure(self, exc: BaseException, where: str) -> None:
        """The log failed under `where`: stop trusting it, step aside, start recovering."""
        now = self.clock.now_ms()
        if not self.disk.on_failure(f"{where}: {exc}", now):
            return  # already failed: the recovery task is running
        logger.error(
            "partition %d: the disk under replica %s failed (%s: %r); it steps aside and retries",
            self.partition, self.replica_id, where, exc,
        )
        self.metrics.disk_failed(self.replica_id)
        follower, leader = self.follower, self.leader
        self._follow_after_recovery = None if follower is None else (follower.leader_epoch, follower.leader)
        if follower is not None:
            follower.retired = True
            self.follower = None
        if leader is not None:
            leader.stopped = True
            self.leader = None
        self._deliver(self.runtime.step_down(now))
        log, self.log = self.log, None
        if log is not None:
            self._durable_after_failure = log.high_watermark
            self._io.submit(close_quietly, log, self.partition)
        self._cancel_tasks_but_recovery()
        self._spawn(self._recover_disk(), RECOVERY_TASK)

    def _cancel_tasks_but_recovery(self) -> None:
        """Cancel every task but the caller's and the disk's recovery: a role change or a
        reload while the disk is failed must never end the only task that brings it back."""
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current and task.get_name() != RECOVERY_TASK:
                task.cancel()

    def _ensure_disk_recovery(self) -> None:
        """Restart the recovery of a failed disk if no task runs it (on every probe of the
        controller, so a failed replica is retried on its own, whatever ended the task)."""
        if not (self.replicated and self.disk.failed):
            return
        if any(t.get_name() == RECOVERY_TASK and not t.done() for t in self._tasks):
            return
        logger.warning(
            "partition %d: replica %s has a failed disk and no recovery running: recovery restarted",
            self.partition, self.replica_id,
        )
        self._spawn(self._recover_disk(), RECOVERY_TASK)

    def _storage_refusal(self) -> PushAnswer:
        """A push to a replica whose disk failed: nothing to acknowledge."""
        return PushAnswer(Errors.KAFKA_STORAGE_ERROR, self.epoch, -1, UNDEFINED_EPOCH, 0)

    def _note_follow_while_failed(self, leader_epoch: int, leader: str) -> None:
        """The controller named a leader while the disk is failed: follow it once recovered."""
        if leader_epoch >= self.epoch:
            self.epoch = leader_epoch
            self._follow_after_recovery = (leader_epoch, leader)

    async def _recover_disk(self) -> None:
        """Retry the disk with backoff until the log reopens (module rules)."""
        while True:
            await asyncio.sleep(self.disk.retry_in_ms(self.clock.now_ms()) / 1000)
            try:
                log, shard, epoch = await self._open_on_io(partial(self._reopen_after_failure, self.epoch))
            except Exception as exc:
                self.disk.on_retry_failed(repr(exc), self.clock.now_ms())
                logger.warning(
                    "partition %d: the disk of replica %s still fails (%r); next try in %.1f s",
                    self.partition, self.replica_id, exc, self.disk.retry_in_ms(self.clock.now_ms()) / 1000,
                )
                continue
            async with self._role_lock:
                self.epoch = max(self.epoch, epoch)
                self._on_disk_recovered(log, shard)
            return

    def _reopen_after_failure(self, epoch: int) -> tuple[PartitionLog | None, Shard | None, int]:
        """On the I/O thread: check the disk, reopen the log cut at its durable end, replay it.
        No log if the directory is gone with the disk: the replica then
        follows afresh when the controller tells it to (it is out of the ISR)."""
        directory = self._directory()
        check_disk(directory)
        if not os.path.isdir(directory):
            return None, None, epoch
        epoch = max(epoch, read_leader_epoch(directory))
        log = PartitionLog.open(
            directory, epoch, self.settings.log, create=False, durable_end=self._durable_after_failure
        )
        try:
            shard = self._new_shard()
            load_into(shard, log)
        except BaseException:
            log.close()
            raise
        return log, shard, epoch

    def _on_disk_recovered(self, log: PartitionLog | None, shard: Shard | None) -> None:
        self.disk.on_recovered()
        self._durable_after_failure = None
        target, self._follow_after_recovery = self._follow_after_recovery, None
        self._deliver(self.runtime.follow(self.clock.now_ms()))
        if log is None or shard is None:
            logger.warning("partition %d: the disk works again, but replica %s lost its log", self.partition,
                           self.replica_id)
            return
        self.log = log
        if target is not None:
            self.follower = FollowerReplica(log, shard, self.epoch, target[1], self._io, self._new_shard)
            self._spawn(self._follower_maintenance(self.follower), "follower-maintenance")
        logger.info(
            "partition %d: the disk of replica %s works again; log reopened at offset %d, %s",
            self.partition, self.replica_id, log.log_end_offset,
            f"following {target[1]}" if target else "waiting for a role",
        )


def close_quietly(log: PartitionLog, partition: int) -> None:
    try:
        log.close()
    except Exception:
        logger.exception("partition %d: closing the failed log", partition)
