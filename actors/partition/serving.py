"""The loops a loaded partition runs while it serves: flush, timers, topics, gauges, maintenance.

`ServingLoops` is a base class of `OffsetPartition`. `_spawn_serving_loops`
starts them once a load is done, each a supervised task (`_spawn`: one
that raises fails the partition, which reloads). Each runs until the
partition cancels it (a failure, an unload); all but flush also stop when
the runtime leaves ACTIVE, and flush when the leader role is gone (a
step-down answered its batch) or an append failed. Rules:
- flush: the runtime's pending records are appended and fsynced on the
  log's I/O thread, one batch at a time, in order; the leader role learns
  the new durable end (`on_local_durable`), which releases answers at the
  high watermark. A storage error is a disk failure of a replica
  (`actors.partition.recovery`), any other a failed append.
- timers: sleeps until the runtime's next deadline or a wake
  (`_timer_wake`), then polls the timers; records they wrote are flushed.
- topics: reads the topic registry when nudged (`topics_changed`) or every
  `topics_refresh_interval_s` (`actors.partition.topics_watch`), then the
  end offsets reported since the last read, for live lag
  (`actors.partition.ends_watch`).
- gauges: sets the partition's gauges every 2 s (Ray's metrics agent drops
  a gauge not refreshed within its TTL), its groups' live lag every
  `lag_metrics_interval_s` (`actors.core.metrics.LagMetrics`).
- maintenance: snapshots and compaction up to the high watermark on the
  maintenance thread, beside appends (`actors.partition.maintenance`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from actors.partition.lag_export import export_lag
from actors.partition.maintenance import MaintenanceProgress, maintain_once
from coordinator.records import Record
from coordinator.runtime import PartitionRuntime, RuntimeState

if TYPE_CHECKING:
    from actors.core.metrics import PartitionMetrics
    from actors.core.settings import ServiceSettings, SystemClock
    from actors.partition.ends_watch import EndsWatch
    from actors.partition.topics_watch import TopicsWatch
    from log.partition import PartitionLog

logger = logging.getLogger(__name__)
# Records per appended batch: bounds one batch's size after a burst.
MAX_BATCH_RECORDS = 50_000
GAUGE_INTERVAL_S = 2.0


class ServingLoops:
    """Mixin of `OffsetPartition`: the background loops of a serving partition (module docstring)."""

    # Provided by OffsetPartition, DiskRecovery and ReplicaRoles.
    partition: int
    epoch: int
    settings: ServiceSettings
    clock: SystemClock
    runtime: PartitionRuntime
    metrics: PartitionMetrics
    topics: TopicsWatch
    ends: EndsWatch
    log: PartitionLog | None
    leader: Any
    load_ms: float
    _io: Executor
    _maintenance: Executor
    _flush_wanted: asyncio.Event
    _timer_wake: asyncio.Event
    _timer_sleep_until: int | None
    _topics_wake: asyncio.Event
    _spawn: Callable[[Coroutine[Any, Any, None], str], None]
    _deliver: Callable[[Any], None]
    _after_requests: Callable[[], None]
    _storage_failed: Callable[[BaseException, str], bool]

    def _spawn_serving_loops(self) -> None:
        self._spawn(self._flush_loop(), "flush")
        self._spawn(self._timer_loop(), "timers")
        self._spawn(self._gauge_loop(), "gauges")
        self._spawn(self._maintenance_loop(), "maintenance")
        self._spawn(self._topics_loop(), "topics")

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        runtime = self.runtime
        while True:
            await self._flush_wanted.wait()
            self._flush_wanted.clear()
            if not runtime.has_pending:
                continue
            incarnation = runtime.incarnation
            batch = runtime.take_batch()
            started = time.perf_counter()
            try:
                durable_end = await loop.run_in_executor(self._io, self._append_and_sync, batch)
            except Exception as exc:
                logger.exception("partition %d: append failed", self.partition)
                if self._storage_failed(exc, "append"):
                    return
                self._deliver(runtime.on_append_failed(repr(exc)))
                return
            self.metrics.flush_ms.observe((time.perf_counter() - started) * 1000)
            # Read each round: a new epoch of this leader replaces it (`_relead`).
            leader = self.leader
            if leader is None:
                return  # deposed meanwhile: step_down answered the batch's requests
            leader.on_local_durable(durable_end, incarnation)

    def _append_and_sync(self, batch: list[Record]) -> int:
        log = self.log
        if log is None:
            raise RuntimeError("the log was closed under a pending append")
        now = self.clock.now_ms()
        for start in range(0, len(batch), MAX_BATCH_RECORDS):
            log.append(batch[start : start + MAX_BATCH_RECORDS], self.epoch, now)
        return log.sync()

    async def _timer_loop(self) -> None:
        runtime = self.runtime
        while runtime.state is RuntimeState.ACTIVE:
            deadline = runtime.next_deadline_ms()
            self._timer_sleep_until = deadline
            self._timer_wake.clear()
            timeout = None if deadline is None else max(0.0, (deadline - self.clock.now_ms()) / 1000)
            try:
                await asyncio.wait_for(self._timer_wake.wait(), timeout)
            except TimeoutError:
                pass
            self._deliver(runtime.poll_timers(self.clock.now_ms()))
            if runtime.has_pending:
                self._flush_wanted.set()
            if self.leader is not None:
                self.leader.wake_for_reads()

    async def topics_changed(self) -> None:
        """The topic registry's nudge: read the topics now (topics_watch)."""
        self._topics_wake.set()

    async def _topics_loop(self) -> None:
        """Read the topic registry when nudged or every interval; give the shard every newer view."""
        runtime = self.runtime
        while runtime.state is RuntimeState.ACTIVE:
            self._topics_wake.clear()
            if await self.topics.poll() and runtime.state is RuntimeState.ACTIVE:
                self._apply_topics(self.topics.counts, self.topics.ids)
            await self.ends.poll(runtime)
            try:
                await asyncio.wait_for(self._topics_wake.wait(), self.settings.topics_refresh_interval_s)
            except TimeoutError:
                pass

    def _apply_topics(self, counts: dict[str, int], ids: dict[str, Any]) -> None:
        self._deliver(self.runtime.update_topics(counts, ids, self.clock.now_ms()))
        self._after_requests()

    async def _gauge_loop(self) -> None:
        while self.runtime.state is RuntimeState.ACTIVE:
            shard = self.runtime.shard
            # Set again every time: Ray's metrics agent drops gauge values not refreshed within its TTL.
            self.metrics.load_time_ms.set(self.load_ms)
            self.metrics.groups.set(len(shard.groups) if shard else 0)
            self.metrics.members.set(shard.member_count() if shard else 0)
            if self.leader is not None:
                self.metrics.set_replication(self.leader.describe())
            self.metrics.flush_counts()
            settings = self.settings
            lag = self.metrics.lag(settings.lag_metrics_interval_s, settings.lag_metrics_partitions_max)
            if shard is not None and lag.due(time.monotonic()):
                await export_lag(shard.lag, lag, self.clock.now_ms())
            await asyncio.sleep(GAUGE_INTERVAL_S)

    async def _maintenance_loop(self) -> None:
        """The leader's log maintenance (`actors.partition.maintenance`) up to the high
        watermark, while it serves; a failed round fails the partition, which reloads."""
        runtime = self.runtime
        progress = MaintenanceProgress(runtime.durable_end)
        while runtime.state is RuntimeState.ACTIVE:
            await asyncio.sleep(self.settings.maintenance_interval_s)
            log = self.log
            if log is None or runtime.state is not RuntimeState.ACTIVE:
                return
            await maintain_once(
                log, runtime.durable_end, progress, self.settings, self._maintenance, self.clock.now_ms
            )
