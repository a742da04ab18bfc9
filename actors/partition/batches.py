"""A coalesced batch's answers, in ordinary (unary) Ray calls only.

The client's `Coalescer` sends many requests in one `handle_batch` call. The
call returns once every request of the batch that cannot park is answered,
with those answers and how many stay parked (`MAY_PARK`: a JoinGroup waiting
for its join phase, a follower's SyncGroup, an assignment watch). A parked
request's answer goes to its caller's `Mailbox`, which the caller empties with
`collect` calls: each waits for the next answers of any of the caller's
batches, so a process has one collect in flight per leader however many of its
batches wait.

Why not a streaming generator, which would need no mailbox: Ray (2.x) waits,
on the actor's event loop, until the caller has acknowledged each streamed
item (`TaskGeneratorBackpressureWaiter`), so a caller stopped (SIGSTOP, a
debugger, a swapped-out host) with answers unread would stop the partition
for every caller and its controller probe. A unary call's reply leaves on
Ray's own threads, read or not.

A caller silent for `MAILBOX_TTL_S` (no batch, no collect in flight) loses
its mailbox; its next `collect` answers None and the client retries what it
had waiting, as after a lost call. Pure asyncio, no Ray."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

from actors.core.wire import loads_response
from coordinator.checks import InvalidRequestError
from coordinator.messages import MAY_PARK

MAILBOX_TTL_S = 60.0

# (batch, index, response): an answer of request `index` of the caller's batch `batch`.
Answer = tuple[int, int, Any]


class Mailbox:
    """The parked requests' answers for one caller, until it collects them."""

    __slots__ = ("answers", "outstanding", "collecting", "touched", "_wake")

    def __init__(self, now: float) -> None:
        self.answers: list[Answer] = []
        self.outstanding = 0  # parked requests not answered yet
        self.collecting = 0  # collect calls waiting
        self.touched = now
        self._wake = asyncio.Event()

    def put(self, batch: int, index: int, response: Any) -> None:
        self.outstanding -= 1
        self.answers.append((batch, index, response))
        self._wake.set()

    async def take(self) -> list[Answer]:
        """Every answer waiting, once there is one."""
        self.collecting += 1
        try:
            while not self.answers:
                self._wake.clear()
                await self._wake.wait()
        finally:
            self.collecting -= 1
        answers, self.answers = self.answers, []
        return answers

    def idle(self) -> bool:
        return not (self.outstanding or self.answers or self.collecting)


class Mailboxes:
    """Every caller's mailbox, by the caller's id (`Coalescer.caller`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._boxes: dict[int, Mailbox] = {}
        self._swept = clock()

    def __len__(self) -> int:
        return len(self._boxes)

    def open(self, caller: int, parked: int) -> Mailbox:
        """The caller's mailbox, expecting `parked` more answers."""
        now = self._sweep()
        box = self._boxes.get(caller)
        if box is None:
            box = self._boxes[caller] = Mailbox(now)
        box.outstanding += parked
        box.touched = now
        return box

    async def collect(self, caller: int) -> list[Answer] | None:
        """The caller's next answers; None when it has no mailbox (never had one
        waiting, or lost it to the TTL)."""
        self._sweep()
        box = self._boxes.get(caller)
        if box is None:
            return None
        answers = await box.take()
        box.touched = self._clock()
        if box.idle() and self._boxes.get(caller) is box:
            del self._boxes[caller]  # everything it waited for is collected
        return answers

    def _sweep(self) -> float:
        """Drops the mailboxes of callers silent for the TTL (checked every half TTL); the time."""
        now = self._clock()
        if now - self._swept > MAILBOX_TTL_S / 2:
            self._swept = now
            for caller, box in list(self._boxes.items()):
                if not box.collecting and now - box.touched > MAILBOX_TTL_S:
                    del self._boxes[caller]
        return now


class BatchAnswers:
    """One `handle_batch` call's requests until the call returns, then their
    mailbox: `deliver(index, response)` is each request's delivery."""

    __slots__ = ("answered", "_parkable", "_must_answer", "_done", "_forward")

    def __init__(self, requests: list[Any]) -> None:
        self.answered: list[tuple[int, Any]] = []
        self._parkable = {index for index, request in enumerate(requests) if isinstance(request, MAY_PARK)}
        self._must_answer = len(requests) - len(self._parkable)
        self._done = asyncio.Event()
        self._forward: Callable[[int, Any], None] | None = None
        if not self._must_answer:
            self._done.set()

    def deliver(self, index: int, response: Any) -> None:
        if self._forward is not None:
            self._forward(index, response)
            return
        self.answered.append((index, response))
        if index not in self._parkable:
            self._must_answer -= 1
            if not self._must_answer:
                self._done.set()

    async def wait(self) -> None:
        """Until every request that cannot park is answered (parkable ones may be too)."""
        await self._done.wait()

    def park_rest(self, mailboxes: Mailboxes, caller: int, batch: int, size: int) -> int:
        """From now on, answers go to the caller's mailbox: how many still wait."""
        parked = size - len(self.answered)
        if parked:
            box = mailboxes.open(caller, parked)
            self._forward = lambda index, response: box.put(batch, index, response)
        return parked


def check_batch_call(caller: Any, batch: Any, requests: Any) -> None:
    """A hostile or broken caller's `handle_batch` arguments answer it alone."""
    if type(requests) is not list:
        raise InvalidRequestError(f"handle_batch takes a list of requests, got {type(requests).__name__}")
    for name, value in (("caller", caller), ("batch", batch)):
        if type(value) is not int:
            raise InvalidRequestError(f"handle_batch's {name} must be an int, got {type(value).__name__}")


async def answer_in_process(partition: Any, requests: list[Any]) -> list[Any]:
    """Each request's one answer, in order, from a partition actor's object in this
    process (benchmarks and tests): `handle_batch`, then `collect` what parked."""
    caller = random.getrandbits(63)
    answers, parked = loads_response(await partition.handle_batch(caller, 0, requests))
    got = dict(answers)
    while parked:
        for batch, index, response in loads_response(await partition.collect(caller)):
            if batch != 0 or index in got:
                raise AssertionError(f"request {index} of batch {batch} answered again")
            got[index] = response
            parked -= 1
    return [got[index] for index in range(len(requests))]
