"""GroupCommitter: durable appends for coroutines, one fsync for many batches.

Owns the asyncio side of durability for one `PartitionLog`. Rules:
- `append` writes the batch at once on the event loop (page cache only, a
  few microseconds) and then waits until the high watermark passes it.
- At most one `sync` runs at a time, in a worker thread, so the event loop
  never blocks on an fsync. Every batch appended while a sync runs is
  covered by the next one: under load, one fsync covers many batches.
- If a sync fails, every waiter gets the error (the log is failed and must
  be reopened); nothing is acknowledged that is not durable.
- Not thread-safe: use it from one event loop, the one the owning actor
  runs on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from coordinator.records import Record
from log.partition import PartitionLog


class GroupCommitter:
    """Durable appends to one PartitionLog from many coroutines."""

    def __init__(self, log: PartitionLog, executor: Executor | None = None) -> None:
        self.log = log
        # A private thread by default: fsyncs must not queue behind other
        # work in the loop's shared default executor.
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-fsync")
        self._waiters: list[tuple[int, asyncio.Future[int]]] = []
        self._task: asyncio.Task[None] | None = None
        self.syncs = 0

    async def append(
        self, records: Sequence[Record], leader_epoch: int, timestamp_ms: int
    ) -> tuple[int, int]:
        """Append one batch and return (base offset, next offset) once it is durable."""
        base_offset, next_offset = self.log.append(records, leader_epoch, timestamp_ms)
        await self.wait_durable(next_offset)
        return base_offset, next_offset

    async def wait_durable(self, offset: int) -> int:
        """Wait until every record below `offset` is durable; returns the high watermark."""
        if offset <= self.log.high_watermark:
            return self.log.high_watermark
        if offset > self.log.log_end_offset:
            raise ValueError(f"offset {offset} is past the log end {self.log.log_end_offset}")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._waiters.append((offset, future))
        if self._task is None:
            self._task = loop.create_task(self._sync_until_drained())
        return await future

    async def flush(self) -> int:
        """Make everything appended so far durable."""
        return await self.wait_durable(self.log.log_end_offset)

    async def close(self) -> None:
        """Wait for the sync in flight, then release the private thread."""
        if self._task is not None:
            await asyncio.shield(self._task)
        if self._own_executor:
            self._executor.shutdown(wait=True)

    async def _sync_until_drained(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiters:
                try:
                    high_watermark = await loop.run_in_executor(self._executor, self.log.sync)
                except Exception as exc:
                    self._fail_all(exc)
                    return
                self.syncs += 1
                self._release_up_to(high_watermark)
        finally:
            self._task = None

    def _release_up_to(self, high_watermark: int) -> None:
        waiting = []
        for offset, future in self._waiters:
            if offset > high_watermark:
                waiting.append((offset, future))
            elif not future.done():
                future.set_result(high_watermark)
        self._waiters = waiting

    def _fail_all(self, exc: Exception) -> None:
        waiters, self._waiters = self._waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(exc)
