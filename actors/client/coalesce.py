"""Coalescing: every request a process sends one leader, from any thread or event
loop, travels with the others in few Ray calls, and each gets its answer as soon
as the leader releases it.

A Ray actor call costs about a millisecond of CPU on each side, far more
than the coordinator spends on a request (40-60 us for a heartbeat). A process
that hosts many members (threads of `GroupMember`, coroutines of
`AsyncGroupMember`, a driver simulating a group) would spend its time, and the
partition actor's, on call overhead. So every request goes to the `Coalescer`
of its leader, on the process's one `Sender` loop. Rules:
- Batches by an IN-FLIGHT WINDOW, never by a timer: at most `MAX_IN_FLIGHT`
  calls per leader are in flight; while they are, what arrives waits and
  leaves as one batch (at most `MAX_BATCH` requests) when a call returns. A
  lone request leaves at once: at the end of the loop's turn, or, from a
  sync caller to a leader with nothing waiting or in flight, as the caller's
  own Ray call (`Sender.call`: no hop through the sender's loop; it holds a
  place in the window meanwhile).
- A batch of one is an ordinary `handle_wire` call, unless its request may
  park (`MAY_PARK`: a JoinGroup waiting for the join phase, a follower's
  SyncGroup, an assignment watch); any other batch is one `handle_batch`
  call, which returns once the leader answered every request of it that
  cannot park, so a parked request holds back no other and never holds a
  place in the window. What stays parked is answered through `collect`
  calls (`actors.partition.batches`): one in flight per coalescer, for all
  of its batches, while any waits. Only unary calls: a streaming call's
  unread answers would stop the leader (see that module).
- If the call fails (the leader died), every request it carried that is still
  unanswered gets the exception, and only those; the client's retry loop
  takes each from there. Parked answers the leader lost (a mailbox dropped
  after its TTL: this process paused past it) fail exactly the requests
  parked in that mailbox's generation, with `AnswersLostError`, which the
  retry loop sends again; a request another attempt replaced is safe to send
  again (a JoinGroup is a rejoin with the same member id).
- A request its caller gave up on (an attempt timed out, a coroutine
  cancelled) is forgotten at once: nothing of it stays, and a batch with
  nothing left to wait for stops its collect.
- One registry (`coalescer_for`) for the process: a coalescer per leader actor
  and event loop, shared by every client (each `GroupMember` connects its
  own), the process's sender included. A coalescer goes when its loop is
  closed or a client learns its leader was replaced (`retire`); calls in
  flight finish on the coalescer they started on.
- Who calls (`CallAs`, issue 49): a client's Ray-path credential travels
  once per call, beside the batch, so clients of one process with different
  credentials have different coalescers (one per leader, loop and `CallAs`).
  The service's own components (the topic registry's store, the gateways,
  which authorize their Kafka clients themselves) call the leaders'
  unchecked `serve_*` methods instead (docs/security.md says what that means).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import random
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import ray
from ray.actor import ActorHandle

from actors.client.retry import AnswersLostError
from actors.core import loops
from actors.core.wire import loads_response
from coordinator.messages import MAY_PARK, Request

# Calls in flight to one leader; more wait and leave together.
MAX_IN_FLIGHT = 2
# Requests in one call at most.
MAX_BATCH = 1_000


@dataclass(frozen=True, slots=True)
class CallAs:
    """Who a client's calls are from: `credential` (None: none) is sent with each call;
    `service` True: a service component's, to the unchecked `serve_*` methods."""

    credential: str | None = None
    service: bool = False

    @property
    def methods(self) -> tuple[str, str]:
        return ("serve_wire", "serve_batch") if self.service else ("handle_wire", "handle_batch")

    def extra(self) -> tuple[str, ...]:
        """What each call carries after its requests."""
        return () if self.credential is None else (self.credential,)


USER = CallAs()


