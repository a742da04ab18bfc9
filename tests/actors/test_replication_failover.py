"""Leader changes of a replicated partition in the actor layer, without Ray:
a promoted follower serves from its hot shard with no load, a deposed leader
gets nothing acknowledged, and its divergent tail is truncated away until
every log is byte for byte the new leader's.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import replace
from pathlib import Path

import pytest

from coordinator import Errors
from coordinator.messages import OffsetFetchRequest
from coordinator.runtime import RuntimeState

from tests.actors.replication_support import NAMES, Cluster
from tests.actors.support import Answers, acknowledged, commit, run, until


def fetch(group: str) -> OffsetFetchRequest:
    return OffsetFetchRequest(group, (("t", 0),))


def test_a_promoted_follower_serves_the_committed_offsets_at_once_without_loading(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        a = await cluster.start()
        answers = Answers()
        for offset in range(5):
            response = await acknowledged(answers, a, f"g{offset}", offset)
            assert response.errors() == {("t", 0): Errors.NONE}
        b = cluster.replicas["b"]
        end = a.log.log_end_offset
        await until(lambda: b.follower.high_watermark == end, "b to learn the high watermark")
        assert (await b.probe())["role"] == "follower"
        # a's node stalls; the controller elects b with the ISR it keeps (b, c).
        cluster.handles["a"].stop()
        probe = await cluster.elect("b", ("b", "c"), ("c",))
        assert (probe["state"], probe["role"], probe["leader_epoch"]) == ("ACTIVE", "leader", 2)
        assert b.loaded_records == 0 and b.progress == 0  # the hot shard, not a load
        assert (probe["high_watermark"], probe["log_end"]) == (end, end)
        # Nothing to load or commit: answered once c confirms b still leads (one push).
        reads = [answers.send(b, fetch(f"g{offset}")) for offset in range(5)]
        for offset, read in enumerate(reads):
            assert (await answers.wait(read)).offsets() == {("t", 0): offset}
        assert (await acknowledged(answers, b, "g0", 100)).errors() == {("t", 0): Errors.NONE}
        assert cluster.replicas["c"].follower.log.high_watermark == end + 1
        answers.all_once()
        await cluster.close()

    run(scenario())


async def depose_a(cluster: Cluster, answers: Answers) -> tuple[list[int], int]:
    """a leads and has one commit committed, then writes more that nobody else
    gets; b is elected at epoch 2 behind its back. Returns a's pending
    requests and the committed log end."""
    a = await cluster.start()
    assert (await acknowledged(answers, a, "g", 1)).errors()[("t", 0)] is Errors.NONE
    committed = a.log.log_end_offset
    for name in ("b", "c"):
        cluster.handles[name].stop()
    pending = [answers.send(a, commit("g", n)) for n in (2, 3)]
    pending.append(answers.send(a, fetch("g")))  # observed the uncommitted commits
    await until(lambda: a.log.high_watermark == committed + 2, "a's own fsync of its uncommitted tail")
    assert all(answers.got[key] == [] for key in pending)
    cluster.handles["a"].stop()  # the controller no longer sees a
    await cluster.elect("b", ("b", "c"), ("c",))
    for name in ("b", "c"):
        cluster.handles[name].resume()
    return pending, committed


def test_a_deposed_leader_gets_nothing_acknowledged(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path, replica_lag_time_max_ms=60_000)
        answers = Answers()
        pending, committed = await depose_a(cluster, answers)
        a = cluster.replicas["a"]
        # a's next push reaches a follower of epoch 2, which refuses it: a steps down.
        await until(lambda: a.leader is None, "a to step down")
        for key in pending:
            response = await answers.wait(key)
            errors = set(response.errors().values()) if hasattr(response, "errors") else {response.error}
            assert errors <= {Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE}, errors
        late = answers.send(a, commit("g", 4))
        assert answers.one(late).errors() == {("t", 0): Errors.NOT_COORDINATOR}
        assert (await a.probe())["role"] == "deposed"
        for name in ("b", "c"):  # a's uncommitted tail reached no one
            assert cluster.replicas[name].log.log_end_offset == committed
        assert cluster.controller.state.leader == "b"
        answers.all_once()
        await cluster.close()

    run(scenario())


def rejoin_lines(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    """Per replica, the line `actors.partition.phases` logged when it caught up."""
    pattern = re.compile(r"replica (\w+) caught up with its leader (.*)")
    found = (pattern.search(r.getMessage()) for r in caplog.records)
    return {m.group(1): m.group(2) for m in found if m}


def test_a_divergent_tail_is_truncated_and_every_log_converges_byte_for_byte(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "actors.partition.phases")

    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        answers = Answers()
        _, committed = await depose_a(cluster, answers)
        a, b = cluster.replicas["a"], cluster.replicas["b"]
        new = answers.send(b, commit("g", 10))
        assert (await answers.wait(new)).errors() == {("t", 0): Errors.NONE}
        assert b.log.log_end_offset == committed + 1  # a's epoch-1 tail held offsets committed, committed + 1
        # a's node returns: b's pushes (epoch 2) depose it, the controller's role makes it a
        # follower (its next check), and it truncates and catches up.
        cluster.handles["a"].resume()
        await until(lambda: a.leader is None, "a deposed by b's push")
        await a.become_follower(cluster.controller.state.leader_epoch, "b", False, NAMES)
        await until(lambda: a.follower is not None and a.follower.truncations >= 1, "a to truncate")
        await cluster.until_isr("b", NAMES)
        again = answers.send(b, commit("g", 11))
        assert (await answers.wait(again)).errors() == {("t", 0): Errors.NONE}
        end = b.log.log_end_offset
        c = cluster.replicas["c"]
        await until(lambda: a.log.high_watermark == c.log.high_watermark == end, "a and c to catch up")
        assert cluster.log_bytes("a") == cluster.log_bytes("b") == cluster.log_bytes("c")
        assert a.log.epoch_entries() == b.log.epoch_entries() == [(1, 0), (2, committed)]
        # a's hot shard was rebuilt from its truncated log: it holds b's commits, not its own lost ones.
        shard = a.follower.shard
        assert shard.groups["g"].offsets[next(iter(shard.groups["g"].offsets))].offset == 11
        # The followers say once how long they took to catch up, phase by phase; a, which led
        # first, is no rejoining replica (its truncation is a deposed leader's, not a restart's).
        lines = rejoin_lines(caplog)
        assert sorted(lines) == ["b", "c"], lines
        assert re.fullmatch(
            r"[\d.]+ s after the controller asked for it \(actor \+[\d.]+ s, role \+[\d.]+ s, "
            r"log open \+[\d.]+ s, caught up \+[\d.]+ s\)", lines["c"]
        ), lines["c"]
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_a_leader_given_a_new_epoch_serves_on_from_its_shard_without_loading(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        a = await cluster.start()
        answers = Answers()
        for offset in range(5):
            assert (await acknowledged(answers, a, f"g{offset}", offset)).errors() == {("t", 0): Errors.NONE}
        shard, end = a.runtime.shard, a.log.log_end_offset
        # A commit in flight across the switch: held for the old epoch's high watermark.
        cluster.handles["b"].stop()
        cluster.handles["c"].stop()
        held = answers.send(a, commit("g0", 50))
        await until(lambda: a.log.high_watermark == end + 1, "a's own fsync of the held commit")
        for name in ("b", "c"):
            cluster.handles[name].resume()
        # The controller bumps a's epoch, as a replica move does; a leads on, same shard, no load.
        probe = await cluster.elect("a", NAMES, ("b", "c"))
        assert (probe["state"], probe["role"], probe["leader_epoch"]) == ("ACTIVE", "leader", 2)
        assert a.runtime.shard is shard, "the same shard: nothing was loaded"
        assert (await answers.wait(held)).errors() == {("t", 0): Errors.NONE}
        assert (await acknowledged(answers, a, "g1", 60)).errors() == {("t", 0): Errors.NONE}
        assert a.log.epoch_entries()[-1] == (2, end + 1), "the new epoch starts where the log ended"
        await until(lambda: cluster.replicas["c"].follower.log.high_watermark == end + 2, "c to have both")
        assert (await answers.wait(answers.send(a, fetch("g0")))).offsets() == {("t", 0): 50}
        answers.all_once()
        await cluster.close()

    run(scenario())


def test_a_new_epoch_of_the_same_leader_keeps_serving_and_no_old_sender_fails(tmp_path: Path) -> None:
    """A replica move bumps the leader epoch and the leader keeps its shard (`_relead`):
    the old epoch's senders end quietly (one used to read the answer it never got and
    fail the partition, which then reloaded: a gap of about a second)."""
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        a = await cluster.start()
        answers = Answers()
        assert (await answers.wait(answers.send(a, commit("g", 1)))).errors() == {("t", 0): Errors.NONE}
        failures = a.runtime.failures
        for _ in range(3):  # each new epoch stops senders waiting in their heartbeat
            state = cluster.controller.state
            await a.become_leader(
                state.leader_epoch + 1, state.partition_epoch + 1, NAMES, NAMES,
                {n: h for n, h in cluster.handles.items() if n != "a"}, cluster.controller_handle,
            )
            cluster.controller.state = replace(
                state, leader_epoch=state.leader_epoch + 1, partition_epoch=state.partition_epoch + 1
            )
            for name in ("b", "c"):  # the controller's roles, right after the leader's
                await cluster.replicas[name].become_follower(state.leader_epoch + 1, "a", True, NAMES)
            await asyncio.sleep(a.leader.heartbeat_s * 2)
        assert a.runtime.failures == failures and a.runtime.state is RuntimeState.ACTIVE
        assert (await answers.wait(answers.send(a, commit("g", 2)))).errors() == {("t", 0): Errors.NONE}
        answers.all_once()
        await cluster.close()

    run(scenario())
