"""Coalescing: the requests a process sends one leader in the same moment
travel in one Ray call, and their answers stream back as they come.

A Ray actor call costs about a millisecond of CPU on each side, far more
than the coordinator spends on a request. A process that hosts many
members (a driver simulating a group, an actor running many consumers)
would spend its time, and the partition actor's, on call overhead: a
1,000-member rebalance is 2,000 calls. So the async client gives every
request to the `Coalescer` of its leader. Rules:
- A batch is what was submitted in one turn of the event loop: the first
  request schedules the send at the end of the turn, so nothing waits for
  a timer and a lone request goes out at once.
- A batch of one is an ordinary `handle_wire` call; a larger one is one
  call of the actor's `handle_batch`, a streaming generator that yields
  `(index, response)` lists as responses are released (a parked JoinGroup
  does not hold back a heartbeat sent with it).
- If the call fails (the leader died), every request still unanswered gets
  the exception; the client's retry loop takes it from there.
"""

from __future__ import annotations

import asyncio
from typing import Any

from actors.core.wire import loads_response
from coordinator.messages import Request


class Coalescer:
    """Batches the requests to one leader made from one event loop."""

    def __init__(
        self,
        leader: Any,
        loop: asyncio.AbstractEventLoop,
        single: str = "handle_wire",
        batch: str = "handle_batch",
    ):
        self.leader = leader
        self.loop = loop
        self._single = getattr(leader, single)
        self._batch = getattr(leader, batch)
        self._queue: list[tuple[Request, asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, request: Request) -> asyncio.Future[Any]:
        """The future of `request`'s response; sent at the end of this loop turn."""
        future = self.loop.create_future()
        if not self._queue:
            self.loop.call_soon(self._send)
        self._queue.append((request, future))
        return future

    def _send(self) -> None:
        batch, self._queue = self._queue, []
        task = self.loop.create_task(self._call_one(*batch[0]) if len(batch) == 1 else self._stream(batch))
        # The loop keeps only weak references to tasks.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call_one(self, request: Request, future: asyncio.Future[Any]) -> None:
        try:
            response = loads_response(await self._single.remote(request))
        except Exception as exc:
            _fail(future, exc)
        else:
            _answer(future, response)

    async def _stream(self, batch: list[tuple[Request, asyncio.Future[Any]]]) -> None:
        try:
            async for ref in self._batch.remote([request for request, _ in batch]):
                for index, response in loads_response(await ref):
                    future = batch[index][1]
                    if isinstance(response, BaseException):
                        _fail(future, response)
                    else:
                        _answer(future, response)
        except Exception as exc:
            for _, future in batch:
                _fail(future, exc)
        else:
            for _, future in batch:
                _fail(future, RuntimeError("the leader ended a batch without answering this request"))


def _answer(future: asyncio.Future[Any], response: Any) -> None:
    if not future.done():
        future.set_result(response)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