class Coalescer:
    """Batches the requests to one leader made on one event loop (module rules)."""

    def __init__(
        self,
        leader: Any,
        loop: asyncio.AbstractEventLoop,
        single: str | None = None,
        batch: str | None = None,
        call_as: CallAs = USER,
    ):
        self.leader = leader
        self.loop = loop
        self.single = getattr(leader, single or call_as.methods[0])
        self._batch = getattr(leader, batch or call_as.methods[1])
        self.extra = call_as.extra()
        self._queue: deque[tuple[Request, asyncio.Future[Any]]] = deque()
        # Calls in flight: the loop's, and a caller's own (`Sender.call`), so under a lock.
        self._in_flight = 0
        self._in_flight_lock = threading.Lock()
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()
        # The leader's mailbox of this coalescer's parked answers (`actors.partition.batches`).
        self.caller = random.getrandbits(63)
        self._numbers = itertools.count()
        self._open: dict[int, dict[int, asyncio.Future[Any]]] = {}  # unanswered requests by batch
        # Batches the leader answered in part, the rest parked: the generation of their mailbox.
        self._collecting: dict[int, int] = {}
        self._collector: asyncio.Task[None] | None = None

    def submit(self, request: Request) -> asyncio.Future[Any]:
        """The future of `request`'s response; on the coalescer's loop."""
        future = self.loop.create_future()
        self._queue.append((request, future))
        self._schedule()
        return future

    def take_idle_place(self) -> bool:
        """A place for a call its caller makes itself, only while nothing waits or is in
        flight (`Sender.call`); `free_place` gives it back. From any thread."""
        with self._in_flight_lock:
            if self._in_flight or self._queue or self._scheduled:
                return False
            self._in_flight += 1
            return True

    def free_place(self) -> None:
        self._count_place(-1)
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self._schedule)

    def _count_place(self, change: int) -> None:
        with self._in_flight_lock:
            self._in_flight += change

    def _schedule(self) -> None:
        if self._queue and not self._scheduled and self._in_flight < MAX_IN_FLIGHT:
            self._scheduled = True
            self.loop.call_soon(self._send)

    def _send(self) -> None:
        self._scheduled = False
        while self._queue and self._in_flight < MAX_IN_FLIGHT:
            batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
            place = _Place(self)
            single = len(batch) == 1 and not isinstance(batch[0][0], MAY_PARK)
            call = self._call_one(batch[0], place) if single else self._call_batch(batch, place)
            task = self.loop.create_task(call)
            # The loop keeps only weak references to tasks.
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _call_one(self, entry: tuple[Request, asyncio.Future[Any]], place: _Place) -> None:
        request, future = entry
        try:
            _deliver(future, loads_response(await self.single.remote(request, *self.extra)))
        except Exception as exc:
            _fail(future, exc)
        finally:
            place.free()

    async def _call_batch(self, batch: list[tuple[Request, asyncio.Future[Any]]], place: _Place) -> None:
        number = next(self._numbers)
        # Registered before the call: a collect may bring this batch's parked answers
        # before its own call's answer arrives.
        futures = self._open[number] = {index: future for index, (_, future) in enumerate(batch)}
        for index, future in futures.items():
            future.add_done_callback(partial(self._forget, number, index))
        try:
            call = self._batch.remote(self.caller, number, [request for request, _ in batch], *self.extra)
            answers, parked, generation = loads_response(await call)
        except Exception as exc:
            self._close(number, exc)
            return
        finally:
            place.free()
        for index, response in answers:
            _deliver_to(futures, index, response)
        if parked and futures:
            self._collecting[number] = generation
            self._start_collector()
        else:
            self._close(number)

    def _forget(self, number: int, index: int, future: asyncio.Future[Any]) -> None:
        """A request its caller gave up on (cancelled) leaves its batch; an empty batch closes."""
        futures = self._open.get(number)
        if future.cancelled() and futures is not None and futures.get(index) is future:
            del futures[index]
            if not futures:
                self._close(number)

    def _start_collector(self) -> None:
        if self._collector is None or self._collector.done():
            self._collector = self.loop.create_task(self._collect())

    async def _collect(self) -> None:
        """Parked requests' answers, while any of this coalescer's batches waits for one."""
        try:
            while self._collecting:
                oldest = min(self._collecting.values())
                floor, answers = loads_response(await self.leader.collect.remote(self.caller, oldest))
                for number, index, response in answers:
                    futures = self._open.get(number, {})
                    if _deliver_to(futures, index, response) and not futures:
                        self._close(number)
                self._close_lost(floor)
        except Exception as exc:
            for number in list(self._collecting):
                self._close(number, exc)

    def _close_lost(self, floor: int) -> None:
        """Fails the requests parked in the leader's mailboxes below `floor`, which it dropped."""
        for number, generation in list(self._collecting.items()):
            if generation < floor:
                self._close(number, AnswersLostError(f"the leader dropped mailbox {generation}"))

    def _close(self, number: int, error: BaseException | None = None) -> None:
        """Batch `number` is done: any request it still carries fails with `error`."""
        self._collecting.pop(number, None)
        for future in self._open.pop(number, {}).values():
            _fail(future, error or RuntimeError("the leader ended a batch without answering this request"))


class _Place:
    """A call's place in its coalescer's window, held until the call returns (module rules)."""

    __slots__ = ("coalescer", "held")

    def __init__(self, coalescer: Coalescer) -> None:
        self.coalescer, self.held = coalescer, True
        coalescer._count_place(1)

    def free(self) -> None:
        if self.held:
            self.held = False
            self.coalescer._count_place(-1)
            self.coalescer._schedule()


