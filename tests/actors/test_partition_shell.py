"""The partition actor's shell without Ray: its background tasks are supervised,
its failures reload the partition, and a log that is missing or behind is refused.

`OffsetPartition` is a plain class until `ray.remote` wraps it, so these tests
drive it on an asyncio loop of their own, with a real log in a temporary
directory. Requests go through `_submit` with a recording callback, so a
request answered twice would show.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import actors.partition.maintenance as log_maintenance
from actors.core.settings import ServiceSettings, partition_dir
from actors.core.wire import loads_response
from actors.partition.actor import OffsetPartition
from coordinator import CoordinatorConfig, Errors
from coordinator.messages import JoinGroupRequest, OffsetFetchRequest

from tests.actors.support import WAIT_S, Answers, active, commit, run, until
from tests.core.harness import protocols


def settings_for(tmp_path: Path, **overrides: Any) -> ServiceSettings:
    return ServiceSettings(
        data_dir=str(tmp_path),
        num_partitions=1,
        # A long initial delay keeps a new group's JoinGroup parked for the whole test.
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=600_000),
        maintenance_interval_s=0.02,
        **overrides,
    )


def parked_join() -> JoinGroupRequest:
    return JoinGroupRequest(
        "joiners", 10_000, 30_000, "consumer", protocols("range"), require_known_member_id=False
    )


class OneShot:
    """Replaces a callable so that its first call raises, and later ones behave."""

    def __init__(self, original: Callable[..., Any]) -> None:
        self.original = original
        self.fired = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.fired:
            self.fired = True
            raise RuntimeError("injected fault")
        return self.original(*args, **kwargs)


def inject_into(task: str, partition: OffsetPartition, monkeypatch: pytest.MonkeyPatch) -> OneShot:
    """Make one background task raise once, on its next step."""
    if task == "timers":
        shot = OneShot(partition.runtime.poll_timers)
        monkeypatch.setattr(partition.runtime, "poll_timers", shot)
    elif task == "flush":
        shot = OneShot(partition.runtime.on_durable)
        monkeypatch.setattr(partition.runtime, "on_durable", shot)
    elif task == "gauges":
        shot = OneShot(partition.metrics.flush_counts)
        monkeypatch.setattr(partition.metrics, "flush_counts", shot)
    else:
        shot = OneShot(log_maintenance.write_snapshot)
        monkeypatch.setattr(log_maintenance, "write_snapshot", shot)
    return shot


@pytest.mark.parametrize("task", ["timers", "flush", "gauges", "maintenance"])
def test_a_background_task_that_raises_fails_the_partition_which_reloads(
    task: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        settings = settings_for(tmp_path, snapshot_every_records=1)
        partition = await active(settings)
        answers = Answers()
        durable = answers.send(partition, commit("g", 1))
        assert (await answers.wait(durable)).errors() == {("t", 0): Errors.NONE}
        parked = answers.send(partition, parked_join())
        await asyncio.sleep(0.05)
        assert answers.got[parked] == []
        shot = inject_into(task, partition, monkeypatch)
        # A record to flush (and snapshot), and a wake-up for the timer task.
        racing = answers.send(partition, commit("g", 2))
        partition.serving.timer_wake.set()
        await until(lambda: shot.fired, f"the {task} task to hit the fault")
        assert (await answers.wait(parked)).error is Errors.NOT_COORDINATOR
        await answers.wait(racing)  # NONE or NOT_COORDINATOR, as the race goes: but exactly once
        assert await partition.wait_active(WAIT_S) == "ACTIVE"
        assert partition.runtime.failures == 1
        assert f"the {task} task failed" in caplog.text
        # Serving again, from the log: what was acknowledged is there.
        fetch = answers.send(partition, OffsetFetchRequest("g", (("t", 0),)))
        assert (await answers.wait(fetch)).offsets()[("t", 0)] >= 1
        after = answers.send(partition, commit("g", 3))
        assert (await answers.wait(after)).errors() == {("t", 0): Errors.NONE}
        await partition.unload(partition.epoch)

    run(scenario())


def test_an_append_failure_answers_held_requests_and_reloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        partition = await active(settings_for(tmp_path))
        answers = Answers()
        shot = OneShot(partition.serving.append_and_sync)
        monkeypatch.setattr(partition.serving, "append_and_sync", shot)
        lost = answers.send(partition, commit("g", 7))
        assert (await answers.wait(lost)).errors() == {("t", 0): Errors.NOT_COORDINATOR}
        assert await partition.wait_active(WAIT_S) == "ACTIVE"
        fetch = answers.send(partition, OffsetFetchRequest("g", (("t", 0),)))
        assert (await answers.wait(fetch)).offsets() == {("t", 0): -1}  # never acknowledged, never kept
        await partition.unload(partition.epoch)

    run(scenario())


def test_a_missing_log_directory_is_refused_not_served_empty(tmp_path: Path) -> None:
    async def scenario() -> None:
        partition = OffsetPartition(0, 2, settings_for(tmp_path))
        await partition.activate(known_end=0)
        assert await partition.wait_active(WAIT_S) == "FAILED"
        probe = await partition.probe()
        assert probe["refused"] is True
        assert partition_dir(str(tmp_path), 0) in probe["failure"]
        assert "node" in probe["failure"]
        assert not os.path.exists(partition_dir(str(tmp_path), 0))
        answers = Answers()
        key = answers.send(partition, commit("g", 1))
        assert (await answers.wait(key)).errors() == {("t", 0): Errors.COORDINATOR_LOAD_IN_PROGRESS}

    run(scenario())


def test_a_log_behind_what_the_partition_acknowledged_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = settings_for(tmp_path)
        first = await active(settings)
        answers = Answers()
        for offset in range(3):
            answer = await answers.wait(answers.send(first, commit("g", offset)))
            assert answer.errors()[("t", 0)] is Errors.NONE
        acknowledged = first.runtime.durable_end
        await first.unload(first.epoch)
        # The node's disk is replaced by an older copy with fewer records.
        directory = partition_dir(str(tmp_path), 0)
        shutil.rmtree(directory)
        older = await active(settings, known_end=-1, epoch=2)
        older_answers = Answers()
        await older_answers.wait(older_answers.send(older, commit("g", 0)))
        assert 0 < older.runtime.durable_end < acknowledged
        await older.unload(older.epoch)
        second = OffsetPartition(0, 3, settings)
        await second.activate(known_end=acknowledged)
        assert await second.wait_active(WAIT_S) == "FAILED"
        probe = await second.probe()
        assert probe["refused"] is True and "behind the durable end" in probe["failure"]

    run(scenario())


def test_a_new_leader_waits_for_the_directory_lock_and_reports_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = settings_for(tmp_path)
        old = await active(settings)
        answers = Answers()
        await answers.wait(answers.send(old, commit("g", 5)))
        assert old.runtime.durable_end > 0
        new = OffsetPartition(0, 2, settings)
        await new.activate(known_end=old.runtime.durable_end)
        await until(lambda: new.runtime.failures >= 2, "the new leader to retry its load")
        assert "LogLockedError" in (new.runtime.failure or "")
        assert new.runtime.refused is False
        await old.unload(old.epoch)
        assert await new.wait_active(WAIT_S) == "ACTIVE"
        fetch = Answers()
        fetched = await fetch.wait(fetch.send(new, OffsetFetchRequest("g", (("t", 0),))))
        assert fetched.offsets() == {("t", 0): 5}
        await new.unload(new.epoch)

    run(scenario())


def test_malformed_input_to_the_entry_points_is_refused_to_that_caller(tmp_path: Path) -> None:
    async def scenario() -> None:
        from coordinator.checks import InvalidRequestError

        partition = await active(settings_for(tmp_path))
        for bad in ("a str", None, {"group_id": "g"}):
            with pytest.raises(InvalidRequestError):
                await partition.handle(bad)
        for caller, batch, requests in (
            (1, 0, "not a list"), ("1", 0, []), (1, None, []), (1.0, 0, []),
        ):
            with pytest.raises(InvalidRequestError):
                await partition.handle_batch(caller, batch, requests)
        with pytest.raises(InvalidRequestError):
            await partition.collect("not an id", 1)
        with pytest.raises(InvalidRequestError):
            await partition.collect(1, None)
        answers, parked, _ = loads_response(await partition.handle_batch(1, 0, [None, commit("g", 1)]))
        answered = dict(answers)
        assert parked == 0 and isinstance(answered[0], InvalidRequestError)
        assert answered[1].errors() == {("t", 0): Errors.NONE}
        assert partition.runtime.state.value == "ACTIVE"
        assert partition.runtime.failures == 0
        await partition.unload(partition.epoch)

    run(scenario())

