"""Freezing a replica's state out of full collections (actors/partition/gc_freeze.py): the
policy's decisions, the pause watch's counts, a freeze that pins no young garbage, and a
follower (in-process replicas, no Ray) that freezes what its pushes built."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.partition.gc_freeze import (
    GROWTH_RECORDS_MAX,
    GROWTH_RECORDS_MIN,
    FreezePolicy,
    GcFreezer,
    GcPauses,
    process_pauses,
)
from coordinator import Errors

from tests.actors.replication_support import Cluster
from tests.actors.support import Answers, acknowledged, run, until


def test_a_small_growth_waits_a_quarter_freezes() -> None:
    policy = FreezePolicy()
    assert not policy.due(GROWTH_RECORDS_MIN - 1), "a small replica is cheap to collect"
    assert policy.due(GROWTH_RECORDS_MIN)
    policy.frozen(100_000)
    assert not policy.due(124_999)
    assert policy.due(125_000)


def test_a_big_state_freezes_every_records_max_not_every_quarter() -> None:
    policy = FreezePolicy()
    policy.frozen(4_000_000)
    assert not policy.due(4_000_000 + GROWTH_RECORDS_MAX - 1)
    assert policy.due(4_000_000 + GROWTH_RECORDS_MAX), "the unfrozen part stays bounded"


def test_a_log_that_shrank_moves_the_base_only() -> None:
    policy = FreezePolicy()
    policy.frozen(500_000)
    assert not policy.due(20_000)  # truncated, or a new log
    assert policy.frozen_at == 20_000
    assert not policy.due(24_999)
    assert policy.due(30_000)


def test_pauses_count_generation_2_collections_and_keep_the_longest() -> None:
    pauses = GcPauses()
    pauses("start", {"generation": 0})
    pauses("stop", {"generation": 0})
    assert pauses.full_collections == 0
    pauses("stop", {"generation": 2})  # a stop without its start (installed mid-collection)
    assert pauses.full_collections == 0
    pauses("start", {"generation": 2})
    pauses("stop", {"generation": 2})
    assert pauses.full_collections == 1
    assert pauses.longest_ms >= 0.0


def test_the_process_watch_is_installed_once_and_sees_a_full_collection() -> None:
    watch = process_pauses()
    assert process_pauses() is watch
    assert sum(1 for callback in gc.callbacks if callback is watch) == 1
    before = watch.full_collections
    gc.collect()
    assert watch.full_collections == before + 1


@pytest.fixture
def unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.mark.usefixtures("unfreeze")
def test_a_tick_freezes_when_due_after_collecting_young_garbage() -> None:
    records = [0]
    freezer = GcFreezer(lambda: records[0])
    assert not freezer.tick()
    records[0] = GROWTH_RECORDS_MIN
    garbage = Cycle()
    dead = weakref.ref(garbage)
    del garbage
    assert freezer.tick()
    assert dead() is None, "young cyclic garbage is collected, not pinned"
    assert gc.get_freeze_count() > 0
    assert not freezer.tick(), "not again until it grows"
    assert freezer.describe()["freezes"] == 1
    assert freezer.describe()["frozen_at_records"] == GROWTH_RECORDS_MIN


def test_a_follower_freezes_its_state_after_the_pushes_that_grew_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        a = await cluster.start()
        b = cluster.replicas["b"]
        freezer = b.host.gc
        started = freezer.freezes
        assert started >= 1, "following began with a replayed log: frozen"
        freezer.policy.records_min = 1  # a few commits are growth enough here
        answers = Answers()
        for offset in range(5):
            assert (await acknowledged(answers, a, f"g{offset}", offset)).errors() == {("t", 0): Errors.NONE}
        end = a.log.log_end_offset
        await until(lambda: freezer.policy.frozen_at == end, "b to freeze after a push")
        assert freezer.freezes > started
        assert (await b.info())["gc"]["freezes"] == freezer.freezes
        await cluster.close()

    try:
        run(scenario())
    finally:
        gc.unfreeze()
