"""Analytics over a repartitioned log equal those of the same history without one
(`spark_bridge.ownership`).

Two logs of the same requests at the same times, written by the coordinator layer: in
`moved`, partition 0 hands group MOVE to partition 2 through the handoff's steps (an
export abandoned once, so the target holds stale copies, then export, admit, switch), and
partition 2 serves MOVE afterwards; in `reference`, partition 0 serves everything.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame

from coordinator import handoff
from coordinator.routing import Routing
from coordinator.shard import Shard
from log.columnar import rows_batch
from spark_bridge import jobs
from spark_bridge.ownership import parse_admit, split_admitted
from spark_bridge.reader import read_log_batches, read_offsets_log, read_summarized_log
from spark_bridge.rows import arrow_schema, record_to_row

from tests.core.harness import Harness
from tests.core.test_handoff import groups_on
from tests.spark.histories import END_OFFSETS, T0, Batch, write_history

MOVE, STAY = groups_on(2, 4, 1)[0], groups_on(0, 4, 1)[0]  # both on partition 0 of 2
GROWN = Routing(4, previous=2, switched=frozenset({0}), version=1)
MINUTE = 60_000


class Partition:
    """A harness-driven shard whose new records become one batch per action, at its time."""

    def __init__(self, number: int, batches: list[Batch]) -> None:
        self.h = Harness()
        if number:
            self.h.shard = Shard(self.h.shard.config, partition=number, member_id_seed=7)
            self.h.absorb(self.h.shard.on_loaded(self.h.now))
        self.number, self.batches, self._written = number, batches, len(self.h.log)

    def at(self, ms: int, action: Callable[[Harness], Any]) -> Any:
        self.h.now = max(self.h.now, T0 + ms)
        answer = action(self.h)
        if len(self.h.log) > self._written:
            self.batches.append((self.number, self.h.now, self.h.log[self._written:]))
            self._written = len(self.h.log)
        return answer

    def step(self, ms: int, step: Callable[[Shard, Any], None]) -> Any:
        def drive(h: Harness) -> Any:
            h.open.add("step")
            h.absorb(h.shard.drive(step, h.now, "step"))
            return h.answers.pop("step")
        return self.at(ms, drive)


def form_and_leave(h: Harness) -> None:
    members, _ = h.form_group(MOVE, 1)
    h.leave(MOVE, *members)  # an empty group of generation 2: its metadata moves too


def histories() -> tuple[list[Batch], list[Batch]]:
    """(moved, reference) batches of the same requests."""
    moved: list[Batch] = []
    reference: list[Batch] = []
    source, target, alone = Partition(0, moved), Partition(2, moved), Partition(0, reference)
    handoff.route_step(target.h.shard, Routing(4, previous=2, version=1), target.h.now)  # owns nothing yet
    for before in (source, alone):
        before.at(1_000, form_and_leave)
        before.at(5_000, lambda h: h.commit(MOVE, {("orders", 0): 10, ("orders", 1): 20}))
        for i in range(20):  # the source's offsets run far past the target's
            before.at(6_000 + i, lambda h, i=i: h.commit(STAY, {("orders", 0): i}))
        before.at(30_000, lambda h: h.commit(MOVE, {("orders", 0): 12}))
    first = source.step(MINUTE + 1_000, lambda s, t: handoff.export_step(s, GROWN, t))
    target.step(MINUTE + 1_500, lambda s, t: handoff.admit_step(s, first.exported[2], t, 1))
    source.step(MINUTE + 2_000, handoff.abort_step)  # abandoned: the target's copies are stale
    for before in (source, alone):
        before.at(MINUTE + 3_000, lambda h: h.commit(MOVE, {("orders", 1): 25}))
        before.at(MINUTE + 4_000, lambda h: h.commit(STAY, {("orders", 0): 30}))
    second = source.step(2 * MINUTE + 1_000, lambda s, t: handoff.export_step(s, GROWN, t))
    target.step(2 * MINUTE + 1_500, lambda s, t: handoff.admit_step(s, second.exported[2], t, 1))
    source.step(2 * MINUTE + 2_000, lambda s, t: handoff.switch_step(s, GROWN, t))
    handoff.route_step(target.h.shard, GROWN, target.h.now)
    for after, stay in ((target, source), (alone, alone)):
        after.at(2 * MINUTE + 30_000, lambda h: h.commit(MOVE, {("orders", 0): 33}))
        stay.at(2 * MINUTE + 31_000, lambda h: h.commit(STAY, {("orders", 0): 35}))
        after.at(3 * MINUTE + 5_000, lambda h: h.commit(MOVE, {("payments", 0): 3}))
    return moved, reference


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    moved, reference = histories()
    dirs = tmp_path_factory.mktemp("moved"), tmp_path_factory.mktemp("reference")
    write_history(str(dirs[0]), moved)
    write_history(str(dirs[1]), reference)
    return dirs


def column(table: pa.Table, name: str) -> list[Any]:
    return table[name].to_pylist()


def test_the_target_keeps_only_what_it_wrote_as_owner(logs: tuple[Path, Path]) -> None:
    table = pa.Table.from_batches(list(read_log_batches(logs[0])), arrow_schema())
    target = table.filter(pa.compute.equal(table["partition"], 2))
    rows = list(zip(column(target, "offset"), column(target, "group_id"), column(target, "state_kind")))
    markers = [offset for offset, _, kind in rows if kind == handoff.ADMIT_KIND]
    assert len(markers) == 2, "both attempts admitted"
    own = [(offset, group) for offset, group, _ in rows if offset > markers[-1]]
    assert own and {group for _, group in own} == {MOVE}

    kept, copies = split_admitted(target)
    assert [(o, g) for o, g in zip(column(kept, "offset"), column(kept, "group_id")) if g] == own
    assert copies is not None
    assert column(copies, "offset") == sorted(o for o, g, _ in rows if g and o < markers[-1])
    source = table.filter(pa.compute.equal(table["partition"], 0))
    assert split_admitted(source) == (source, None), "a partition without a marker keeps every row"


def test_an_old_partition_that_admits_keeps_its_own_records_before_the_admit() -> None:
    """Shrinking merges groups into a partition that owns groups of its own."""
    batches: list[Batch] = []
    merged, retired = Partition(0, batches), Partition(1, [])
    merged.at(1_000, lambda h: h.commit(STAY, {("orders", 0): 1}))
    retired.at(1_000, lambda h: h.commit(MOVE, {("orders", 0): 7}))
    exported = handoff.group_records(retired.h.shard, MOVE)
    merged.step(2_000, lambda s, t: handoff.admit_step(s, exported, t, 2))
    merged.at(3_000, lambda h: h.commit(STAY, {("orders", 0): 2}))
    rows = [record_to_row(0, offset, at, record) for offset, (at, record) in enumerate(
        (at, record) for _, at, records in batches for record in records
    )]
    table = rows_batch(rows, arrow_schema())
    kept, copies = split_admitted(pa.Table.from_batches([table]))
    assert copies is not None and column(copies, "group_id") == [MOVE]
    assert [g for g in column(kept, "group_id") if g] == [STAY, STAY]
    assert parse_admit(0, 2, column(kept, "state_data")[1]).version == 2


def without_log_position(frame: DataFrame) -> list[tuple[Any, ...]]:
    kept = [name for name in frame.columns if name not in ("log_partition", "log_offset")]
    return sorted((tuple(row) for row in frame.select(*kept).collect()), key=repr)


@pytest.mark.spark
def test_every_job_over_the_moved_log_equals_the_reference(spark: Any, logs: tuple[Path, Path]) -> None:
    moved, reference = (read_offsets_log(spark, d).cache() for d in logs)
    raw = moved.where((moved.group_id == MOVE) & (moved.record_type == "offset_commit")).collect()
    newest_by_offset = max(raw, key=lambda row: row.offset)
    assert newest_by_offset.partition == 0, "the source's stale record has the higher offset"

    def same(job: Callable[[DataFrame], DataFrame]) -> list[tuple[Any, ...]]:
        got = without_log_position(job(moved))
        assert got == without_log_position(job(reference))
        return got

    committed = same(jobs.committed_offsets)
    assert [(r[0], r[1], r[2], r[3]) for r in committed if r[0] == MOVE] == [
        (MOVE, "orders", 0, 33), (MOVE, "orders", 1, 25), (MOVE, "payments", 0, 3),
    ]
    same(lambda log: jobs.consumer_lag(log, END_OFFSETS))
    rates = same(jobs.commit_rate)
    assert sum(r[3] for r in rates if r[0] == MOVE) == 6, "each commit once, the copies not at all"
    same(lambda log: jobs.lag_over_time(log, END_OFFSETS))
    history = same(jobs.rebalance_history)
    assert [r[1] for r in history if r[0] == MOVE] == [1, 2]
    same(jobs.expired_groups)
    for frame in (moved, reference):
        frame.unpersist()


@pytest.mark.spark
def test_a_summarized_read_drops_the_copies_too(spark: Any, logs: tuple[Path, Path]) -> None:
    moved, reference = (read_summarized_log(spark, d, MINUTE) for d in logs)
    for job in (
        jobs.committed_offsets, lambda log: jobs.commit_rate(log, MINUTE),
        lambda log: jobs.lag_over_time(log, None, MINUTE),  # each key's state counted once
    ):
        assert without_log_position(job(moved)) == without_log_position(job(reference))
    lag = without_log_position(jobs.lag_over_time(moved, None, MINUTE))
    assert [r[2] for r in lag if r[0] == MOVE] == [28, 23, 2, 2]  # ends: the highest commits
