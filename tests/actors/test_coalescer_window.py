"""The coalescer's in-flight window, without Ray: a lone request leaves at once; while
`MAX_IN_FLIGHT` calls are in flight what arrives waits and leaves as one batch when a
call returns; a batch whose requests the leader parked frees its place when its call
returns, and one collect at a time brings every parked answer, each once; a failed
call fails only what it carried, a lost mailbox what was parked, to be retried;
the process's sender serves threads, shares a coalescer per leader actor and answers
each thread's request."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from actors.client.coalesce import MAX_BATCH, MAX_IN_FLIGHT, Coalescer, Sender, coalescer_for
from actors.client.retry import UNREACHABLE, AnswersLostError
from actors.core.wire import dumps_response
from coordinator import Errors
from coordinator.messages import HeartbeatRequest, HeartbeatResponse, JoinGroupRequest

from tests.actors.support import WAIT_S, run, until


def beat(member: str) -> HeartbeatRequest:
    return HeartbeatRequest("g", 1, member)


def answer(request: HeartbeatRequest) -> HeartbeatResponse | ValueError:
    """Heartbeats are answered; member "bad" gets the error a malformed request would."""
    return ValueError("bad") if request.member_id == "bad" else HeartbeatResponse(Errors.NONE)


def join() -> JoinGroupRequest:
    return JoinGroupRequest("g", 30_000, 30_000, "consumer", ())


class Leader:
    """A leader handle whose calls the test answers: `calls` holds each call's requests
    and the event that lets it answer. JoinGroups park: a batch of only joins returns at
    once; the joins' answers come through `collect` once the test sets `unpark`, or at
    once when the mailbox the collect waits on is gone (`drop_mailbox`)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Any], asyncio.Event]] = []
        self.dead_calls: set[int] = set()
        self.parked: list[tuple[int, int]] = []  # (batch, index)
        self.collects = 0
        self.collecting = 0
        self.most_collecting = 0
        self.generation = 1  # of the caller's mailbox; a dropped one is replaced by the next
        self.callers: set[int] = set()
        self.unpark = asyncio.Event()
        self.handle_wire = _Method(self._one)
        self.handle_batch = _Method(self._many)
        self.collect = _Method(self._collect)

    async def _one(self, request: Any) -> bytes:
        release = asyncio.Event()
        self.calls.append(([request], release))
        call = len(self.calls) - 1
        await release.wait()
        if call in self.dead_calls:
            raise ConnectionError("the leader died")
        return dumps_response(answer(request))

    async def _many(self, caller: int, batch: int, requests: list[Any]) -> bytes:
        release = asyncio.Event()
        self.calls.append((requests, release))
        self.callers.add(caller)
        call = len(self.calls) - 1
        if not all(isinstance(r, JoinGroupRequest) for r in requests):
            await release.wait()
        if call in self.dead_calls:
            raise ConnectionError("the leader died")
        answered = [(i, answer(r)) for i, r in enumerate(requests) if not isinstance(r, JoinGroupRequest)]
        self.parked += [(batch, i) for i, r in enumerate(requests) if isinstance(r, JoinGroupRequest)]
        parked = len(requests) - len(answered)
        return dumps_response((answered, parked, self.generation if parked else 0))

    async def _collect(self, caller: int, oldest: int) -> bytes:
        self.collects += 1
        self.collecting += 1
        self.most_collecting = max(self.most_collecting, self.collecting)
        try:
            if oldest >= self.generation:
                await self.unpark.wait()
                self.unpark.clear()
            answers, self.parked = [(b, i, "joined") for b, i in self.parked], []
            return dumps_response((self.generation, answers))
        finally:
            self.collecting -= 1

    def drop_mailbox(self) -> None:
        """The caller's mailbox goes with its parked answers (its TTL passed)."""
        self.parked = []
        self.generation += 1

    def release(self, call: int, dead: bool = False) -> None:
        if dead:
            self.dead_calls.add(call)
        self.calls[call][1].set()


class _Method:
    def __init__(self, fn: Any) -> None:
        self.remote = fn


