"""Loading, reloading and unloading an offsets partition: its lifecycle in the actor.

`PartitionLoader` is a part of `OffsetPartition` (`actors.partition.actor`).
It owns what the loads did (`known_end`, the committed end the partition
reached under earlier leaders; `stats`, a `LoadStats` the gauges and the
probe read) and
runs the runtime's lifecycle (DESIGN 5): INITIAL -> LOADING -> ACTIVE, FAILED
-> LOADING, and CLOSED on an unload. It is the one part that starts the
others serving: once a load is done (`on_loaded`: after a load, a reload or
a promotion) it makes the leader role (`ReplicaRoles.start_leading`), hands
the shard to the runtime, gives it its topics and starts the serving loops,
the leader's tasks and the Kafka listener. Rules:
- A load retries with backoff (`LOAD_RETRY_INITIAL_S` to `LOAD_RETRY_MAX_S`);
  a refusal (`coordinator.runtime.load_refusal`: a log missing or behind what
  the partition acknowledged) or a fence (a newer epoch in the directory)
  ends it, shown in `probe`.
- A failure the runtime took in (`PartitionHost.deliver` calls `recover`):
  the tasks stop, the log is closed on the I/O thread, and a load starts
  again, queued behind the close. A storage error of a replica is a disk
  failure instead (`actors.partition.recovery`).
- An unload answers everything NOT_COORDINATOR, waits (bounded) for what was
  decided to be durable, stops every task and closes the log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actors.core.node_names import current_node_name
from actors.partition.recovery import close_quietly
from coordinator import Shard
from coordinator.records import Record
from coordinator.runtime import RuntimeState, load_refusal
from log.epoch import read_leader_epoch
from log.errors import FencedEpochError, LogError
from log.fsutil import check_disk
from log.loader import groups_from, load_into
from log.partition import PartitionLog

if TYPE_CHECKING:
    from actors.partition.host import PartitionHost
    from actors.partition.kafka_plug import KafkaPlug
    from actors.partition.recovery import DiskRecovery
    from actors.partition.roles import ReplicaRoles
    from actors.partition.serving import ServingLoops

logger = logging.getLogger(__name__)
# The task that loads a leader's log.
LOAD_TASK = "load"
# Reload backoff after a failed load (a log another writer still locks, an I/O error).
LOAD_RETRY_INITIAL_S = 0.05
LOAD_RETRY_MAX_S = 2.0
UNLOAD_DRAIN_TIMEOUT_S = 5.0
# An uncommitted suffix larger than this at load holds every read until it commits.
SUFFIX_SCAN_MAX_BYTES = 1 << 20


class LoadRefused(Exception):
    """The log on this node must not be served (see `coordinator.runtime.load_refusal`)."""


@dataclass(slots=True)
class LoadStats:
    """What the last load did; written by the loader only."""

    load_ms: float = 0.0
    loaded_records: int = 0
    # Grows while a load replays the log: the controller's sign of progress.
    progress: int = 0


class PartitionLoader:
    """The lifecycle of one partition in its actor (module docstring)."""

    def __init__(
        self,
        host: PartitionHost,
        stats: LoadStats,
        roles: ReplicaRoles,
        recovery: DiskRecovery,
        serving: ServingLoops,
        kafka: KafkaPlug,
    ) -> None:
        self.host = host
        self._roles = roles
        self._recovery = recovery
        self._serving = serving
        self._kafka = kafka
        self.stats = stats
        self.known_end = -1

    async def activate(self, known_end: int = -1) -> str:
        """Start loading the partition (idempotent); returns at once.

        `known_end`: the durable end the partition reached under earlier
        leaders, -1 if it was never loaded anywhere (see `load_refusal`).
        """
        host = self.host
        if host.runtime.state is RuntimeState.INITIAL and host.partition >= 0:
            self.known_end = known_end
            host.spawn(self._load(), LOAD_TASK)
        return host.runtime.state.name

    async def wait_active(self, timeout_s: float = 60.0) -> str:
        deadline = time.monotonic() + timeout_s
        while self._loading() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return self.host.runtime.state.name

    def _loading(self) -> bool:
        runtime = self.host.runtime
        state = runtime.state
        return state in (RuntimeState.INITIAL, RuntimeState.LOADING) or (
            state is RuntimeState.FAILED and not runtime.refused
        )

    async def stop_loading(self) -> None:
        """End a load in flight, its log closed (`PartitionHost.open_on_io`), before opening the log again."""
        await self.host.stop_tasks(LOAD_TASK)

    async def _load(self) -> None:
        """LOADING until ACTIVE, retrying with backoff; a refusal or a fence ends it."""
        host = self.host
        loop = asyncio.get_running_loop()
        delay = LOAD_RETRY_INITIAL_S
        while True:
            runtime = host.runtime
            incarnation = runtime.begin_load()
            started = time.perf_counter()
            try:
                log, shard, records = await host.open_on_io(self.open_and_replay)
            except FencedEpochError:
                logger.warning("partition %d: epoch %d is fenced", host.partition, host.epoch)
                host.deliver(host.runtime.unload(host.clock.now_ms()))
                return
            except LoadRefused as exc:
                logger.error("partition %d: %s", host.partition, exc)
                host.runtime.on_load_failed(str(exc), refused=True)
                host.failures_seen = host.runtime.failures
                host.metrics.load_failed(refused=True)
                return
            except Exception as exc:
                if host.storage_failed(exc, "load"):
                    return
                logger.warning("partition %d: load failed, retry in %.2f s: %r", host.partition, delay, exc)
                host.runtime.on_load_failed(f"load failed: {exc!r}")
                host.failures_seen = host.runtime.failures  # this loop retries: nothing to recover
                host.metrics.load_failed(refused=False)
                await asyncio.sleep(delay)
                delay = min(delay * 2, LOAD_RETRY_MAX_S)
                continue
            if host.runtime.state is not RuntimeState.LOADING or host.runtime.incarnation != incarnation:
                await loop.run_in_executor(host.io, log.close)  # unloaded meanwhile
                return
            self.on_loaded(log, shard, records, started)
            return

    def on_loaded(self, log: PartitionLog, shard: Shard, records: int, started: float) -> None:
        """A load (or a promotion, with its hot shard) is done: serve (module docstring)."""
        host = self.host
        host.log, self.stats.loaded_records = log, records
        self._recovery.disk.on_recovered()
        host.failures_seen = host.runtime.failures
        # What was loaded lives long: keep the collector from scanning it again.
        host.gc.freeze_now()
        self.stats.load_ms = (time.perf_counter() - started) * 1000
        leader = self._roles.start_leading(log)
        end = log.log_end_offset
        committed = leader.state.high_watermark
        host.runtime.writable = leader.state.writable
        # Before serving, on this thread: a bounded read of the uncommitted suffix, whose
        # groups' reads wait for it while other groups' are answered (`coordinator.runtime`).
        try:
            suffix = groups_from(log, committed, SUFFIX_SCAN_MAX_BYTES)
        except LogError as exc:  # then every read waits for the suffix, as before
            logger.warning("partition %d: reading the uncommitted suffix: %r", host.partition, exc)
            suffix = None
        host.deliver(host.runtime.on_loaded(shard, committed, host.clock.now_ms(), end, suffix))
        self._serving.apply_load_view(shard)
        logger.info(
            "partition %d epoch %d: loaded %d records in %.0f ms",
            host.partition, host.epoch, records, self.stats.load_ms,
        )
        self._serving.spawn_loops()
        leader.spawn_tasks()
        self._kafka.start_once()
        host.heap.settle()

    def open_and_replay(self) -> tuple[PartitionLog, Shard, int]:
        """On the I/O thread: open the log (never an empty one where data must be) and replay it."""
        host = self.host
        directory = host.directory()
        exists = os.path.isdir(directory)
        if exists and read_leader_epoch(directory) > host.epoch:
            # Checked before waiting for the directory lock the leader holds.
            raise FencedEpochError(host.epoch, read_leader_epoch(directory))
        if not exists and (refusal := load_refusal(directory, False, -1, self.known_end)) is not None:
            raise LoadRefused(f"{refusal} (node {current_node_name()})")
        recovery = self._recovery
        if recovery.disk.failed:
            check_disk(directory)
        log = PartitionLog.open(
            directory, host.epoch, host.settings.log, create=self.known_end < 0,
            durable_end=recovery.durable_after_failure,
        )
        try:
            refusal = load_refusal(directory, True, log.high_watermark, self.known_end)
            if refusal is not None:
                raise LoadRefused(f"{refusal} (node {current_node_name()})")
            shard = host.new_shard()
            loaded = load_into(_Progress(shard, self.stats), log)
            self._roles.record_leadership()
        except BaseException:
            log.close()
            raise
        recovery.durable_after_failure = None
        return log, shard, loaded.records

    async def unload(self, epoch: int) -> str:
        """Emigration: answer everything NOT_COORDINATOR, stop the tasks, close the log."""
        host = self.host
        if epoch < host.epoch or (host.runtime.state is RuntimeState.CLOSED and host.log is None):
            return host.runtime.state.name
        if host.runtime.state is not RuntimeState.CLOSED:
            host.deliver(host.runtime.unload(host.clock.now_ms()))
            await self._drain()
            host.deliver(host.runtime.abandon())
        self._roles.stop()
        await host.stop_tasks()
        host.metrics.flush_counts()
        log, host.log = host.log, None
        if log is not None:
            await asyncio.get_running_loop().run_in_executor(host.io, log.close)
        return host.runtime.state.name

    async def _drain(self) -> None:
        """Wait (bounded) until what was decided before now is durable, or the flush failed."""
        host = self.host
        self._serving.flush_wanted.set()
        deadline = time.monotonic() + UNLOAD_DRAIN_TIMEOUT_S
        while (
            host.runtime.durable_end < host.runtime.written_end
            and any(t.get_name() == "flush" for t in host.tasks)
            and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.001)

    def recover(self) -> None:
        """After a failure: stop the tasks, close the log on the I/O thread, reload."""
        host = self.host
        host.failures_seen = host.runtime.failures
        host.metrics.failed()
        host.cancel_tasks()
        log, host.log = host.log, None
        if log is not None:
            if log.failed:
                self._recovery.durable_after_failure = log.high_watermark
            # Queued behind any append still running on the I/O thread; the
            # reload's open is queued behind the close.
            host.io.submit(close_quietly, log, host.partition)
        if not host.runtime.refused:
            host.spawn(self._load(), LOAD_TASK)


class _Progress:
    """A replay target that counts the loader's steps into `stats.progress`."""

    __slots__ = ("shard", "stats")

    def __init__(self, shard: Shard, stats: LoadStats) -> None:
        self.shard, self.stats = shard, stats

    def replay_many(self, records: Iterable[Record]) -> None:
        self.shard.replay_many(records)
        self.stats.progress += 1
