"""What the parts of an offsets partition actor share: `PartitionHost`.

The actor (`actors.partition.actor`) is built from parts, each owning its own
state; this object holds the few things every part truly shares, and nothing
that belongs to one part:
- who and where: `partition`, `epoch` (the newest leader epoch this replica
  knows), `settings`, `clock`, `replica_id`, `directory()`;
- what serves: `runtime` (the core's `PartitionRuntime`, replaced when a
  standby is promoted or a new leadership starts afresh), `log` (the open
  `PartitionLog`, None while none is open), `metrics`, `new_shard()`;
- the I/O threads: `io` (appends, fsyncs, opening and closing of the log, in
  order: `on_io`, `open_on_io`) and `maintenance` (snapshots, compaction);
- `heap`: the free heap given back once the replica settles (`actors.core.heap`:
  after its start, a load or a promotion, the start of following);
- `gc`: the replica's state kept out of the cyclic collector's full
  collections as it grows (`actors.partition.gc_freeze`);
- the task supervisor: `spawn` starts a supervised task (one that raises is a
  failure of the partition, never a silent end), `cancel_tasks` cancels every
  task but the caller's and the ones a part declared to survive
  (`survive_cancel`: the disk's recovery), `stop_tasks` all of them;
- `deliver`: answers the responses the runtime released, and on a failure the
  runtime took in calls the `on_failure` hook (the loader's reload).

Two hooks are wired by the actor once its parts exist (`wire`):
`on_failure` (the runtime failed: recover) and `storage_failed` (is this
exception a disk failure, taken by the disk part?).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from actors.core.heap import HeapSettler
from actors.core.metrics import PartitionMetrics
from actors.core.node_names import current_node_name
from actors.core.settings import ServiceSettings, SystemClock, partition_dir
from actors.partition.gc_freeze import GcFreezer
from coordinator import Shard
from coordinator.runtime import PartitionRuntime, RuntimeState
from log import replica_dir
from log.partition import PartitionLog

logger = logging.getLogger(__name__)
# What an open on the I/O thread returns: the opened log (or None) first.
OpenedLog = TypeVar("OpenedLog", bound=tuple[Any, ...])


class PartitionHost:
    """The shared state and services of one partition actor's parts (module docstring)."""

    def __init__(self, partition: int, epoch: int, settings: ServiceSettings, node_id: str | None) -> None:
        self.partition = partition
        self.epoch = epoch
        self.settings = settings
        self.clock = SystemClock()
        self.runtime = PartitionRuntime(partition)
        self.metrics = PartitionMetrics(partition)
        self.log: PartitionLog | None = None
        # One thread: appends, fsyncs, opening and closing of this partition's log stay in order.
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offsets-log")
        # Snapshots and compaction run beside appends, never in front of them.
        self.maintenance = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offsets-maintenance")
        # Free heap back to the system once the replica settles (`actors.core.heap`).
        self.heap = HeapSettler()
        # Its state frozen out of full collections as its log grows (`actors.partition.gc_freeze`).
        self.gc = GcFreezer(self.records)
        self.tasks: set[asyncio.Task[None]] = set()
        # The runtime's failure count last acted on (`deliver`).
        self.failures_seen = 0
        self._node_id = node_id
        self._survivors: set[str] = set()
        self._on_failure: Callable[[], None] = _unwired
        self._storage_failed: Callable[[BaseException, str], bool] = lambda exc, where: False

    def wire(
        self, on_failure: Callable[[], None], storage_failed: Callable[[BaseException, str], bool]
    ) -> None:
        self._on_failure, self._storage_failed = on_failure, storage_failed

    def assume(self, partition: int, epoch: int) -> None:
        """A standby becomes partition `partition`'s replica at `epoch`."""
        self.partition, self.epoch = partition, epoch
        self.runtime = PartitionRuntime(partition)
        self.metrics = PartitionMetrics(partition)

    # ---------------------------------------------------------- identity

    @property
    def replica_id(self) -> str:
        """This replica's id in ISR lists: its node's name (`actors.core.node_names`; Kafka's broker id)."""
        if self._node_id is None:
            self._node_id = current_node_name()
        return self._node_id

    @property
    def replicated(self) -> bool:
        return bool(self.settings.replication_factor > 1)

    def directory(self) -> str:
        if self.settings.replication_factor > 1:
            return replica_dir(self.settings.data_dir, self.replica_id, self.partition)
        return partition_dir(self.settings.data_dir, self.partition)

    def records(self) -> int:
        """The open log's end offset (0 without one): the freezer's proxy for the state's size."""
        return 0 if self.log is None else self.log.log_end_offset

    def new_shard(self) -> Shard:
        seed = int.from_bytes(os.urandom(8))
        return Shard(self.settings.coordinator, partition=self.partition, member_id_seed=seed)

    # ------------------------------------------------------------ answers

    def deliver(self, released: Iterable[tuple[Any, Any]]) -> None:
        """Answer released requests; then act on a failure the runtime just took in."""
        metrics, now = self.metrics, time.perf_counter()  # one clock read for what is released together
        for waiter, response in released:
            metrics.observe(waiter.kind, response, waiter.started, now)
            waiter.deliver(response)
        runtime = self.runtime
        if runtime.rebalances:
            metrics.rebalanced(runtime.rebalances)
            runtime.rebalances.clear()
        if runtime.failures != self.failures_seen and runtime.state is RuntimeState.FAILED:
            self._on_failure()

    def storage_failed(self, exc: BaseException, where: str) -> bool:
        """True if `exc` was taken as a disk failure (the caller stops); False if the
        caller goes on with the runtime's failure path (`actors.partition.recovery`)."""
        return self._storage_failed(exc, where)

    # ---------------------------------------------------------------- I/O

    async def on_io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.io, fn, *args)

    async def open_on_io(self, open_log: Callable[[], OpenedLog]) -> OpenedLog:
        """`open_log()` on the I/O thread; its result's first item is the opened log (or None).
        An open log holds its directory's lock: a task cancelled while its log is being
        opened (a load overtaken by a role change) waits for the open, closes that log
        and only then ends, so whoever awaits its end can open the log itself."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.io, open_log)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            try:
                log = (await future)[0]
            except Exception:
                raise asyncio.CancelledError from None  # nothing was opened
            if log is not None:
                await loop.run_in_executor(self.io, log.close)
            raise

    # -------------------------------------------------------------- tasks

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(self._supervised(coro, name), name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        # A task cancelled before it ran never started `coro`: close it quietly.
        task.add_done_callback(lambda _: coro.close())

    async def _supervised(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """A task that raises fails the partition (logged, counted), which then reloads."""
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("partition %d: the %s task failed", self.partition, name)
            self.metrics.task_failed(name)
            if self.storage_failed(exc, f"the {name} task"):
                return
            self.deliver(self.runtime.on_task_failed(f"the {name} task failed: {exc!r}"))

    def running(self, name: str) -> bool:
        return any(t.get_name() == name and not t.done() for t in self.tasks)

    def survive_cancel(self, name: str) -> None:
        """Tasks named `name` survive `cancel_tasks` (a role change, a reload)."""
        self._survivors.add(name)

    def cancel_tasks(self) -> None:
        """Cancel every task but the caller's and the survivors: a role change or a reload
        while the disk is failed must never end the only task that brings it back."""
        current = asyncio.current_task()
        for task in list(self.tasks):
            if task is not current and task.get_name() not in self._survivors:
                task.cancel()

    async def stop_tasks(self, name: str | None = None) -> None:
        """Cancel every task but the caller's (only those named `name`, if given) and wait for their end."""
        current = asyncio.current_task()
        tasks = [t for t in self.tasks if t is not current and (name is None or t.get_name() == name)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _unwired() -> None:
    raise RuntimeError("PartitionHost.wire was not called")
