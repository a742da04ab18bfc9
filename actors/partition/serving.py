"""The loops a loaded partition runs while it serves: flush, timers, topics, gauges, maintenance.

`ServingLoops` is a part of `OffsetPartition` (`actors.partition.actor`). It
owns the loops' wake-ups (`flush_wanted`, `timer_wake`, the timers' next
deadline, the topics' nudge) and the topic registry's view (`topics`); it
reads the leader role through `LeaderHolder` and the rest through the host
(`actors.partition.host`). `spawn_loops` starts the loops once a load is
done, each a supervised task (`PartitionHost.spawn`: one that raises fails
the partition, which reloads); `after_requests` wakes them after requests. Each runs until the
partition cancels it (a failure, an unload); all but flush also stop when
the runtime leaves ACTIVE, and flush when the leader role is gone (a
step-down answered its batch) or an append failed. Rules:
- flush: the runtime's pending records are appended and fsynced on the
  log's I/O thread, one batch at a time, in order; the leader role learns
  the new durable end (`on_local_durable`), which releases answers at the
  high watermark. A storage error is a disk failure of a replica
  (`actors.partition.recovery`), any other a failed append.
- timers: sleeps until the runtime's next deadline or a wake
  (`timer_wake`), then polls the timers; records they wrote are flushed.
- topics: reads the topic registry when nudged (`topics_changed`) or every
  `topics_refresh_interval_s` (`actors.partition.topics_watch`), then the
  end offsets reported since the last read, for live lag
  (`actors.partition.ends_watch`), then the settings changed online
  (`actors.core.settings_watch`).
- gauges: sets the partition's gauges every 2 s (Ray's metrics agent drops
  a gauge not refreshed within its TTL), its groups' live lag every
  `lag_metrics_interval_s` (`actors.core.metrics.LagMetrics`), and freezes
  the grown state out of full collections (`actors.partition.gc_freeze`).
- maintenance: snapshots and compaction up to the high watermark on the
  maintenance thread, beside appends (`actors.partition.maintenance`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from actors.core.settings_watch import SettingsWatch
from actors.partition.ends_watch import EndsWatch
from actors.partition.lag_export import export_lag
from actors.partition.maintenance import MaintenanceProgress, maintain_once
from actors.partition.topics_watch import TopicsWatch
from coordinator import Shard
from coordinator.records import Record
from coordinator.runtime import RuntimeState

if TYPE_CHECKING:
    from actors.core.settings import ServiceSettings
    from actors.partition.host import PartitionHost
    from actors.partition.leader import LeaderReplication

logger = logging.getLogger(__name__)
# Records per appended batch: bounds one batch's size after a burst.
MAX_BATCH_RECORDS = 50_000
GAUGE_INTERVAL_S = 2.0


class LeaderHolder(Protocol):
    """Where the serving loops find the leader role (`actors.partition.roles.ReplicaRoles`)."""

    leader: LeaderReplication | None


class LoadStats(Protocol):
    """What the gauges report of the last load (`actors.partition.loading.PartitionLoader`)."""

    load_ms: float


class ServingLoops:
    """The background loops of a serving partition (module docstring)."""

    def __init__(self, host: PartitionHost, roles: LeaderHolder, loaded: LoadStats) -> None:
        self.host = host
        self._roles = roles
        self._loaded = loaded
        self.flush_wanted = asyncio.Event()
        self.timer_wake = asyncio.Event()
        self._timer_sleep_until: int | None = None
        # The topics the shard's consumer groups see (`actors.partition.topics_watch`).
        self.topics = TopicsWatch(host.settings.namespace)
        self.ends = EndsWatch(self.topics)  # end offsets for live lag (`actors.partition.ends_watch`)
        self._topics_wake = asyncio.Event()
        # Settings changed online (`actors.core.settings_watch`), and who else takes them.
        self.settings = SettingsWatch(host.settings)
        self.settings_listeners: list[Callable[[ServiceSettings], None]] = []

    def spawn_loops(self) -> None:
        spawn = self.host.spawn
        spawn(self._flush_loop(), "flush")
        spawn(self._timer_loop(), "timers")
        spawn(self._gauge_loop(), "gauges")
        spawn(self._maintenance_loop(), "maintenance")
        spawn(self._topics_loop(), "topics")

    def after_requests(self) -> None:
        """Once per call: start a flush if records wait, and wake the timer
        task if the shard's next deadline moved earlier."""
        runtime = self.host.runtime
        if runtime.has_pending:
            self.flush_wanted.set()
        leader = self._roles.leader
        if leader is not None:
            leader.wake_for_reads()
        deadline = runtime.next_deadline_ms()
        if deadline is not None and (self._timer_sleep_until is None or deadline < self._timer_sleep_until):
            self.timer_wake.set()

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        host = self.host
        runtime = host.runtime
        while True:
            await self.flush_wanted.wait()
            self.flush_wanted.clear()
            if not runtime.has_pending:
                continue
            incarnation = runtime.incarnation
            batch = runtime.take_batch()
            started = time.perf_counter()
            try:
                durable_end = await loop.run_in_executor(host.io, self.append_and_sync, batch)
            except Exception as exc:
                logger.exception("partition %d: append failed", host.partition)
                if host.storage_failed(exc, "append"):
                    return
                host.deliver(runtime.on_append_failed(repr(exc)))
                return
            host.metrics.flush_ms.observe((time.perf_counter() - started) * 1000)
            # Read each round: a new epoch of this leader replaces it (`ReplicaRoles._relead`).
            leader = self._roles.leader
            if leader is None:
                return  # deposed meanwhile: step_down answered the batch's requests
            leader.on_local_durable(durable_end, incarnation)

    def append_and_sync(self, batch: list[Record]) -> int:
        """On the I/O thread: append `batch` at the current epoch, fsync; the durable end."""
        host = self.host
        log = host.log
        if log is None:
            raise RuntimeError("the log was closed under a pending append")
        now = host.clock.now_ms()
        for start in range(0, len(batch), MAX_BATCH_RECORDS):
            log.append(batch[start : start + MAX_BATCH_RECORDS], host.epoch, now)
        return log.sync()

    async def _timer_loop(self) -> None:
        host = self.host
        runtime = host.runtime
        while runtime.state is RuntimeState.ACTIVE:
            deadline = runtime.next_deadline_ms()
            self._timer_sleep_until = deadline
            self.timer_wake.clear()
            timeout = None if deadline is None else max(0.0, (deadline - host.clock.now_ms()) / 1000)
            try:
                await asyncio.wait_for(self.timer_wake.wait(), timeout)
            except TimeoutError:
                pass
            host.deliver(runtime.poll_timers(host.clock.now_ms()))
            if runtime.has_pending:
                self.flush_wanted.set()
            leader = self._roles.leader
            if leader is not None:
                leader.wake_for_reads()

    def topics_changed(self) -> None:
        """The topic registry's nudge: read the topics now (topics_watch)."""
        self._topics_wake.set()

    def apply_load_view(self, shard: Shard) -> None:
        """Right after a load: the topics the log names merged with the last view
        (`TopicsWatch.view_for_load`); the next poll asks for the whole view."""
        self._apply_topics(*self.topics.view_for_load(shard))
        self.topics.reset()
        self.ends.reset()

    async def _topics_loop(self) -> None:
        """Read the topic registry when nudged or every interval; give the shard every newer view."""
        runtime = self.host.runtime
        while runtime.state is RuntimeState.ACTIVE:
            self._topics_wake.clear()
            if await self.topics.poll() and runtime.state is RuntimeState.ACTIVE:
                self._apply_topics(self.topics.counts, self.topics.ids)
            self.host.deliver(await self.ends.poll(runtime, self.host.clock.now_ms))
            changed = await self.settings.poll(self.topics.registry)
            if changed is not None:
                self.apply_settings(changed)
            try:
                await asyncio.wait_for(self._topics_wake.wait(), self.host.settings.topics_refresh_interval_s)
            except TimeoutError:
                pass

    def apply_settings(self, settings: ServiceSettings) -> None:
        """Settings changed online take effect: the loops and the next load read the host's,
        the shard's handlers its config, and each listener gets them."""
        host = self.host
        host.settings = settings
        shard = host.runtime.shard
        if shard is not None:
            shard.config = settings.coordinator
        for listener in self.settings_listeners:
            listener(settings)
        logger.info("partition %d: settings changed online: %s", host.partition, self.settings.overrides)

    def _apply_topics(self, counts: dict[str, int], ids: dict[str, Any]) -> None:
        host = self.host
        host.deliver(host.runtime.update_topics(counts, ids, host.clock.now_ms()))
        self.after_requests()

    async def _gauge_loop(self) -> None:
        host = self.host
        while host.runtime.state is RuntimeState.ACTIVE:
            metrics, shard = host.metrics, host.runtime.shard
            # Set again every time: Ray's metrics agent drops gauge values not refreshed within its TTL.
            metrics.load_time_ms.set(self._loaded.load_ms)
            metrics.groups.set(len(shard.groups) if shard else 0)
            metrics.members.set(shard.member_count() if shard else 0)
            leader = self._roles.leader
            if leader is not None:
                metrics.set_replication(leader.describe())
            metrics.flush_counts()
            host.gc.tick()  # off the request path: freeze the state once it grew enough
            s = host.settings
            lag = metrics.lag(
                s.lag_metrics_interval_s, s.lag_metrics_partitions_max, s.lag_metrics_groups_max
            )
            if shard is not None and lag.due(time.monotonic()):
                await export_lag(shard.lag, lag, host.clock.now_ms())
            await asyncio.sleep(GAUGE_INTERVAL_S)

    async def _maintenance_loop(self) -> None:
        """The leader's log maintenance (`actors.partition.maintenance`) up to the high
        watermark, while it serves; a failed round fails the partition, which reloads."""
        host = self.host
        runtime = host.runtime
        progress = MaintenanceProgress(runtime.durable_end)
        while runtime.state is RuntimeState.ACTIVE:
            await asyncio.sleep(host.settings.maintenance_interval_s)
            log = host.log
            if log is None or runtime.state is not RuntimeState.ACTIVE:
                return
            await maintain_once(
                log, runtime.durable_end, progress, host.settings, host.maintenance, host.clock.now_ms
            )
