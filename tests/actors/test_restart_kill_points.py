"""A full restart at any moment finds every partition recoverable: the disks are cut
before and after every write of a state or leader-epoch file while replicas are
elected, promoted, deposed and re-elected, re-lead with a new epoch, leave and rejoin
the ISR, and commits flow; each cut must rebuild the controller's metadata with
nothing held.

A cut is a consistent one: every such write, and the cut itself, holds one lock, so
each cut is what a crash of every node at that moment leaves of these files. The
rebuild rule (`actors/controller/forgotten_logs.py`) holds a partition one of whose
directories saw a newer leader epoch than its newest state file; so on every path
an epoch reaches a disk (a fresh leader creating its directory, a promoted
follower, a deposed leader leading again, a serving leader given a new epoch,
followers told after their leader, as the controller tells them), the leader's
state file must be on disk first. Without that order, cuts inside each of those
windows are held (as a full restart under load once refused to start).
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import log.epoch
import log.fsutil
from actors.controller.forgotten_logs import recover_state, scan_replicas
from coordinator import Errors
from log.epoch import EPOCH_FILE
from log.replica_state import STATE_FILE

from tests.actors.replication_support import NAMES, Cluster
from tests.actors.support import Answers, commit, run, until

MIN_CUTS = 20


class Cuts:
    """Copies of every replica directory's metadata, before and after each write of a state
    or epoch file."""

    def __init__(self, data_dir: Path, root: Path) -> None:
        self.data_dir, self.root = data_dir, root
        self.lock = threading.Lock()
        self.taken: list[Path] = []

    def wrap(self, write: Callable[..., None]) -> Callable[..., None]:
        def cut_then_write(*args: Any, **kwargs: Any) -> None:
            with self.lock:
                self.cut()
                write(*args, **kwargs)
                self.cut()

        return cut_then_write

    def cut(self) -> None:
        target = self.root / f"cut-{len(self.taken):03d}"
        for directory in self.data_dir.glob("nodes/*/offsets-*"):
            copy = target / directory.relative_to(self.data_dir)
            copy.mkdir(parents=True)
            for name in (STATE_FILE, EPOCH_FILE):
                if (directory / name).exists():
                    shutil.copy(directory / name, copy / name)
            for segment in directory.glob("*.log"):
                (copy / segment.name).touch()  # only that the log exists counts
        self.taken.append(target)


@pytest.fixture
def cuts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cuts:
    taken = Cuts(tmp_path / "data", tmp_path / "cuts")
    monkeypatch.setattr(log.fsutil, "atomic_write", taken.wrap(log.fsutil.atomic_write))
    monkeypatch.setattr(log.epoch, "atomic_write", taken.wrap(log.epoch.atomic_write))
    return taken


async def commit_until(stop: asyncio.Event, cluster: Cluster, acked: list[int]) -> None:
    """Commit ever higher offsets to whichever replica leads, as a consumer does."""
    answers, offset = Answers(), 0
    while not stop.is_set():
        leader = next((r for r in cluster.replicas.values() if r.leader is not None), None)
        if leader is None:
            await asyncio.sleep(0.001)
            continue
        offset += 1
        answer = await answers.wait(answers.send(leader, commit("g", offset)))
        if answer.errors()[("t", 0)] is Errors.NONE:
            acked.append(offset)


async def elections_and_isr_changes(cluster: Cluster) -> None:
    await cluster.lead_then_follow("a", NAMES, ("b", "c"))  # a fresh leader creates its directory
    cluster.handles["c"].stop()
    await cluster.until_isr("a", ("a", "b"))  # the state file shrinks first
    cluster.handles["c"].resume()
    await cluster.until_isr("a", NAMES)
    cluster.handles["a"].stop()
    await cluster.lead_then_follow("b", ("b", "c"), ("c",))  # a promoted follower
    await until(lambda: cluster.replicas["a"].leader is None, "a deposed by its followers' answers")
    cluster.handles["a"].resume()
    await cluster.lead_then_follow("a", ("a", "b", "c"), ("b", "c"))  # a deposed leader leads again
    await cluster.lead_then_follow("a", NAMES, ("b", "c"))  # a serving leader, a new epoch


def test_a_full_restart_at_any_write_finds_every_partition_recoverable(tmp_path: Path, cuts: Cuts) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path / "data")
        stop, acked = asyncio.Event(), []
        committer = asyncio.get_running_loop().create_task(commit_until(stop, cluster, acked))
        try:
            await elections_and_isr_changes(cluster)
        finally:
            stop.set()
            await committer
            await cluster.close()
        assert acked, "no commit was acknowledged"

    run(scenario())
    settings = Cluster(tmp_path / "unused").settings
    for cut in cuts.taken:
        recovered = recover_state(scan_replicas(str(cut)), settings, NAMES)
        if recovered is None:
            continue  # before anything was written: a fresh start
        held = recovered.partitions[0].held
        assert held is None, f"a full restart at {cut.name} of {len(cuts.taken)} holds the partition: {held}"
    assert len(cuts.taken) >= MIN_CUTS
