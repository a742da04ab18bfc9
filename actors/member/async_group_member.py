"""AsyncGroupMember: GroupMember for asyncio code, such as async Ray actors.

The same constructor and decisions as `group_member.GroupMember` (`loop`),
driven by an asyncio task on the running loop with the client's `*_async`
methods, so the member never blocks the event loop. The I/O methods
(`start`, `wait_for_assignment`, `commit`, `committed`, `close`) are
coroutines; `assignment()` and `poll()` only read state and stay plain.
Listeners may be plain functions or coroutine functions; they run in the
member's task, and heartbeats go on while a coroutine listener awaits (a
plain function blocks the event loop, heartbeats included: keep it short).
The only blocking steps (connecting to the service, finding
the topic registry) run in a worker thread, once, at `start()`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable
from functools import partial
from typing import Any

from actors.client.client import Client
from actors.client.connect import connect
from actors.member.api import (
    Describe,
    Effect,
    Notify,
    OffsetAndMetadata,
    Send,
    Steps,
    TopicIds,
    Watch,
    advance,
    committed_offsets,
)
from actors.member.group_member import STALE_FETCH_RETRIES, MemberBase, Offsets, log_keep_alive_failure
from coordinator.errors import Errors
from coordinator.topic_partition import TopicPartition


class AsyncGroupMember(MemberBase):
    """A group member driven by an asyncio task; see the module docstring."""

    def _init_driver(self) -> None:
        self._wake = asyncio.Event()
        self._stable = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watching: asyncio.Future[Any] | None = None  # the parked assignment watch

    async def _connected(self) -> Client:
        if self.client is None:
            self.client = await asyncio.to_thread(partial(connect, credential=self.credential))
        return self.client

    # ------------------------------------------------------------ public

    async def start(self) -> AsyncGroupMember:
        if self._task is None:
            client = await self._connected()
            if self.topic_partitions is None:
                # Fails here when there is no registry; finds it off the event loop.
                await asyncio.to_thread(client.describe_topics, ())
            self.core.poll()
            self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aenter__(self) -> AsyncGroupMember:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def wait_for_assignment(self, timeout: float | None = None) -> set[TopicPartition]:
        """Wait until the member is in a stable generation; returns its partitions."""
        self.core.poll()
        if self.core.closed:
            raise RuntimeError("the member is closed")
        try:
            await asyncio.wait_for(self._stable.wait(), timeout)
        except TimeoutError:
            self.core.raise_fatal()
            raise TimeoutError(f"member of {self.config.group_id!r} not stable after {timeout} s") from None
        return self.poll()

    async def commit(self, offsets: Offsets, metadata: str = "") -> None:
        """OffsetCommit with this member's generation; CommitFailedError if refused."""
        self.core.raise_fatal()
        client = await self._connected()
        self.core.on_commit_response(await client.send_async(self.core.commit_request(offsets, metadata)))

    async def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        client = await self._connected()
        wanted = [(t, p) for t, p in partitions]
        response = await client.send_async(self._fetch_request(wanted))
        for _ in range(STALE_FETCH_RETRIES):
            if response.error is not Errors.STALE_MEMBER_EPOCH:
                break
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)  # the heartbeat brings the newer epoch
            response = await client.send_async(self._fetch_request(wanted))
        return committed_offsets(response)

    async def close(self, timeout_s: float = 30.0) -> None:
        """Stop the loop, revoke the partitions and (dynamic members) leave the group."""
        if not self.core.close():
            return
        task = self._task
        if task is not None and not self.core.parked:
            await asyncio.wait({task}, timeout=timeout_s)
        if self.client is not None:
            await self._drive(self.core.leave())
        if task is not None and not task.done():
            task.cancel()  # parked: the coordinator's answer no longer matters
            await asyncio.gather(task, return_exceptions=True)
        if self._watching is not None:
            self._watching.cancel()  # answered (or not) for a member that is gone
            await asyncio.gather(self._watching, return_exceptions=True)
            self._watching = None

    # ------------------------------------------------------------ driver

    async def _run(self) -> None:
        try:
            await self._drive(self.core.run(), until_closed=True)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.core.fail(exc)

    async def _drive(self, steps: Steps[None], until_closed: bool = False) -> None:
        value: Any = None
        error: BaseException | None = None
        while (effect := advance(steps, value, error)) is not None:
            try:
                value, error = await self._perform(effect), None
            except asyncio.CancelledError:
                steps.close()
                raise
            except Exception as exc:
                value, error = None, exc
            if until_closed and self.core.closed:
                steps.close()
                return

    async def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, Send):
            client = await self._connected()
            return await client.send_async(effect.request, timeout_s=effect.timeout_s)
        if isinstance(effect, Describe):
            return await self._describe(effect.topics)
        if isinstance(effect, TopicIds):
            return await (await self._connected()).topic_ids_async()
        if isinstance(effect, Notify):
            await self._notify(effect)
            return None
        if isinstance(effect, Watch):
            return await self._watch(effect)
        try:
            await asyncio.wait_for(self._wake.wait(), effect.timeout_s)
        except TimeoutError:
            pass
        self._wake.clear()
        return None

    async def _watch(self, effect: Watch) -> Any:
        """Wait, with the parked watch's answer (if it comes first) as the result."""
        answer = self._watching
        if answer is None:
            client = await self._connected()
            answer = self._watching = asyncio.ensure_future(client.send_once_async(effect.request))
        woken = asyncio.ensure_future(self._wake.wait())
        await asyncio.wait({answer, woken}, timeout=effect.timeout_s, return_when=asyncio.FIRST_COMPLETED)
        woken.cancel()
        self._wake.clear()
        if not answer.done():
            return None
        self._watching = None
        return answer.result()  # or raises the watch's failure

    async def _describe(self, topics: tuple[str, ...] | None) -> Any:
        if self.topic_partitions is None:
            client = await self._connected()
            return await client.describe_topics_async(topics)
        counts = self._static_counts(topics)
        return await counts if inspect.isawaitable(counts) else counts

    async def _notify(self, effect: Notify) -> None:
        listener = self._listener(effect)
        if listener is None:
            return
        keeper = asyncio.get_running_loop().create_task(self._keep_alive())
        try:
            result = listener(set(effect.partitions))
            if inspect.isawaitable(result):
                await result
        except Exception:
            self._listener_failed(effect)
        finally:
            keeper.cancel()

    async def _keep_alive(self) -> None:
        """Heartbeats while a coroutine listener runs; the loop's own heartbeat handles any
        error. One not answered (a leader failover) is sent again at the next interval."""
        interval_s = self._keep_alive_interval_s()
        client = await self._connected()
        failures = 0
        while True:
            await asyncio.sleep(interval_s)
            request = self.core.heartbeat_request()
            if request is None:
                return
            try:
                await client.send_async(request, timeout_s=interval_s)
            except Exception as exc:
                failures += 1
                log_keep_alive_failure(self.config.group_id, failures, exc)
