"""A replica whose load is overtaken (told to follow, or unloaded, while its log is
still being opened and replayed on its I/O thread) never keeps the log's directory
lock: the overtaken load's log is closed when it completes, so the replica can open
its log again and takes up its role (a leaked lock kept a replica out of the ISR
for good: LogLockedError on every later open)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import actors.partition.loading as partition_loading

from tests.actors.replication_support import NAMES, Cluster
from tests.actors.support import WAIT_S, run, until


@pytest.fixture
def held_load(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """(started, release): a leader's load blocks in its replay until `release` is set."""
    started, release = threading.Event(), threading.Event()
    original = partition_loading.load_into

    def blocking_load(*args: object, **kwargs: object) -> object:
        started.set()
        assert release.wait(WAIT_S)
        return original(*args, **kwargs)

    monkeypatch.setattr(partition_loading, "load_into", blocking_load)
    return started, release


@pytest.mark.parametrize("overtaken_by", ["become_follower", "unload"])
def test_an_overtaken_load_releases_the_log_and_the_replica_takes_up_its_role(
    tmp_path: Path, held_load: tuple[threading.Event, threading.Event], overtaken_by: str
) -> None:
    started, release = held_load

    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        replica = cluster.replicas["a"]
        others = {name: handle for name, handle in cluster.handles.items() if name != "a"}
        try:
            await replica.become_leader(1, 1, NAMES, NAMES, others, cluster.controller_handle)
            await until(started.is_set, "the load to open the log")
            if overtaken_by == "unload":
                unloading = replica.unload(1)
            else:
                following = replica.become_follower(2, "b")
            release.set()
            if overtaken_by == "unload":
                await unloading
                await replica.become_follower(2, "b")
            else:
                await following
            probe = await replica.probe()
            assert (probe["role"], probe["leader_epoch"]) == ("follower", 2), probe
        finally:
            release.set()
            await cluster.close()

    run(scenario())