def collector_done(coalescer: Coalescer) -> bool:
    return coalescer._collector is not None and coalescer._collector.done()


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


def test_parked_requests_free_their_place_and_one_collect_brings_their_answers() -> None:
    async def scenario() -> None:
        leader = Leader()
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        joins = [coalescer.submit(join()) for _ in range(2)]
        await turns()
        joins.append(coalescer.submit(join()))  # a batch of its own
        await turns()
        assert [len(requests) for requests, _ in leader.calls] == [2, 1]
        beats = [coalescer.submit(beat("m0"))]
        await turns()
        assert len(leader.calls) == 3, "parked joins closed the window"
        leader.release(2)
        await asyncio.gather(*beats)
        assert not any(join.done() for join in joins)
        assert (leader.collects, leader.most_collecting) == (1, 1)  # one for both batches
        leader.unpark.set()
        assert await asyncio.gather(*joins) == ["joined"] * 3
        await turns()
        assert leader.collects == 1, "a collect with nothing parked"

    run(scenario())


def test_a_lost_mailbox_fails_what_was_parked_with_an_error_the_client_retries() -> None:
    async def scenario() -> None:
        leader = Leader()
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        parked = coalescer.submit(join())
        await turns()
        leader.drop_mailbox()
        leader.unpark.set()
        with pytest.raises(AnswersLostError):
            await parked
        assert isinstance(AnswersLostError(), UNREACHABLE)

    run(scenario())


def test_a_caller_paused_past_the_ttl_that_sends_a_new_batch_learns_which_answers_were_lost() -> None:
    """The mailbox of the first join goes while its caller is paused; its next batch opens
    a new one before it collects: the first join fails (to be retried), the second is
    answered, and nothing stays waiting."""
    async def scenario() -> None:
        leader = Leader()
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        lost = coalescer.submit(join())
        await turns()
        leader.drop_mailbox()
        kept = coalescer.submit(join())
        await turns()
        leader.unpark.set()
        with pytest.raises(AnswersLostError):
            await lost
        assert await kept == "joined"
        await until(lambda: collector_done(coalescer), "the collector ends")
        assert (coalescer._open, coalescer._collecting) == ({}, {})

    run(scenario())


def test_a_request_its_caller_gave_up_on_leaves_nothing_behind() -> None:
    """Cancelled while parked or while its call is in flight: its batch forgets it, and a
    collect stops once nothing waits."""
    async def scenario() -> None:
        leader = Leader()
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        parked = coalescer.submit(join())
        await turns()
        assert coalescer._collecting
        parked.cancel()
        await turns()
        assert (coalescer._open, coalescer._collecting) == ({}, {})
        leader.unpark.set()
        await until(lambda: collector_done(coalescer), "the collector ends")
        in_flight = [coalescer.submit(beat(f"m{i}")) for i in range(3)]
        await turns()
        for future in in_flight:
            future.cancel()
        await turns()
        assert coalescer._open == {}
        leader.release(len(leader.calls) - 1)  # the beats' call returns, answering no one
        await until(lambda: not coalescer._tasks, "the beats' call ends")
        assert coalescer._open == {}

    run(scenario())


def test_a_sync_attempt_that_timed_out_leaves_nothing_behind() -> None:
    sender = Sender()
    try:
        leader = Leader()
        with pytest.raises(TimeoutError):
            sender.call(leader, join(), timeout_s=0.01)
        coalescer = coalescer_for(leader, sender.loop)

        async def forgotten() -> None:
            await until(lambda: not coalescer._open and not coalescer._collecting, "the attempt forgotten")

        asyncio.run_coroutine_threadsafe(forgotten(), sender.loop).result(timeout=WAIT_S)
    finally:
        sender.loop.call_soon_threadsafe(sender.loop.stop)


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
        # Every batch came from the registry's one coalescer of this leader on the sender's loop.
        assert leader.callers == {coalescer_for(leader, sender.loop).caller}
    finally:
        sender.loop.call_soon_threadsafe(sender.loop.stop)
