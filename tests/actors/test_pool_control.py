"""The pool's control thread (actors/pool/pool.py) never fails silently: a failed step is
kept (control_errors, errors() as member "pool") and the thread goes on; an error that ends
the thread is kept too and control_status() says it stopped. No Ray: a fake client and policy."""

from __future__ import annotations

import threading
import time
from typing import Any

from actors.pool.pool import ConsumerPool
from coordinator.errors import Errors
from coordinator.lag_watch import LagWatchResponse
from coordinator.pool_policy import Decision, LagRow


class Fatal(BaseException):
    """Not an Exception: ends the control thread."""


class FakeClient:
    timeout_s = 1.0

    def send(self, request: Any, timeout_s: float = 0.0) -> LagWatchResponse:
        time.sleep(0.01)  # the leader's answer, as the lag moves
        return LagWatchResponse(Errors.NONE, "step", (("g", 10, 100),), ())


class ScriptedPolicy:
    watched = True

    def __init__(self, script: list[BaseException | None]) -> None:
        self.script, self.calls = script, 0

    def next_check_ms(self, now_ms: int) -> int:
        return now_ms + 1_000

    def decide(self, rows: list[LagRow], members: int, now_ms: int, pending: int = 0) -> Decision:
        self.calls += 1
        failure = self.script.pop(0) if self.script else None
        if failure is not None:
            raise failure
        return Decision(members, "steady", 10, 100, 0)


def control(script: list[BaseException | None]) -> ConsumerPool:
    pool = ConsumerPool("g", ["t"], lambda t, p, s: s, target_lag_messages=100,
                        client=FakeClient(), policy=ScriptedPolicy(script))  # type: ignore[arg-type]
    pool._thread = threading.Thread(target=pool._run_control, daemon=True)
    pool._thread.start()
    return pool


def wait_until(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_failed_step_is_kept_and_the_thread_goes_on() -> None:
    pool = control([RuntimeError("boom")])
    try:
        wait_until(lambda: pool.control_steps >= 2)
        status = pool.control_status()
        assert status["running"] and status["errors"] == 1 and "boom" in status["last_error"]["error"]
        errors = pool.errors()
        assert [e["member"] for e in errors] == ["pool"] and "boom" in errors[0]["error"]
    finally:
        pool._stop.set()


def test_an_error_that_ends_the_thread_is_kept_and_said() -> None:
    pool = control([Fatal("the end")])
    wait_until(lambda: not pool.control_status()["running"])
    status = pool.control_status()
    assert status["errors"] == 1 and "control thread stopped" in status["last_error"]["error"]
    assert "the end" in pool.errors()[0]["error"]
