"""Disk failures of replicas in the actor layer, without Ray (issues 21 and 24):
a replica whose disk fails stops trusting its log at once, steps aside, shows
the failure in its probe, and comes back by itself once its disk works, from
what it had durably written; nothing acknowledged is lost on the way."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from actors.partition.recovery import RECOVERY_TASK
from coordinator import Errors
from coordinator.messages import OffsetFetchRequest

from tests.actors.replication_support import NAMES, Cluster
from tests.actors.support import Answers, commit, run, until
from tests.failing_disk import FailingDisk


def node_disk(cluster: Cluster, name: str, monkeypatch: pytest.MonkeyPatch) -> FailingDisk:
    disk = FailingDisk(monkeypatch, os.path.dirname(cluster.directory(name)))
    replica = cluster.replicas[name]
    replica.disk.retry_max_ms = 50  # retries come quickly in these tests
    return disk


async def committed(answers: Answers, leader: object, group: str, offset: int) -> None:
    response = await answers.wait(answers.send(leader, commit(group, offset)))  # type: ignore[arg-type]
    assert response.errors() == {("t", 0): Errors.NONE}


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EROFS])
def test_a_follower_whose_disk_fails_leaves_the_isr_at_once_and_rejoins_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int
) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path, replica_lag_time_max_ms=60_000)  # no shrink by lag: the error does it
        a = await cluster.start()
        b = cluster.replicas["b"]
        disk = node_disk(cluster, "b", monkeypatch)
        answers = Answers()
        await committed(answers, a, "g0", 0)
        disk.fail(error)
        # b fails this commit's push: it answers KAFKA_STORAGE_ERROR and leaves the ISR,
        # so the commit is acknowledged by a and c without waiting for the lag time.
        await committed(answers, a, "g1", 1)
        await cluster.until_isr("a", ("a", "c"))
        probe = await b.probe()
        assert probe["role"] == "failed" and probe["disk"]["failed"]
        assert os.strerror(error) in probe["disk"]["error"]
        assert probe["disk"]["since_ms"] <= probe["disk"]["next_retry_ms"]
        assert b.log is None and b.follower is None
        for offset in range(2, 6):  # still broken: it never acknowledges, the ISR stays (a, c)
            await committed(answers, a, f"g{offset}", offset)
        await until(lambda: b.disk.retries >= 2, "b to retry its disk")
        assert cluster.leader_isr("a") == ("a", "c") and b.follower is None
        disk.heal()
        await cluster.until_isr("a", NAMES)
        assert not (await b.probe())["disk"]["failed"]
        await committed(answers, a, "g6", 6)
        await until(lambda: b.follower is not None and b.follower.log.high_watermark == a.log.high_watermark,
                    "b to catch up")
        assert cluster.log_bytes("b") == cluster.log_bytes("a")
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_a_leader_whose_disk_fails_steps_down_acknowledging_nothing_and_follows_once_healed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        a = await cluster.start()
        disk = node_disk(cluster, "a", monkeypatch)
        answers = Answers()
        await committed(answers, a, "g", 1)
        disk.fail(errno.EIO, {"fsync"})  # the write lands in the page cache, its fsync fails
        lost = answers.send(a, commit("g", 2))
        assert (await answers.wait(lost)).errors() == {("t", 0): Errors.NOT_COORDINATOR}
        probe = await a.probe()
        assert probe["disk"]["failed"] and probe["role"] == "failed" and probe["state"] == "CLOSED"
        # The controller elects another ISR member and drops a from the ISR.
        await cluster.elect("b", ("b", "c"), ("c",))
        b = cluster.replicas["b"]
        assert await b.wait_active() == "ACTIVE"
        fetched = await answers.wait(answers.send(b, OffsetFetchRequest("g", (("t", 0),))))
        assert fetched.offsets() == {("t", 0): 1}
        await committed(answers, b, "g", 3)
        disk.heal()
        await until(lambda: not a.disk.failed, "a's disk to recover")
        # Its log was cut at its durable end (the unsynced commit 2 is gone). The new leader's
        # pushes wait for the controller's role (an epoch enters a directory only with it),
        # which its next check sends: then a follows, catches up, and b admits it again.
        pushed = await a.replicate(cluster.controller.state.leader_epoch, "b", None, b"", 0)
        assert pushed.error is Errors.UNKNOWN_LEADER_EPOCH and a.follower is None
        await a.become_follower(cluster.controller.state.leader_epoch, "b", False, NAMES)
        await until(lambda: a.follower is not None, "a to follow b")
        await until(lambda: cluster.leader_isr("b") == NAMES, "a back in b's ISR")
        await until(lambda: cluster.log_bytes("a") == cluster.log_bytes("b"), "a's log to match b's")
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_a_replica_told_to_follow_while_its_disk_is_broken_follows_that_leader_once_healed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        a = await cluster.start()
        c = cluster.replicas["c"]
        disk = node_disk(cluster, "c", monkeypatch)
        answers = Answers()
        disk.full()
        await committed(answers, a, "g", 1)
        await until(lambda: c.disk.failed, "c's disk failure")
        cluster.handles["a"].stop()
        await cluster.elect("b", ("b",), ())  # c's role arrives while it is broken
        probe = await c.become_follower(cluster.controller.state.leader_epoch, "b")
        assert probe["role"] == "failed"
        with pytest.raises(RuntimeError, match="disk failed"):
            await c.become_leader(9, 9, NAMES, NAMES, {"a": None, "b": None})
        disk.heal()
        await until(lambda: c.follower is not None, "c to follow")
        assert c.follower is not None and c.follower.leader == "b"
        assert c.follower.leader_epoch == cluster.controller.state.leader_epoch
        await cluster.close()

    run(scenario())


def test_a_failed_replica_is_retried_on_its_own_whatever_ended_its_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: a replica failed by a full disk stayed out after the heal, with no commits
    to wake it. A deposition while failed (a leader's late push answer) or a reload no longer
    cancels its recovery, and should the recovery end anyway, the controller's next probe
    starts it again: the follower rejoins the ISR with nothing written after the heal."""

    async def scenario() -> None:
        cluster = Cluster(tmp_path, replica_lag_time_max_ms=60_000)
        a = await cluster.start()
        b = cluster.replicas["b"]
        disk = node_disk(cluster, "b", monkeypatch)
        answers = Answers()
        disk.full()
        await committed(answers, a, "g", 1)
        await until(lambda: b.disk.failed, "b's disk failure")
        failure = (await b.probe())["failure"]
        assert failure is not None and os.strerror(errno.ENOSPC) in failure, "the probe says why"
        b.roles.on_deposed(b.epoch + 1)  # what a late fenced push answer does to a former leader
        assert recovering(b), "a deposition does not end the disk's recovery"
        for task in list(b.host.tasks):
            if task.get_name() == RECOVERY_TASK:
                task.cancel()  # ended anyway
        await until(lambda: not recovering(b), "the recovery to end")
        disk.heal()
        await b.probe()  # the controller's probe, every probe_interval_s
        assert recovering(b) or not b.disk.failed
        await until(lambda: not b.disk.failed, "b's disk to recover")
        await cluster.until_isr("a", NAMES)  # no commit since the heal
        answers.all_once()
        await cluster.close()

    run(scenario())


def recovering(replica: object) -> bool:
    return any(t.get_name() == RECOVERY_TASK and not t.done() for t in replica.host.tasks)  # type: ignore[attr-defined]
