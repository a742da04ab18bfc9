"""Loading into anything with replay_many, and into coordinator.Shard."""

from __future__ import annotations

import gc
import logging
import tempfile
from collections.abc import Iterable
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.records import Record
from coordinator.shard import Shard
from log import LoadStats, MaterializedState, PartitionLog, load_into, materialize
from log.batch import encode_batch
from log.codec import encode_payload

from tests.log.helpers import EPOCH, NOW_MS, batches, commit, group, group_tombstone, model, offset_tombstone


class Recorder:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.calls = 0

    def replay_many(self, records: Iterable[Record]) -> None:
        self.calls += 1
        self.records.extend(records)


def test_load_replays_the_durable_records_in_order(tmp_path: Path) -> None:
    written = [[commit("g", "t", p, p) for p in range(5)], [group("g"), offset_tombstone("g", "t", 1)]]
    with PartitionLog.open(tmp_path, EPOCH) as log:
        for batch in written:
            log.append(batch, EPOCH, NOW_MS)
        log.sync()
        log.append([group_tombstone("g")], EPOCH, NOW_MS)
        recorder = Recorder()

        stats = load_into(recorder, log)

    assert recorder.records == written[0] + written[1]
    assert stats == LoadStats(7, 0, None, 2, stats.bytes_read, 0, 7)
    assert stats.bytes_read > 0


def test_offsets_between_group_records_are_merged_last_record_wins(tmp_path: Path) -> None:
    written = [
        [commit("g", "t", 0, 1), commit("g", "t", 1, 1), commit("g", "t", 0, 2)],
        [offset_tombstone("g", "t", 1), commit("h", "t", 0, 5)],
        [group_tombstone("g"), commit("g", "t", 0, 3), commit("g", "t", 0, 4)],
    ]
    with PartitionLog.open(tmp_path, EPOCH) as log:
        for batch in written:
            log.append(batch, EPOCH, NOW_MS)
        log.sync()
        recorder = Recorder()

        stats = load_into(recorder, log)

    assert recorder.records == [
        commit("g", "t", 0, 2),
        offset_tombstone("g", "t", 1),
        commit("h", "t", 0, 5),
        group_tombstone("g"),
        commit("g", "t", 0, 4),
    ]
    assert stats.records == 8


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=st.lists(batches, min_size=1, max_size=6))
def test_loading_into_a_shard_equals_replaying_every_record(
    tmp_path: Path, written: list[list[Record]]
) -> None:
    directory = tempfile.mkdtemp(dir=tmp_path)
    with PartitionLog.open(directory, EPOCH) as log:
        for batch in written:
            log.append(batch, EPOCH, NOW_MS)
        log.sync()
        loaded = Shard()
        load_into(loaded, log)
    replayed = Shard()
    for record in (record for batch in written for record in batch):
        replayed.replay(record)

    assert loaded.persistent_view() == replayed.persistent_view()


def test_unknown_key_versions_are_skipped_counted_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = msgpack.unpackb(encode_payload([commit("g", "t", 0, 1)]))
    body.insert(1, [12, 0, 3, "share group state, say"])
    with open(tmp_path / f"{0:020d}.log", "wb") as file:
        file.write(encode_batch(0, 4, 3, EPOCH, NOW_MS, msgpack.packb(body)))

    with caplog.at_level(logging.WARNING, logger="log.loader"):
        with PartitionLog.open(tmp_path, EPOCH) as log:
            recorder = Recorder()
            stats = load_into(recorder, log)

    assert recorder.records == [commit("g", "t", 0, 1)]
    assert stats.skipped_records == 3 and stats.end_offset == 4
    assert any("skipped 3 records" in r.getMessage() for r in caplog.records)


def test_load_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, EPOCH) as log:
        log.append([commit("g", "t", 0, 1)], EPOCH, NOW_MS)
        log.sync()
        assert gc.isenabled()
        load_into(MaterializedState(), log)
        assert gc.isenabled()
        gc.disable()
        try:
            load_into(MaterializedState(), log)
            assert not gc.isenabled()
        finally:
            gc.enable()


def test_materialized_state_is_last_write_wins_with_deleting_tombstones() -> None:
    records = [
        commit("g", "t", 0, 1),
        commit("g", "t", 0, 2),
        group("g"),
        offset_tombstone("g", "t", 0),
        group_tombstone("h"),
        commit("g", "t", 0, 3),
        group_tombstone("g"),
    ]
    state = MaterializedState()
    state.replay_many(records[:3])
    for record in records[3:]:
        state.replay(record)

    assert state.state == model(records) == {commit("g", "t", 0, 3).key: commit("g", "t", 0, 3).value}


def test_loading_into_the_coordinator_shard_matches_its_own_records(tmp_path: Path) -> None:
    records = [commit("g", "t", p, p) for p in range(4)] + [group("g", generation=2), commit("h", "t", 0, 7)]
    with PartitionLog.open(tmp_path, EPOCH) as log:
        log.append(records, EPOCH, NOW_MS)
        log.sync()
        from_log = Shard()
        load_into(from_log, log)
    direct = Shard()
    direct.replay_many(records)

    assert from_log.persistent_view() == direct.persistent_view()
    assert materialize(tmp_path) == model(records)
