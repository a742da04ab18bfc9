"""The client's retry loop (actors/client/retry.py), without a cluster: fake actor
handles whose `.remote()` returns refs that `await` or a fake `ray.get`
resolves. What is retried and what is not, and that the requests failing
together after a failover share one refresh of the routing."""

from __future__ import annotations

import asyncio
import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

import actors.client.client
import actors.client.coalesce
from actors.client.client import ROUTING_WAIT_S, Client
from actors.client.coalesce import Coalescer, coalescer_for, process_sender
from actors.client.retry import (
    Backoff,
    CoordinatorUnavailableError,
    Retry,
    call_with_retry,
    call_with_retry_async,
    coordinator_error,
)
from actors.core.wire import dumps_response
from coordinator import Errors, InvalidRequestError
from coordinator.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitResponse,
    PartitionResult,
)
from coordinator.routing import Routing

OK = HeartbeatResponse(Errors.NONE)
QUICK = Backoff(initial_s=0.001, max_s=0.002)
ROUTING_S = 0.05  # how long the fake controller takes to answer: refreshes overlap
ONE = Routing(1)  # one partition, never repartitioned


class Ref:
    """What a fake `.remote()` returns: awaitable, or resolved by FakeRay.get."""

    def __init__(self, value: object, delay_s: float = 0.0) -> None:
        self.value, self.delay_s = value, delay_s

    def result(self) -> Any:
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> Any:
        await asyncio.sleep(self.delay_s)
        return self.result()


class FakeRay:
    @staticmethod
    def get(ref: Ref, timeout: float | None = None) -> Any:
        if timeout is not None and ref.delay_s > timeout:
            time.sleep(timeout)
            raise GetTimeoutError("no answer in time")
        time.sleep(ref.delay_s)
        return ref.result()


class Method:
    def __init__(self, answer: Any, delay_s: float = 0.0) -> None:
        self.answer, self.delay_s = answer, delay_s
        self.calls: list[tuple[object, ...]] = []
        self._lock = threading.Lock()

    def remote(self, *args: object) -> Ref:
        with self._lock:
            self.calls.append(args)
            count = len(self.calls)
        return Ref(self.answer(count) if callable(self.answer) else self.answer, self.delay_s)


class Batch:
    """A fake `handle_batch`: answers every request with `entry`, or fails
    with `entry` when it is a RayActorError."""

    def __init__(self, entry: object) -> None:
        self.entry = entry
        self.calls: list[list[object]] = []

    def remote(self, caller: int, batch: int, requests: list[object]) -> Ref:
        self.calls.append(requests)
        if isinstance(self.entry, RayActorError):
            return Ref(self.entry)
        return Ref(dumps_response(([(i, self.entry) for i in range(len(requests))], 0, 0)))


class Leader:
    def __init__(self, answer: object, entry: object) -> None:
        self.handle_wire = Method(answer)
        self.handle_batch = Batch(entry)

    def calls(self) -> int:
        return len(self.handle_wire.calls) + len(self.handle_batch.calls)


class Controller:
    """Answers the first routing call with `first` at epoch 1; every later
    `routing` call and every `routing_after` (a client's refresh after a failed
    attempt) with `then`, at a newer epoch."""

    def __init__(self, first: Leader, then: Leader) -> None:
        self.routing = Method(lambda n: (1, [first if n == 1 else then], [n], ONE), ROUTING_S)
        self.routing_after = Method(lambda n: (1, [then], [n + 1], ONE), ROUTING_S)

    def refreshes(self) -> int:
        return len(self.routing.calls) + len(self.routing_after.calls)


@pytest.fixture(autouse=True)
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(actors.client.client, "ray", FakeRay)
    monkeypatch.setattr(actors.client.coalesce, "ray", FakeRay)  # a sync caller's own call
    yield


def dead() -> Leader:
    return Leader(RayActorError(), RayActorError())


def live() -> Leader:
    return Leader(dumps_response(OK), OK)


def refused() -> RayTaskError:
    """An InvalidRequestError raised in an actor, as Ray delivers it."""
    return RayTaskError(
        "handle_wire", "Traceback: ...", InvalidRequestError("bad request")
    ).as_instanceof_cause()  # type: ignore[no-any-return]


def heartbeat(i: int = 0) -> HeartbeatRequest:
    return HeartbeatRequest(f"g{i}", 1, "m")


# ------------------------------------------------------- the shared refresh


