"""The retry loop of every call to a service actor, sync and async, and its
one definition of what is worth retrying.

Retriable, and nothing else:
- a response whose whole request failed with a coordinator error
  (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE),
  per `coordinator_error`;
- an actor that cannot be reached: RayActorError (dead, restarting),
  ActorUnavailableError, or NoLeaderError (the controller is between two
  leaders).
The caller refreshes what it routes by (`on_retry`) after each backoff and
tries again until its deadline, then gets CoordinatorUnavailableError.

A request the actor refused as malformed (InvalidRequestError) is never
retried: it would be refused again. Ray delivers it wrapped in a
RayTaskError; it reaches the caller unwrapped, as InvalidRequestError.
Any other error of the call is raised as it is.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

from coordinator.checks import InvalidRequestError
from coordinator.errors import RETRIABLE_COORDINATOR_ERRORS, Errors
from coordinator.status import item_errors

T = TypeVar("T")


class CoordinatorUnavailableError(RuntimeError):
    """The coordinator did not answer usefully before the call's deadline."""


class NoLeaderError(RuntimeError):
    """The controller is between two leaders of a partition."""


class AnswersLostError(RuntimeError):
    """The leader no longer holds a parked request's answer for this process (it
    was silent longer than its mailbox TTL, `ServiceSettings.mailbox_ttl_s`; see
    actors/partition/batches.py): sent again, as after a lost call."""


UNREACHABLE = (RayActorError, ActorUnavailableError, NoLeaderError, AnswersLostError)
# An attempt that did not answer before the call's deadline (a paused or hung actor).
ATTEMPT_TIMED_OUT = (GetTimeoutError, TimeoutError)
# The least time an attempt gets, so a call past its deadline still makes one try.
MIN_ATTEMPT_S = 0.001


def coordinator_error(response: Any) -> Errors | None:
    """The retriable error a whole response carries, if any: every item of a
    per-partition or per-group answer has it, or the response's own error."""
    items = item_errors(response)
    errors = {getattr(response, "error", None)} if items is None else set(items)
    if len(errors) == 1:
        (error,) = errors
        if error in RETRIABLE_COORDINATOR_ERRORS:
            return error
    return None


def retriable(exc: Exception) -> Exception:
    """`exc`, raised by an attempt, when it is worth another attempt; else what the
    caller gets raised: a refused request unwrapped, any other error as it is."""
    if isinstance(exc, UNREACHABLE + ATTEMPT_TIMED_OUT):
        return exc
    if isinstance(exc, RayTaskError) and isinstance(exc.cause, InvalidRequestError):
        raise exc.cause from None
    raise exc


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter, like Kafka's retry.backoff(.max).ms."""

    initial_s: float = 0.05
    max_s: float = 1.0

    def delay_s(self, attempt: int) -> float:
        base = min(self.max_s, self.initial_s * 2.0**attempt)
        return base * random.uniform(0.8, 1.2)


@dataclass(frozen=True, slots=True)
class Retry:
    """How long one call may take and how it backs off; `what` names the call in errors."""

    timeout_s: float
    backoff: Backoff
    what: str

    def deadline(self) -> float:
        return time.monotonic() + self.timeout_s

    def delay_or_raise(self, attempt: int, deadline: float, last: object) -> float:
        """The backoff before the next attempt, or CoordinatorUnavailableError
        if it would end after the deadline."""
        delay = self.backoff.delay_s(attempt)
        if time.monotonic() + delay > deadline:
            raise CoordinatorUnavailableError(
                f"{self.what}: no coordinator answered in time (last: {last!r:.200})"
            ) from (last if isinstance(last, BaseException) else None)
        return delay


def call_with_retry(
    call: Callable[[float], T], retry: Retry, on_retry: Callable[[object], None] | None = None
) -> T:
    """`call(timeout_s)` until it answers with something not retriable or the deadline
    passes; `on_retry(last)` runs after each backoff, before the next attempt.
    `timeout_s` is the time left before the deadline: an attempt must not wait
    longer (`ray.get(..., timeout=timeout_s)`), so a paused actor never holds a
    caller past its deadline."""
    deadline = retry.deadline()
    for attempt in itertools.count():
        try:
            response = call(max(MIN_ATTEMPT_S, deadline - time.monotonic()))
        except Exception as exc:
            last: object = retriable(exc)
        else:
            if coordinator_error(response) is None:
                return response
            last = response
        time.sleep(retry.delay_or_raise(attempt, deadline, last))
        if on_retry is not None:
            on_retry(last)
    raise AssertionError("unreachable")


async def call_with_retry_async(
    call: Callable[[], Awaitable[T]],
    retry: Retry,
    on_retry: Callable[[object], Awaitable[None]] | None = None,
) -> T:
    """`call_with_retry` for coroutines: the backoff sleeps without blocking the loop,
    and each attempt is cancelled at the deadline."""
    deadline = retry.deadline()
    for attempt in itertools.count():
        try:
            response = await asyncio.wait_for(call(), max(MIN_ATTEMPT_S, deadline - time.monotonic()))
        except Exception as exc:
            last: object = retriable(exc)
        else:
            if coordinator_error(response) is None:
                return response
            last = response
        await asyncio.sleep(retry.delay_or_raise(attempt, deadline, last))
        if on_retry is not None:
            await on_retry(last)
    raise AssertionError("unreachable")
