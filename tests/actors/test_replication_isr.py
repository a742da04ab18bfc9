"""Replication in the actor layer, without Ray: three OffsetPartition replicas
(min ISR 2) on one loop, each with its own log; commits are answered at the
high watermark, the ISR follows stopped and returning followers through the
(fake) controller, and below min ISR writes are refused while reads go on.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from actors.core.settings import ServiceSettings, partition_dir, replication_defaults
from coordinator import Errors
from coordinator.messages import HeartbeatRequest, OffsetFetchRequest

from tests.actors.replication_support import NAMES, Cluster
from tests.actors.support import Answers, acknowledged, active, commit, run, until


def fetch(group: str) -> OffsetFetchRequest:
    return OffsetFetchRequest(group, (("t", 0),))


def test_a_commit_is_answered_only_once_every_isr_follower_has_it_durable(tmp_path: Path) -> None:
    async def scenario() -> None:
        # A long lag time: the stopped follower stays in the ISR for the whole test.
        cluster = Cluster(tmp_path, replica_lag_time_max_ms=60_000)
        leader = await cluster.start()
        b, c = cluster.replicas["b"], cluster.replicas["c"]
        answers = Answers(watch=lambda: (b.follower.log.high_watermark, c.follower.log.high_watermark))
        first = answers.send(leader, commit("g", 1))
        assert (await answers.wait(first)).errors() == {("t", 0): Errors.NONE}
        assert min(answers.seen[first]) >= 1
        cluster.handles["c"].stop()
        second = answers.send(leader, commit("g", 2))
        state = leader.leader.state
        await until(lambda: state.follower("b").log_end == 2, "b to acknowledge the second commit")
        assert answers.got[second] == [], "answered before c, in the ISR, had it"
        assert state.high_watermark == 1 and c.follower.log.high_watermark == 1
        cluster.handles["c"].resume()
        assert (await answers.wait(second)).errors() == {("t", 0): Errors.NONE}
        assert answers.seen[second] == (2, 2)
        assert cluster.controller.changes == []  # the ISR never changed
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_the_isr_follows_stopped_and_returning_followers_and_min_isr_refuses_writes(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        leader = await cluster.start()
        answers = Answers()
        assert (await answers.wait(answers.send(leader, commit("g", 1)))).errors()[("t", 0)] is Errors.NONE

        # c stops: it leaves the ISR after the lag time, and commits go on with a and b.
        cluster.handles["c"].stop()
        during = answers.send(leader, commit("g", 2))
        assert (await answers.wait(during)).errors() == {("t", 0): Errors.NONE}
        await cluster.until_isr("a", ("a", "b"))
        assert (await answers.wait(answers.send(leader, commit("g", 3)))).errors()[("t", 0)] is Errors.NONE

        # b stops too: the ISR shrinks to a alone, below min ISR 2.
        cluster.handles["b"].stop()
        await cluster.until_isr("a", ("a",))
        log_end = leader.log.log_end_offset
        refused = answers.send(leader, commit("g", 4))
        assert answers.one(refused).errors() == {("t", 0): Errors.COORDINATOR_NOT_AVAILABLE}  # at once
        assert not leader.runtime.has_pending and leader.log.log_end_offset == log_end
        assert answers.one(answers.send(leader, fetch("g"))).offsets() == {("t", 0): 3}
        beat = answers.one(answers.send(leader, HeartbeatRequest("g", 1, "m")))
        assert beat.error is Errors.UNKNOWN_MEMBER_ID  # handled by the group, not refused
        probe = await leader.probe()
        assert (probe["role"], probe["isr"], probe["writable"]) == ("leader", ["a"], False)

        # Both return, catch up and rejoin the ISR (one change at a time); commits succeed again.
        cluster.handles["b"].resume()
        cluster.handles["c"].resume()
        await cluster.until_isr("a", NAMES)
        assert (await answers.wait(answers.send(leader, commit("g", 5)))).errors()[("t", 0)] is Errors.NONE
        for name in ("b", "c"):
            assert cluster.replicas[name].follower.log.high_watermark == leader.log.log_end_offset
        kinds = [(change.kind.value, change.isr, error) for change, error in cluster.controller.changes]
        assert kinds == [
            ("shrink", ("a", "b"), Errors.NONE),
            ("shrink", ("a",), Errors.NONE),
            ("expand", ("a", "b"), Errors.NONE),
            ("expand", NAMES, Errors.NONE),
        ] or kinds == [
            ("shrink", ("a", "b"), Errors.NONE),
            ("shrink", ("a",), Errors.NONE),
            ("expand", ("a", "c"), Errors.NONE),
            ("expand", NAMES, Errors.NONE),
        ]
        probe = await leader.probe()
        assert probe["high_watermark"] == probe["log_end"] == leader.log.log_end_offset
        assert {name: f["lag"] for name, f in probe["followers"].items()} == {"b": 0, "c": 0}
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_a_commit_the_isr_never_gets_times_out_once_and_is_never_acknowledged_later(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path, commit_timeout_ms=600)
        leader = await cluster.start()
        answers = Answers()
        for name in ("b", "c"):
            cluster.handles[name].stop()
        stuck = answers.send(leader, commit("g", 1))
        response = await answers.wait(stuck)  # the ISR shrinks below min ISR meanwhile: the HWM cannot move
        assert response.errors() == {("t", 0): Errors.COORDINATOR_NOT_AVAILABLE}
        for name in ("b", "c"):
            cluster.handles[name].resume()
        await cluster.until_isr("a", NAMES)
        await until(lambda: leader.runtime.durable_end == leader.runtime.written_end, "the HWM to pass it")
        assert (await answers.wait(answers.send(leader, fetch("g")))).offsets() == {("t", 0): 1}  # committed
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_without_replicas_the_leader_reports_its_role_and_releases_at_its_durable_end(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = ServiceSettings(data_dir=str(tmp_path), num_partitions=1, maintenance_interval_s=3600)
        partition = await active(settings)
        answers = Answers()
        assert (await answers.wait(answers.send(partition, commit("g", 1)))).errors()[("t", 0)] is Errors.NONE
        probe = await partition.probe()
        assert {key: probe[key] for key in ("role", "isr", "high_watermark", "log_end", "followers")} == {
            "role": "leader", "isr": ["local"], "high_watermark": 1, "log_end": 1, "followers": {},
        }
        assert os.path.isdir(partition_dir(str(tmp_path), 0))  # RF 1 keeps today's directory
        await partition.unload(partition.epoch)

    run(scenario())


@pytest.mark.parametrize(
    "overrides",
    [
        {"replication_factor": 0},
        {"min_insync_replicas": 0},
        {"replication_factor": 2, "min_insync_replicas": 3},
        {"replica_lag_time_max_ms": 0},
        {"commit_timeout_ms": -1},
        {"replication_max_bytes": 1.5},
        {"replication_link": "yes"},
    ],
)
def test_replication_settings_are_checked(overrides: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ServiceSettings(data_dir=str(tmp_path), **overrides)
    assert ServiceSettings(data_dir=str(tmp_path), replication_factor=3, min_insync_replicas=3)


@pytest.mark.parametrize("nodes, expected", [(1, (1, 1)), (2, (2, 1)), (3, (3, 2)), (10, (3, 2))])
def test_replication_defaults_follow_the_node_count(nodes: int, expected: tuple[int, int]) -> None:
    assert replication_defaults(nodes) == expected


def _disk_full(*_: Any, **__: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_follower_whose_disk_fills_leaves_the_isr_and_the_leader_goes_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        leader = await cluster.start()
        answers = Answers()
        assert (await answers.wait(answers.send(leader, commit("g", 1)))).errors()[("t", 0)] is Errors.NONE
        follower = cluster.replicas["c"].follower
        assert follower is not None
        follower.log.append_raw = _disk_full  # type: ignore[method-assign]
        pending = answers.send(leader, commit("g", 2))
        await cluster.until_isr("a", ("a", "b"))
        assert (await answers.wait(pending)).errors() == {("t", 0): Errors.NONE}
        assert (await answers.wait(answers.send(leader, commit("g", 3)))).errors()[("t", 0)] is Errors.NONE
        assert (await answers.wait(answers.send(leader, fetch("g")))).offsets() == {("t", 0): 3}
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_a_leader_whose_disk_fails_acknowledges_nothing_and_an_isr_member_takes_over(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        leader = await cluster.start()
        answers = Answers()
        assert (await acknowledged(answers, leader, "g", 1)).errors()[("t", 0)] is Errors.NONE
        assert leader.log is not None
        # b and c hold what was acknowledged (a follower that answered late may have
        # left the ISR for a while, and the election below takes both from the ISR).
        end = leader.log.log_end_offset
        followers = [cluster.replicas[n] for n in ("b", "c")]
        await until(lambda: all(
            f.follower is not None and f.follower.log.log_end_offset == end for f in followers
        ), "b and c to hold the acknowledged commit")
        leader.log.append = _disk_full  # type: ignore[method-assign]
        failed = await answers.wait(answers.send(leader, commit("g", 2)))
        assert failed.errors() == {("t", 0): Errors.NOT_COORDINATOR}
        # The controller sees the failure (probe) and elects from the ISR.
        await until(lambda: leader.disk.failed, "the leader's disk failure")
        assert (await leader.probe())["role"] == "failed"
        probe = await cluster.elect("b", ("b", "c"), ("c", "a"))
        assert probe["role"] == "leader"
        new = cluster.replicas["b"]
        # What the old leader acknowledged is there (answered once the new ISR has it).
        read = await answers.wait(answers.send(new, fetch("g")))
        # Seen once in CI at load 29 (-1), not reproduced since: say all there is if it recurs.
        assert read.offsets() == {("t", 0): 1}, (read, await new.probe(), new.loaded_records)
        assert (await acknowledged(answers, new, "g", 3)).errors()[("t", 0)] is Errors.NONE
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_a_replica_refused_for_a_missing_log_may_lead_again_once_it_follows(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        c = cluster.replicas["c"]
        others = {name: handle for name, handle in cluster.handles.items() if name != "c"}
        # Told to lead a partition that acknowledged 5 records, with no log on its disk.
        await c.become_leader(1, 1, NAMES, NAMES, others, None, known_end=5)
        await until(lambda: c.runtime.refused, "c to refuse its missing log")
        assert (await c.probe())["refused"]
        # The controller makes it a new follower instead: it catches up from the leader.
        probe = await c.become_follower(2, "a")
        assert probe["role"] == "follower" and not probe["refused"] and probe["failure"] is None
        await cluster.close()

    run(scenario())