@pytest.mark.parametrize("coalesce", [False, True])
def test_coroutines_failing_together_share_one_routing_refresh(coalesce: bool) -> None:
    controller = Controller(dead(), live())
    client = Client(controller, timeout_s=5, backoff=QUICK, coalesce=coalesce)

    async def many() -> list[Any]:
        return await asyncio.gather(*(client.send_async(heartbeat(i)) for i in range(50)))

    answers = asyncio.run(many())

    assert answers == [OK] * 50
    assert len(controller.routing.calls) == 1, "one call at start"
    assert controller.routing_after.calls == [(0, 1, ROUTING_WAIT_S)], (
        "one shared refresh, after the epoch that failed"
    )


def test_threads_failing_together_share_one_routing_refresh() -> None:
    controller = Controller(dead(), live())
    client = Client(controller, timeout_s=5, backoff=QUICK)
    start = threading.Barrier(20)
    answers: list[Any] = []

    def member(i: int) -> None:
        start.wait()
        answers.append(client.send(heartbeat(i)))

    threads = [threading.Thread(target=member, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert answers == [OK] * 20
    assert len(controller.routing.calls) == 1, "one call at start"
    assert controller.routing_after.calls == [(0, 1, ROUTING_WAIT_S)], "one shared refresh"


def test_an_explicit_refresh_always_asks_the_controller() -> None:
    controller = Controller(live(), live())
    client = Client(controller, timeout_s=5, backoff=QUICK)
    client.refresh()
    asyncio.run(client.refresh_async())
    assert len(controller.routing.calls) == 3


class StaticController:
    """A picklable controller handle with one live leader."""

    @property
    def routing(self) -> Method:
        return Method((1, [live()], [1], ONE))


def test_a_client_sent_to_another_process_is_a_new_client_there() -> None:
    client = Client(StaticController(), timeout_s=7, backoff=QUICK, coalesce=False)
    client.send(heartbeat())
    copy = pickle.loads(pickle.dumps(client))
    assert copy is not client and (copy.timeout_s, copy.backoff, copy.coalesce) == (7, QUICK, False)
    assert copy.send(heartbeat()) == OK


def test_a_client_retries_through_a_failover_until_its_deadline() -> None:
    controller = Controller(dead(), dead())
    client = Client(controller, timeout_s=0.3, backoff=QUICK)
    with pytest.raises(CoordinatorUnavailableError, match="HeartbeatRequest for group 'g0'"):
        client.send(heartbeat())
    assert len(controller.routing_after.calls) > 1


# ------------------------------------------------ a malformed request is final


def test_a_refused_request_raises_invalid_request_at_once() -> None:
    leader = Leader(refused(), InvalidRequestError("bad request"))
    controller = Controller(leader, live())
    client = Client(controller, timeout_s=5, backoff=QUICK)

    with pytest.raises(InvalidRequestError, match="bad request") as raised:
        client.send(heartbeat())

    assert type(raised.value) is InvalidRequestError
    assert leader.calls() == 1 and controller.refreshes() == 1


@pytest.mark.parametrize("coalesce", [False, True])
def test_a_refused_request_raises_invalid_request_at_once_async(coalesce: bool) -> None:
    leader = Leader(refused(), InvalidRequestError("bad request"))
    controller = Controller(leader, live())
    client = Client(controller, timeout_s=5, backoff=QUICK, coalesce=coalesce)

    async def two() -> list[Any]:
        # Two requests in one loop turn: a batch when coalescing.
        return await asyncio.gather(
            *(client.send_async(heartbeat(i)) for i in range(2)), return_exceptions=True
        )

    answers = asyncio.run(two())

    assert [type(a) for a in answers] == [InvalidRequestError, InvalidRequestError]
    assert leader.calls() == (1 if coalesce else 2) and controller.refreshes() == 1


# ------------------------------------------------------------ the one helper

RETRY = Retry(timeout_s=5, backoff=QUICK, what="a call")


def test_what_is_retried() -> None:
    failing = OffsetCommitResponse((PartitionResult("t", 0, Errors.NOT_COORDINATOR),) * 2)
    mixed = OffsetCommitResponse(
        (PartitionResult("t", 0, Errors.NOT_COORDINATOR), PartitionResult("t", 1, Errors.NONE))
    )
    assert coordinator_error(failing) is Errors.NOT_COORDINATOR
    assert coordinator_error(HeartbeatResponse(Errors.COORDINATOR_LOAD_IN_PROGRESS)) is not None
    assert coordinator_error(mixed) is None, "a partial failure is an answer"
    assert coordinator_error(HeartbeatResponse(Errors.UNKNOWN_MEMBER_ID)) is None
    assert coordinator_error({"t": 3}) is None and coordinator_error(Errors.NONE) is None

    outcomes: list[object] = [
        RayActorError(),
        ActorUnavailableError("restarting", b"0" * 16),
        actors.client.client.NoLeaderError(0),
        HeartbeatResponse(Errors.NOT_COORDINATOR),
        OK,
    ]
    seen: list[object] = []

    def attempt(timeout_s: float) -> object:
        assert 0 < timeout_s <= RETRY.timeout_s
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    assert call_with_retry(attempt, RETRY, seen.append) is OK
    assert [type(x).__name__ for x in seen] == [
        "RayActorError",
        "ActorUnavailableError",
        "NoLeaderError",
        "HeartbeatResponse",
    ]


def test_other_errors_are_not_retried() -> None:
    other = RayTaskError("handle", "tb", KeyError("x")).as_instanceof_cause()
    for error in (other, InvalidRequestError("bad"), ValueError("bad")):
        attempt = Method(error)
        with pytest.raises(type(error)):
            call_with_retry(lambda _, attempt=attempt: attempt.remote().result(), RETRY)
        assert len(attempt.calls) == 1


def test_the_async_helper_unwraps_a_refused_request() -> None:
    calls: list[int] = []

    async def attempt() -> object:
        calls.append(1)
        raise refused()

    with pytest.raises(InvalidRequestError) as raised:
        asyncio.run(call_with_retry_async(attempt, RETRY))
    assert type(raised.value) is InvalidRequestError and calls == [1]


def test_an_attempt_that_never_answers_ends_at_the_call_deadline() -> None:
    """A paused leader never answers: each attempt gets only the time left before the
    deadline (`ray.get(..., timeout=)`, `asyncio.wait_for`), so no caller waits past it."""
    given: list[float] = []

    def attempt(timeout_s: float) -> object:
        given.append(timeout_s)
        time.sleep(min(timeout_s, 0.05))
        raise GetTimeoutError("ray.get gave up")

    with pytest.raises(CoordinatorUnavailableError):
        call_with_retry(attempt, Retry(timeout_s=0.3, backoff=QUICK, what="a call"))
    assert len(given) > 1 and given[0] <= 0.3 and given == sorted(given, reverse=True)

    async def hang() -> object:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    with pytest.raises(CoordinatorUnavailableError):
        asyncio.run(call_with_retry_async(hang, Retry(timeout_s=0.2, backoff=QUICK, what="a call")))


# ------------------------------------------------- parked answers the leader lost


class Call:
    def __init__(self, fn: Any) -> None:
        self.remote = fn


class ForgetfulLeader:
    """Parks every request of a batch; the caller's first mailbox is dropped (its TTL
    passed while it was paused), so the first collect reports it gone; what is sent
    again is answered `answer` through the next mailbox."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.batches: list[list[object]] = []
        self.generation = 1
        self.parked: list[tuple[int, int]] = []
        self.handle_wire = Call(self._never)
        self.handle_batch = Call(self._batch)
        self.collect = Call(self._collect)

    def _never(self, request: object) -> Ref:
        raise AssertionError("a request that may park goes in a batch")

    def _batch(self, caller: int, number: int, requests: list[object]) -> Ref:
        self.batches.append(requests)
        self.parked = [(number, index) for index in range(len(requests))]
        return Ref(dumps_response(([], len(requests), self.generation)))

    def _collect(self, caller: int, oldest: int) -> Ref:
        if len(self.batches) == 1:
            self.generation, self.parked = self.generation + 1, []
            return Ref(dumps_response((self.generation, [])))
        answers, self.parked = [(number, index, self.answer) for number, index in self.parked], []
        return Ref(dumps_response((self.generation, answers)))


@pytest.mark.parametrize("synchronous", [True, False])
def test_a_parked_join_whose_answer_the_leader_lost_is_sent_again(synchronous: bool) -> None:
    """The same JoinGroup (same member id: a rejoin, safe in Kafka) goes again and is
    answered; nothing of the lost attempt stays in the coalescer."""
    joined = JoinGroupResponse(Errors.NONE, "m-1", 2)
    leader = ForgetfulLeader(joined)
    client = Client(Controller(leader, leader), timeout_s=5, backoff=QUICK)  # type: ignore[arg-type]
    request = JoinGroupRequest("g", 30_000, 30_000, "consumer", (), member_id="m-1")
    if synchronous:
        assert client.join_group(request) == joined
        coalescer = coalescer_for(leader, process_sender().loop)
    else:

        async def join() -> tuple[JoinGroupResponse, Coalescer]:
            return await client.join_group_async(request), coalescer_for(leader, asyncio.get_running_loop())

        answer, coalescer = asyncio.run(join())
        assert answer == joined
    assert leader.batches == [[request], [request]]
    assert (coalescer._open, coalescer._collecting) == ({}, {})
