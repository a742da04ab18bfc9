"""Reads of a replicated partition in the actor layer, without Ray (issue 24 items 2 and 3):
a leader that loads its log serves what the controller saw committed at once, also
below min ISR; and a deposed leader that did not hear of its successor (paused, cut
off) answers no read from its stale state.
"""

from __future__ import annotations

from pathlib import Path

from coordinator import Errors
from coordinator.messages import OffsetFetchRequest
from coordinator.replication import PartitionState

from tests.actors.replication_support import NAMES, Cluster, FakeHandle
from tests.actors.support import Answers, commit, run, until


def fetch(group: str) -> OffsetFetchRequest:
    return OffsetFetchRequest(group, (("t", 0),))


async def committed_log(tmp_path: Path) -> tuple[int, int]:
    """a leads, g commits 1 and h commits 2, everything committed; every replica
    unloaded. Returns the log ends after g's commit and after h's."""
    cluster = Cluster(tmp_path)
    a = await cluster.start()
    answers = Answers()
    assert (await answers.wait(answers.send(a, commit("g", 1)))).errors()[("t", 0)] is Errors.NONE
    after_g = a.log.log_end_offset
    assert (await answers.wait(answers.send(a, commit("h", 2)))).errors()[("t", 0)] is Errors.NONE
    after_h = a.log.log_end_offset
    await cluster.close()
    return after_g, after_h


async def load_alone(tmp_path: Path, known_end: int) -> tuple[Cluster, object]:
    """A new incarnation of the cluster: a loads its log and leads epoch 2 with ISR [a]
    (below min ISR 2), told the committed end `known_end`; b and c have no role yet."""
    cluster = Cluster(tmp_path, commit_timeout_ms=300)
    cluster.controller.state = PartitionState(NAMES, ("a",), "a", 2, 2)
    a = cluster.replicas["a"]
    others = {name: handle for name, handle in cluster.handles.items() if name != "a"}
    await a.become_leader(2, 2, NAMES, ("a",), others, cluster.controller_handle, known_end=known_end)
    assert await a.wait_active(5.0) == "ACTIVE"
    return cluster, a


def test_a_loaded_leader_below_min_isr_serves_what_was_committed_at_once(tmp_path: Path) -> None:
    """The outage of item 2: ISR [a], high watermark 0 below the log end, every read
    NOT_COORDINATOR. The controller's committed end is the loaded leader's high watermark."""

    async def scenario() -> None:
        _, end = await committed_log(tmp_path)
        cluster, a = await load_alone(tmp_path, known_end=end)
        try:
            probe = await a.probe()  # type: ignore[attr-defined]
            assert (probe["high_watermark"], probe["log_end"], probe["writable"]) == (end, end, False)
            answers = Answers()
            for group, offset in (("g", 1), ("h", 2)):  # no other ISR member: nothing to confirm
                assert answers.one(answers.send(a, fetch(group))).offsets() == {("t", 0): offset}
        finally:
            await cluster.close()

    run(scenario())


def test_a_loaded_suffix_holds_only_the_reads_of_its_groups(tmp_path: Path) -> None:
    """h's commit lies above the committed end the controller knows: it may never commit
    (below min ISR), so a read of h waits, bounded, and gets the retriable error; a
    read of g is answered at once."""

    async def scenario() -> None:
        after_g, end = await committed_log(tmp_path)
        cluster, a = await load_alone(tmp_path, known_end=after_g)
        try:
            probe = await a.probe()  # type: ignore[attr-defined]
            assert (probe["high_watermark"], probe["log_end"]) == (after_g, end)
            answers = Answers()
            assert answers.one(answers.send(a, fetch("g"))).offsets() == {("t", 0): 1}
            h_read = answers.send(a, fetch("h"))
            assert answers.got[h_read] == []
            assert (await answers.wait(h_read)).error is Errors.NOT_COORDINATOR
        finally:
            await cluster.close()

    run(scenario())


def test_a_deposed_leader_cut_off_from_its_successor_answers_no_stale_read(tmp_path: Path) -> None:
    """Item 3: a leads and g commits 1; a is cut off (its pushes hang, as a paused
    process's would) and b is elected with c; g commits 2 at b. A read a client still
    sends to a is not answered from a's stale state: a's next push that gets through
    meets epoch 2, and a answers what it held NOT_COORDINATOR."""

    async def scenario() -> None:
        cluster = Cluster(tmp_path, replica_lag_time_max_ms=60_000)
        try:
            a = await cluster.start()
            answers = Answers()
            assert (await answers.wait(answers.send(a, commit("g", 1)))).errors()[("t", 0)] is Errors.NONE
            assert (await answers.wait(answers.send(a, fetch("g")))).offsets() == {("t", 0): 1}
            # a's own links to b and c, which stall without stalling b's pushes to c.
            links = {name: FakeHandle(cluster.replicas[name]) for name in ("b", "c")}
            for name, handle in links.items():
                assert await a.set_follower(1, name, handle)
                handle.stop()
            cluster.handles["a"].stop()  # nor does anyone reach a
            await cluster.elect("b", ("b", "c"), ("c",))
            b = cluster.replicas["b"]
            assert (await answers.wait(answers.send(b, commit("g", 2)))).errors()[("t", 0)] is Errors.NONE
            zombie = answers.send(a, fetch("g"))
            assert answers.got[zombie] == [] and a.leader is not None  # a still believes it leads
            for handle in links.values():
                handle.resume()
            assert (await answers.wait(zombie)).error is Errors.NOT_COORDINATOR
            await until(lambda: a.leader is None, "a to step down")
            assert (await answers.wait(answers.send(b, fetch("g")))).offsets() == {("t", 0): 2}
            answers.all_once()
        finally:
            await cluster.close()

    run(scenario())
