"""OffsetPartition: the Ray actor that owns one offsets partition.

It holds a `coordinator.Shard`, the partition's `log.PartitionLog`, a timer
task that drives `Shard.poll_timers`, and a flush task that makes appended
records durable. Lifecycle, as Kafka's coordinator runtime:
INITIAL -> LOADING -> ACTIVE -> CLOSED, and FAILED -> LOADING when an append
fails or the shard breaks an invariant.

Write path (one rule): the shard decides and applies in memory; its records
join the pending batch; a response is released only when every record it
could have observed is durable. The flush task appends everything pending as
one batch and fsyncs it while new records gather for the next one (group
commit). If an append fails, every waiting response becomes NOT_COORDINATOR
and the shard is reloaded from the log, which holds only durable records.

Nothing here decides protocol behaviour: requests go into the core, results
come out of it.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from functools import partial
from typing import Any

from actors.metrics import PartitionMetrics
from actors.settings import ServiceSettings, SystemClock, partition_dir
from actors.wire import dumps_response
from coordinator import CoordinatorStatus, Errors, Result, Shard, precheck
from coordinator.messages import Request
from coordinator.status import error_response
from log.compaction import compact
from log.epoch import read_leader_epoch
from log.errors import FencedEpochError
from log.loader import load_into
from log.partition import PartitionLog
from log.snapshot import write_snapshot

logger = logging.getLogger(__name__)
# Records per appended batch: bounds one batch's size after a burst.
MAX_BATCH_RECORDS = 50_000
GC_YOUNG_THRESHOLD = 20_000
NOOP_RESPONSE = dumps_response(None)


class PartitionState(Enum):
    INITIAL = "INITIAL"
    LOADING = "LOADING"
    ACTIVE = "ACTIVE"
    FAILED = "FAILED"
    CLOSED = "CLOSED"


STATUS_BY_STATE = {
    PartitionState.INITIAL: CoordinatorStatus.LOADING,
    PartitionState.LOADING: CoordinatorStatus.LOADING,
    PartitionState.FAILED: CoordinatorStatus.LOADING,
    PartitionState.ACTIVE: CoordinatorStatus.ACTIVE,
    PartitionState.CLOSED: CoordinatorStatus.NOT_COORDINATOR,
}


class OffsetPartition:
    """One offsets partition, or a standby (`partition` None) waiting to take one over.

    A standby is a started process with everything imported: the controller
    promotes it with `assume(partition, epoch)` on failover, which saves the
    seconds a new actor process takes to start.
    """

    def __init__(self, partition: int | None, epoch: int, settings: ServiceSettings) -> None:
        logging.basicConfig(level=logging.INFO)
        # The actor owns its process. A commit of 100 partitions allocates
        # some 500 tuples, nearly all freed by reference counting; with
        # CPython's default threshold (700) the cyclic collector would run
        # after every other commit and cost it a third of its time (measured).
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        self.partition = -1 if partition is None else partition
        self.epoch = epoch
        self.settings = settings
        self.clock = SystemClock()
        self.state = PartitionState.INITIAL
        self.shard: Shard | None = None
        self.log: PartitionLog | None = None
        self.load_ms = 0.0
        self.loaded_records = 0
        self._tokens = itertools.count()
        # token -> the request's waiter, until its response is released.
        self._waiters: dict[int, _Waiter] = {}
        # (barrier offset, token, response): responses held until durable, in offset order.
        self._waiting: deque[tuple[int, int, Any]] = deque()
        self._pending: list[Any] = []
        self._written_end = 0
        self._durable_end = 0
        self._flush_wanted: asyncio.Event | None = None
        self._timer_wake: asyncio.Event | None = None
        self._timer_sleep_until: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # One thread: appends and fsyncs of this partition stay in order.
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offsets-log")
        # Snapshots and compaction run beside appends, never in front of them.
        self._maintenance = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offsets-maintenance")
        self.metrics = PartitionMetrics(self.partition)

    # ------------------------------------------------------------ lifecycle

    async def assume(self, partition: int, epoch: int) -> str:
        """Promote a standby: become the leader of `partition` at `epoch` and load it."""
        if self.partition >= 0:
            raise RuntimeError(f"already the leader of partition {self.partition}")
        self.partition, self.epoch = partition, epoch
        self.metrics = PartitionMetrics(partition)
        return await self.activate()

    async def activate(self) -> str:
        """Start loading the partition; returns at once (state LOADING)."""
        if self.state is PartitionState.INITIAL and self.partition >= 0:
            self._flush_wanted = asyncio.Event()
            self._timer_wake = asyncio.Event()
            self._spawn(self._load())
        return self.state.value

    async def wait_active(self, timeout_s: float = 60.0) -> str:
        deadline = time.monotonic() + timeout_s
        while self.state in (PartitionState.INITIAL, PartitionState.LOADING, PartitionState.FAILED):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        return self.state.value

    async def _load(self) -> None:
        self.state = PartitionState.LOADING
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        try:
            self.log, self.shard, self.loaded_records = await loop.run_in_executor(
                self._io, self._open_and_replay
            )
        except FencedEpochError:
            # A newer leader owns the partition: this one never serves.
            logger.warning("partition %d: epoch %d is fenced", self.partition, self.epoch)
            self.state = PartitionState.CLOSED
            return
        except Exception:
            logger.exception("partition %d: load failed", self.partition)
            self.state = PartitionState.FAILED
            await asyncio.sleep(1.0)
            self._spawn(self._load())
            return
        self._written_end = self._durable_end = self.log.high_watermark
        # What was loaded lives long: keep the collector from scanning it again.
        gc.freeze()
        self.load_ms = (time.perf_counter() - started) * 1000
        self.state = PartitionState.ACTIVE
        logger.info(
            "partition %d epoch %d: loaded %d records in %.0f ms",
            self.partition,
            self.epoch,
            self.loaded_records,
            self.load_ms,
        )
        self._apply(self.shard.on_loaded(self.clock.now_ms()))
        self._spawn(self._flush_loop())
        self._spawn(self._timer_loop())
        self._spawn(self._gauge_loop())
        self._spawn(self._maintenance_loop())

    def _open_and_replay(self) -> tuple[PartitionLog, Shard, int]:
        directory = partition_dir(self.settings.data_dir, self.partition)
        if os.path.isdir(directory) and read_leader_epoch(directory) > self.epoch:
            # Checked before waiting for the directory lock the leader holds.
            raise FencedEpochError(self.epoch, read_leader_epoch(directory))
        log = PartitionLog.open(directory, self.epoch, self.settings.log)
        shard = Shard(
            self.settings.coordinator, partition=self.partition, member_id_seed=int.from_bytes(os.urandom(8))
        )
        stats = load_into(shard, log)
        return log, shard, stats.records

    async def unload(self, epoch: int) -> str:
        """Emigration: answer everything NOT_COORDINATOR, stop timers, close the log."""
        if epoch < self.epoch:
            return self.state.value
        if self.shard is not None and self.state is PartitionState.ACTIVE:
            self._apply(self.shard.unload(self.clock.now_ms()))
        self.state = PartitionState.CLOSED
        await self._drain()
        for task in self._tasks:
            task.cancel()
        self._answer_all(Errors.NOT_COORDINATOR)
        self.metrics.flush_counts()
        if self.log is not None:
            await asyncio.get_running_loop().run_in_executor(self._io, self.log.close)
        return self.state.value

    async def _drain(self) -> None:
        """Wait until what was appended before now is durable (or failed)."""
        target = self._written_end
        while (
            self._durable_end < target and self.state is not PartitionState.FAILED and self._pending_flush()
        ):
            await asyncio.sleep(0.001)

    def _pending_flush(self) -> bool:
        return any(not t.done() for t in self._tasks)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.append(task)
        self._tasks = [t for t in self._tasks if not t.done() or t is task]

    # -------------------------------------------------------------- requests

    async def handle(self, request: Request) -> Any:
        """One group protocol request; parked requests wait here for their answer."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._submit(request, partial(_resolve, future))
        self._maybe_wake_timers()
        return await future

    async def handle_wire(self, request: Request) -> bytes:
        """`handle` with the response pickled, as the client calls it: Ray
        returns bytes for about 170 us less CPU per call than an object
        (its cloudpickle path), measured on both sides together."""
        return dumps_response(await self.handle(request))

    async def handle_batch(self, requests: list[Request]) -> AsyncIterator[bytes]:
        """Many requests in one Ray call (the client's coalescing): a streaming
        generator of pickled `(index, response)` lists, each yielded as soon as
        its responses are released, so a parked request holds back no other."""
        released: list[tuple[int, Any]] = []
        wake = asyncio.Event()

        def deliver(index: int, response: Any) -> None:
            released.append((index, response))
            wake.set()

        for index, request in enumerate(requests):
            self._submit(request, partial(deliver, index))
        self._maybe_wake_timers()
        unanswered = len(requests)
        while unanswered:
            await wake.wait()
            wake.clear()
            answered = released.copy()
            released.clear()
            unanswered -= len(answered)
            yield dumps_response(answered)

    def _submit(self, request: Request, deliver: Callable[[Any], None]) -> None:
        """Hand a request to the shard; `deliver` gets its response once it is
        released (and durable). No future, task or callback per request:
        a batch of requests costs little more than its shard work."""
        waiter = _Waiter(request, deliver, time.perf_counter())
        # Active, the shard checks the group id itself, first, as the precheck would.
        if self.state is not PartitionState.ACTIVE:
            early = precheck(request, STATUS_BY_STATE[self.state])
            if early is not None:
                self._answer(waiter, early)
                return
        assert self.shard is not None
        token = next(self._tokens)
        self._waiters[token] = waiter
        try:
            result = self.shard.handle(request, self.clock.now_ms(), token)
        except Exception:
            logger.exception("partition %d: shard broke an invariant on %s", self.partition, waiter.kind)
            self._fail_and_reload()
            return
        self._apply(result)

    def _answer(self, waiter: _Waiter, response: Any) -> None:
        self.metrics.observe(waiter.kind, response, waiter.started)
        waiter.deliver(response)

    def _apply(self, result: Result) -> None:
        """Queue a Result's records and hold its responses until they are durable."""
        if result.records:
            self._pending.extend(result.records)
            self._written_end += len(result.records)
            assert self._flush_wanted is not None
            self._flush_wanted.set()
        if result.rebalances:
            self.metrics.rebalanced(result.rebalances)
        barrier = self._written_end
        for token, response in result.responses:
            if barrier <= self._durable_end:
                self._release(token, response)
            else:
                self._waiting.append((barrier, token, response))

    def _release(self, token: int, response: Any) -> None:
        waiter = self._waiters.pop(token, None)
        if waiter is not None:
            self._answer(waiter, response)

    # ------------------------------------------------------------ background

    async def _flush_loop(self) -> None:
        assert self._flush_wanted is not None and self.log is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._flush_wanted.wait()
            self._flush_wanted.clear()
            batch, self._pending = self._pending, []
            if not batch:
                continue
            started = time.perf_counter()
            try:
                self._durable_end = await loop.run_in_executor(self._io, self._append_and_sync, batch)
            except Exception:
                logger.exception("partition %d: append failed", self.partition)
                self._fail_and_reload()
                return
            self.metrics.flush_ms.observe((time.perf_counter() - started) * 1000)
            waiting = self._waiting
            while waiting and waiting[0][0] <= self._durable_end:
                _, token, response = waiting.popleft()
                self._release(token, response)

    def _append_and_sync(self, batch: list[Any]) -> int:
        assert self.log is not None
        now = self.clock.now_ms()
        for start in range(0, len(batch), MAX_BATCH_RECORDS):
            self.log.append(batch[start : start + MAX_BATCH_RECORDS], self.epoch, now)
        return self.log.sync()

    async def _timer_loop(self) -> None:
        assert self._timer_wake is not None and self.shard is not None
        while True:
            deadline = self.shard.next_deadline_ms()
            self._timer_sleep_until = deadline
            self._timer_wake.clear()
            timeout = None if deadline is None else max(0.0, (deadline - self.clock.now_ms()) / 1000)
            try:
                await asyncio.wait_for(self._timer_wake.wait(), timeout)
            except TimeoutError:
                pass
            if self.state is not PartitionState.ACTIVE:
                return
            for result in self.shard.poll_timers(self.clock.now_ms()):
                self._apply(result)

    async def _gauge_loop(self, interval_s: float = 2.0) -> None:
        while self.state is PartitionState.ACTIVE and self.shard is not None:
            # Set again every time: Ray's metrics agent drops gauge values not refreshed within its TTL.
            self.metrics.load_time_ms.set(self.load_ms)
            self.metrics.groups.set(len(self.shard.groups))
            self.metrics.members.set(self.shard.member_count())
            self.metrics.flush_counts()
            await asyncio.sleep(interval_s)

    async def _maintenance_loop(self) -> None:
        """Snapshot and compact the log in the background, so that a failover
        loads live state rather than history (see log/snapshot.py)."""
        loop = asyncio.get_running_loop()
        snapshot_at = self._durable_end
        last_compaction = time.monotonic()
        while self.state is PartitionState.ACTIVE and self.log is not None:
            await asyncio.sleep(self.settings.maintenance_interval_s)
            log = self.log
            if log is None or self.state is not PartitionState.ACTIVE:
                return
            try:
                if self._durable_end - snapshot_at >= self.settings.snapshot_every_records:
                    snapshot_at = self._durable_end
                    await loop.run_in_executor(self._maintenance, write_snapshot, log, self.clock.now_ms())
                if time.monotonic() - last_compaction >= self.settings.compaction_interval_s:
                    last_compaction = time.monotonic()
                    await loop.run_in_executor(self._maintenance, compact, log, self.clock.now_ms())
            except Exception:
                logger.exception("partition %d: log maintenance failed", self.partition)

    def _maybe_wake_timers(self) -> None:
        """Wake the timer task if the shard's next deadline moved earlier
        (once per call, after its requests reached the shard)."""
        if self._timer_wake is None or self.shard is None:
            return
        deadline = self.shard.next_deadline_ms()
        if deadline is not None and (self._timer_sleep_until is None or deadline < self._timer_sleep_until):
            self._timer_wake.set()

    # --------------------------------------------------------------- failure

    def _answer_all(self, error: Errors) -> None:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            self._answer(waiter, error_response(waiter.request, error))
        self._waiting.clear()
        self._pending.clear()

    def _fail_and_reload(self) -> None:
        """FAILED -> LOADING: only durable records survive, as in Kafka's runtime."""
        if self.state in (PartitionState.FAILED, PartitionState.CLOSED):
            return
        self.state = PartitionState.FAILED
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._answer_all(Errors.NOT_COORDINATOR)
        log, self.log, self.shard = self.log, None, None
        if log is not None:
            try:
                log.close()
            except Exception:
                logger.exception("partition %d: closing the failed log", self.partition)
        self._spawn(self._load())

    # ----------------------------------------------------------- inspection

    async def info(self) -> dict[str, Any]:
        shard = self.shard
        return {
            "partition": self.partition,
            "epoch": self.epoch,
            "state": self.state.value,
            "groups": len(shard.groups) if shard else 0,
            "members": shard.member_count() if shard else 0,
            "durable_end": self._durable_end,
            "load_ms": round(self.load_ms, 1),
            "loaded_records": self.loaded_records,
            "node_id": _node_id(),
            "pid": os.getpid(),
        }

    async def ping(self) -> int:
        return self.epoch

    async def noop(self, request: Any = None) -> bytes:
        """A do-nothing call: the baseline of the actor benchmark (its answer
        travels as `handle_wire`'s does, as bytes)."""
        return NOOP_RESPONSE

    async def noop_batch(self, requests: list[Any]) -> AsyncIterator[bytes]:
        """`noop` for a coalesced batch: the baseline of coalesced calls."""
        yield dumps_response([(index, None) for index in range(len(requests))])


class _Waiter:
    """A request in the partition until its response is released."""

    __slots__ = ("request", "deliver", "started", "kind")

    def __init__(self, request: Request, deliver: Callable[[Any], None], started: float) -> None:
        self.request = request
        self.deliver = deliver
        self.started = started
        self.kind = type(request).__name__


def _resolve(future: asyncio.Future[Any], response: Any) -> None:
    if not future.done():  # the caller may have gone (cancelled)
        future.set_result(response)


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()