class Sender:
    """The process's sending thread: an event loop whose coalescers (one per leader
    actor, `coalescer_for`) serve every client, thread and event loop of the process."""

    def __init__(self) -> None:
        self.loop = loops.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="raygroups-sender", daemon=True)
        self._thread.start()

    def submit(self, leader: Any, request: Request, call_as: CallAs = USER) -> concurrent.futures.Future[Any]:
        """`request` to `leader` (an actor handle); its response, or the error, in a future.
        Cancelling the future forgets the request (module rules)."""
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        coalescer = coalescer_for(leader, self.loop, call_as)
        self.loop.call_soon_threadsafe(self._submit, coalescer, request, answer)
        return answer

    def call(self, leader: Any, request: Request, timeout_s: float, call_as: CallAs = USER) -> Any:
        """`request`'s response (or the error), waited for in the calling thread. A lone
        request, to a leader with nothing waiting or in flight, is the caller's own Ray
        call: no hop through the sender's loop, whose batches it holds back meanwhile."""
        coalescer = coalescer_for(leader, self.loop, call_as)
        if isinstance(request, MAY_PARK) or not coalescer.take_idle_place():
            answer = self.submit(leader, request, call_as)
            try:
                return answer.result(timeout=timeout_s)
            except concurrent.futures.TimeoutError:
                answer.cancel()  # the attempt is over: nothing of it stays
                raise
        try:
            call = coalescer.single.remote(request, *coalescer.extra)
            response = loads_response(ray.get(call, timeout=timeout_s))
        finally:
            coalescer.free_place()
        if isinstance(response, BaseException):
            raise response
        return response

    def _submit(self, coalescer: Coalescer, request: Request, answer: concurrent.futures.Future[Any]) -> None:
        future = coalescer.submit(request)
        future.add_done_callback(partial(_settle, answer))
        # Runs at once if the caller gave up already; else in the thread that cancels.
        answer.add_done_callback(partial(self._given_up, future))

    def _given_up(self, future: asyncio.Future[Any], answer: concurrent.futures.Future[Any]) -> None:
        if answer.cancelled():
            self.loop.call_soon_threadsafe(future.cancel)


def _settle(answer: concurrent.futures.Future[Any], done: asyncio.Future[Any]) -> None:
    if answer.done():
        return  # cancelled by its caller
    if done.cancelled():
        answer.cancel()
        return
    exc = done.exception()
    try:
        if exc is not None:
            answer.set_exception(exc)
        else:
            answer.set_result(done.result())
    except concurrent.futures.InvalidStateError:
        pass  # cancelled by its caller meanwhile, from its thread


class _Registry:
    """The process's coalescers, by leader actor and event loop (module rules)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._coalescers: dict[tuple[Any, asyncio.AbstractEventLoop, CallAs], Coalescer] = {}

    def get(self, leader: Any, loop: asyncio.AbstractEventLoop, call_as: CallAs = USER) -> Coalescer:
        key = (_actor_key(leader), loop, call_as)
        coalescer = self._coalescers.get(key)
        if coalescer is None:
            with self._lock:
                coalescer = self._coalescers.get(key)
                if coalescer is None:
                    # Rare (a new leader or loop): the time to drop those of closed loops.
                    live = {k: c for k, c in self._coalescers.items() if not k[1].is_closed()}
                    coalescer = live[key] = Coalescer(leader, loop, call_as=call_as)
                    self._coalescers = live
        return coalescer

    def retire(self, leaders: Iterable[Any], keep: Iterable[Any]) -> None:
        gone = {_actor_key(leader) for leader in leaders if leader is not None}
        gone -= {_actor_key(leader) for leader in keep if leader is not None}
        if gone:
            with self._lock:
                self._coalescers = {k: c for k, c in self._coalescers.items() if k[0] not in gone}


def _actor_key(leader: Any) -> Any:
    """Every handle of one actor shares its coalescers; anything else is its own."""
    return leader._actor_id if isinstance(leader, ActorHandle) else leader


_registry = _Registry()


def coalescer_for(leader: Any, loop: asyncio.AbstractEventLoop, call_as: CallAs = USER) -> Coalescer:
    """The process's coalescer of `leader` (an actor handle) on `loop`, calling as `call_as`."""
    return _registry.get(leader, loop, call_as)


def retire(leaders: Iterable[Any], keep: Iterable[Any]) -> None:
    """A client's routing replaced `leaders` by `keep`: the coalescers of leaders not
    kept go (their calls in flight finish); a later call makes a new one."""
    _registry.retire(leaders, keep)


_sender: tuple[int, Sender] | None = None
_sender_lock = threading.Lock()


def process_sender() -> Sender:
    """This process's `Sender`, started on first use (and anew in a forked child)."""
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid():
            _sender = (os.getpid(), Sender())
        return _sender[1]


def _deliver_to(futures: dict[int, asyncio.Future[Any]], index: int, response: Any) -> bool:
    """Request `index`'s response, if it still waits in `futures` (its caller may have
    given up); whether it did."""
    future = futures.pop(index, None)
    if future is None:
        return False
    _deliver(future, response)
    return True


def _deliver(future: asyncio.Future[Any], response: Any) -> None:
    """A response, or the error the leader answered in its place (a malformed request)."""
    if isinstance(response, BaseException):
        _fail(future, response)
    elif not future.done():
        future.set_result(response)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
