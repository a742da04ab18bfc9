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

A caller silent for the TTL (`MAILBOX_TTL_S` by default,
`ServiceSettings.mailbox_ttl_s`; no batch, no collect in flight) loses its
mailbox, answers outstanding or not: a caller paused past it may never come
back. A loss is never silent. Each mailbox has a GENERATION, increasing per
leader: `handle_batch` returns the generation its parked requests went to, and
every `collect` answers `(floor, answers)`, where every mailbox of the caller
below `floor` is gone (the caller's mailbox's own generation, or the next one
to be issued when it has none). A collect names the oldest generation its
caller waits on and returns at once if that one is gone; else it waits for
answers. The client fails exactly the requests parked in a generation below
the floor with `AnswersLostError`, which its retry loop sends again, as after
a lost call; so a caller that sends a new batch (a new mailbox) before
collecting still learns its older answers were lost. An answer for a dropped
mailbox is discarded, never written into it. Pure asyncio, no Ray."""

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
# A collect's answer: (floor, answers); every mailbox of the caller below `floor` is gone.
Collected = tuple[int, list[Answer]]


class Mailbox:
    """The parked requests' answers for one caller, until it collects them."""

    __slots__ = ("generation", "answers", "outstanding", "collecting", "touched", "dropped", "_wake")

    def __init__(self, generation: int, now: float) -> None:
        self.generation = generation
        self.answers: list[Answer] = []
        self.outstanding = 0  # parked requests not answered yet
        self.collecting = 0  # collect calls waiting
        self.touched = now
        self.dropped = False  # swept: no one will collect what comes now
        self._wake = asyncio.Event()

    def put(self, batch: int, index: int, response: Any) -> None:
        self.outstanding -= 1
        if not self.dropped:
            self.answers.append((batch, index, response))
            self._wake.set()

    def take_ready(self) -> list[Answer]:
        """Every answer waiting, maybe none."""
        answers, self.answers = self.answers, []
        return answers

    async def take(self) -> list[Answer]:
        """Every answer waiting, once there is one."""
        self.collecting += 1
        try:
            while not self.answers:
                self._wake.clear()
                await self._wake.wait()
        finally:
            self.collecting -= 1
        return self.take_ready()

    def idle(self) -> bool:
        return not (self.outstanding or self.answers or self.collecting)


class Mailboxes:
    """Every caller's mailbox, by the caller's id (`Coalescer.caller`); a mailbox
    goes once collected empty, or after `ttl_s` of its caller's silence."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl_s: float = MAILBOX_TTL_S) -> None:
        self._clock = clock
        self.ttl_s = ttl_s
        self._boxes: dict[int, Mailbox] = {}
        self._swept = clock()
        self._next_generation = 1

    def __len__(self) -> int:
        return len(self._boxes)

    def open(self, caller: int, parked: int) -> Mailbox:
        """The caller's mailbox, expecting `parked` more answers."""
        now = self._sweep()
        box = self._boxes.get(caller)
        if box is None:
            box = self._boxes[caller] = Mailbox(self._next_generation, now)
            self._next_generation += 1
        box.outstanding += parked
        box.touched = now
        return box

    async def collect(self, caller: int, oldest: int) -> Collected:
        """The caller's next answers, with the floor below which its mailboxes are
        gone. At once, with those ready (maybe none), when the mailbox of generation
        `oldest`, the oldest its caller waits on, is gone: the caller has no mailbox
        (never had one waiting, or lost it to the TTL) or a newer one."""
        self._sweep()
        box = self._boxes.get(caller)
        if box is None:
            return self._next_generation, []
        answers = box.take_ready() if box.generation > oldest else await box.take()
        box.touched = self._clock()
        if box.idle() and self._boxes.get(caller) is box:
            del self._boxes[caller]  # everything it waited for is collected
        return box.generation, answers

    def _sweep(self) -> float:
        """Drops the mailboxes of callers silent for the TTL (checked every half TTL),
        answers outstanding or not (module docstring); the time."""
        now = self._clock()
        if now - self._swept > self.ttl_s / 2:
            self._swept = now
            for caller, box in list(self._boxes.items()):
                if not box.collecting and now - box.touched > self.ttl_s:
                    box.dropped = True
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

    def park_rest(self, mailboxes: Mailboxes, caller: int, batch: int, size: int) -> tuple[int, int]:
        """From now on, answers go to the caller's mailbox: how many still wait, and
        the mailbox's generation (0 when none waits)."""
        parked = size - len(self.answered)
        if not parked:
            return 0, 0
        box = mailboxes.open(caller, parked)
        self._forward = lambda index, response: box.put(batch, index, response)
        return parked, box.generation


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
    answers, parked, generation = loads_response(await partition.handle_batch(caller, 0, requests))
    got = dict(answers)
    while parked:
        floor, collected = loads_response(await partition.collect(caller, generation))
        if floor > generation:
            raise AssertionError(f"the mailbox of {parked} parked answers was dropped")
        for batch, index, response in collected:
            if batch != 0 or index in got:
                raise AssertionError(f"request {index} of batch {batch} answered again")
            got[index] = response
            parked -= 1
    return [got[index] for index in range(len(requests))]
