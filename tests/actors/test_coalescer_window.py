"""The coalescer's in-flight window, without Ray: a lone request leaves at once; while
`MAX_IN_FLIGHT` calls are in flight what arrives waits and leaves as one batch when a
call's first answers come back; a batch whose requests the leader parked frees its
place with the leader's empty first answer; a failed call fails only what it carried;
the process's sender serves threads, shares a coalescer per leader actor and answers
each thread's request."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actors.client.coalesce import MAX_BATCH, MAX_IN_FLIGHT, Coalescer, Sender
from actors.core.wire import dumps_response
from coordinator import Errors
from coordinator.messages import HeartbeatRequest, HeartbeatResponse, JoinGroupRequest

from tests.actors.support import run


def beat(member: str) -> HeartbeatRequest:
    return HeartbeatRequest("g", 1, member)


def answer(request: HeartbeatRequest) -> HeartbeatResponse | ValueError:
    """Heartbeats are answered; member "bad" gets the error a malformed request would."""
    return ValueError("bad") if request.member_id == "bad" else HeartbeatResponse(Errors.NONE)


def join() -> JoinGroupRequest:
    return JoinGroupRequest("g", 30_000, 30_000, "consumer", ())


class Leader:
    """A leader handle whose calls the test answers: `calls` holds each call's requests
    and the event that lets it answer (a parked request is never answered)."""

    def __init__(self, first_empty: bool = False) -> None:
        self.calls: list[tuple[list[Any], asyncio.Event]] = []
        self.first_empty = first_empty
        self.dead_calls: set[int] = set()
        self.handle_wire = _Method(self._one)
        self.handle_batch = _Method(self._many)

    async def _one(self, request: Any) -> bytes:
        release = asyncio.Event()
        self.calls.append(([request], release))
        call = len(self.calls) - 1
        await release.wait()
        if call in self.dead_calls:
            raise ConnectionError("the leader died")
        return dumps_response(answer(request))

    async def _many(self, requests: list[Any]) -> AsyncIterator[Any]:
        release = asyncio.Event()
        self.calls.append((requests, release))
        if self.first_empty:
            yield _ready(dumps_response([]))
        await release.wait()
        answered = [(i, answer(r)) for i, r in enumerate(requests) if not isinstance(r, JoinGroupRequest)]
        yield _ready(dumps_response(answered))

    def release(self, call: int, dead: bool = False) -> None:
        if dead:
            self.dead_calls.add(call)
        self.calls[call][1].set()


class _Method:
    def __init__(self, fn: Any) -> None:
        self.remote = fn


async def _ready(value: bytes) -> bytes:
    return value


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_lone_request_leaves_at_once_and_what_arrives_meanwhile_waits_for_a_place() -> None:
    async def scenario() -> None:
        leader = Leader()
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        first = coalescer.submit(beat("m0"))
        await turns()
        assert [len(requests) for requests, _ in leader.calls] == [1]  # no timer, no waiting
        second = coalescer.submit(beat("m1"))
        await turns()
        assert len(leader.calls) == MAX_IN_FLIGHT == 2
        waiting = [coalescer.submit(beat(f"w{i}")) for i in range(10)]
        await turns()
        assert len(leader.calls) == MAX_IN_FLIGHT  # the window is full: they wait
        leader.release(0)
        await turns()
        assert first.done() and not second.done()
        assert [len(requests) for requests, _ in leader.calls] == [1, 1, 10]  # one batch of the waiting
        leader.release(1)
        leader.release(2)
        await asyncio.gather(second, *waiting)

    run(scenario())


def test_a_batch_is_at_most_max_batch_requests() -> None:
    async def scenario() -> None:
        leader = Leader()
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        futures = [coalescer.submit(beat(f"m{i}")) for i in range(MAX_BATCH + 5)]
        await turns()
        assert [len(requests) for requests, _ in leader.calls] == [MAX_BATCH, 5]
        for call in range(2):
            leader.release(call)
        await asyncio.gather(*futures)

    run(scenario())


def test_parked_requests_free_their_place_with_the_leaders_empty_first_answer() -> None:
    async def scenario() -> None:
        leader = Leader(first_empty=True)
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        joins = [coalescer.submit(join()) for _ in range(2)]
        await turns()
        joins.append(coalescer.submit(join()))  # streamed alone
        await turns()
        assert [len(requests) for requests, _ in leader.calls] == [2, 1]
        beats = [coalescer.submit(beat("m0"))]
        await turns()
        assert len(leader.calls) == 3, "parked joins closed the window"
        leader.release(2)
        await asyncio.gather(*beats)
        assert not any(join.done() for join in joins)

    run(scenario())


def test_a_failed_call_fails_only_what_it_carried() -> None:
    async def scenario() -> None:
        leader = Leader()
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        lost = coalescer.submit(beat("m0"))
        await turns()
        good, bad = coalescer.submit(beat("m1")), coalescer.submit(beat("bad"))
        await turns()
        leader.release(0, dead=True)
        with pytest.raises(ConnectionError):
            await lost
        leader.release(1)
        assert (await good).error is Errors.NONE  # a malformed neighbour's error is its own
        with pytest.raises(ValueError, match="bad"):
            await bad

    run(scenario())


def test_the_process_sender_answers_each_thread_and_shares_one_coalescer_per_leader() -> None:
    sender = Sender()
    try:
        leader = Leader()
        results: dict[int, Any] = {}

        def member(i: int) -> None:
            future = sender.submit(leader, beat(f"m{i}"))
            results[i] = future.result(timeout=20)

        threads = [threading.Thread(target=member, args=(i,)) for i in range(50)]
        for thread in threads:
            thread.start()

        async def release_all() -> None:
            while sum(len(requests) for requests, _ in leader.calls) < 50 or not all(
                release.is_set() for _, release in leader.calls
            ):
                for _, release in leader.calls:
                    release.set()
                await asyncio.sleep(0.001)

        asyncio.run_coroutine_threadsafe(release_all(), sender.loop).result(timeout=20)
        for thread in threads:
            thread.join(timeout=20)
        assert sorted(results) == list(range(50)) and {r.error for r in results.values()} == {Errors.NONE}
        assert len(leader.calls) < 50, "every thread's request went alone"
        assert list(sender._coalescers) == [leader]
    finally:
        sender.loop.call_soon_threadsafe(sender.loop.stop)
