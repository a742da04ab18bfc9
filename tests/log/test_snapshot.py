"""Snapshots: snapshot + tail == whole log; bad snapshots are ignored."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgpack
import pytest

from coordinator.records import Record
from log import LogConfig, MaterializedState, PartitionLog, compact, load_into, materialize, write_snapshot
from log.batch import encode_batch
from log.snapshot import encode_snapshot, list_snapshots, read_snapshot

from tests.log.helpers import EPOCH, NOW_MS, State, commit, group, group_tombstone, model, offset_tombstone

CONFIG = LogConfig(offsets_segment_bytes=500, snapshot_batch_records=4)


def batches(start: int, rounds: int) -> list[list[Record]]:
    out = []
    for i in range(start, start + rounds):
        batch = [commit(f"g{i % 4}", "t", p, i * 10 + p) for p in range(3)]
        if i % 3 == 0:
            batch.append(group(f"g{i % 4}", generation=i))
        if i % 7 == 3:
            batch += [offset_tombstone("g3", "t", 1), group_tombstone("g2")]
        out.append(batch)
    return out


def write(log: PartitionLog, written: list[list[Record]], new: list[list[Record]]) -> None:
    for batch in new:
        log.append(batch, EPOCH, NOW_MS)
        written.append(batch)
    log.sync()


def state_of(written: list[list[Record]]) -> State:
    return model(r for batch in written for r in batch)


def test_snapshot_plus_tail_equals_the_whole_log(tmp_path: Path) -> None:
    written: list[list[Record]] = []
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        write(log, written, batches(0, 10))
        snapshot = write_snapshot(log, NOW_MS)
        assert snapshot is not None and snapshot.next_offset == log.high_watermark
        assert model(snapshot.records) == state_of(written)
        write(log, written, batches(10, 10))

        target = MaterializedState()
        stats = load_into(target, log)
        assert stats.snapshot_offset == snapshot.next_offset
        assert stats.snapshot_records == len(snapshot.records)
        assert target.state == materialize(log, use_snapshot=False) == state_of(written)


def test_snapshot_records_follow_the_order_of_each_keys_latest_offset(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, EPOCH) as log:
        log.append([commit("a", "t", 0, 1), commit("b", "t", 0, 1), commit("a", "t", 0, 2)], EPOCH, NOW_MS)
        log.append([group("c"), offset_tombstone("b", "t", 0)], EPOCH, NOW_MS)
        log.sync()
        snapshot = write_snapshot(log, NOW_MS)

    assert snapshot is not None
    assert snapshot.records == [commit("a", "t", 0, 2), group("c")]


def test_snapshots_are_incremental_and_replace_older_ones(tmp_path: Path) -> None:
    written: list[list[Record]] = []
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        for round_ in range(4):
            write(log, written, batches(round_ * 5, 5))
            write_snapshot(log, NOW_MS)
            assert len(list_snapshots(str(tmp_path))) == 1
            compact(log, NOW_MS + 10**10)
            assert materialize(log) == materialize(log, use_snapshot=False) == state_of(written)
        assert write_snapshot(log, NOW_MS) == read_snapshot(list_snapshots(str(tmp_path))[0][1])
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        assert materialize(log) == state_of(written)


@pytest.mark.parametrize("damage", ["flip", "truncate", "extend", "header", "empty"])
def test_a_damaged_snapshot_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    written: list[list[Record]] = []
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        write(log, written, batches(0, 8))
        write_snapshot(log, NOW_MS)
        write(log, written, batches(8, 3))
    path = list_snapshots(str(tmp_path))[0][1]
    data = bytearray(Path(path).read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 1
    elif damage == "truncate":
        del data[-3:]
    elif damage == "extend":
        data += b"\x00"
    elif damage == "header":
        data[9] ^= 1
    else:
        data = bytearray()
    Path(path).write_bytes(bytes(data))

    with caplog.at_level(logging.WARNING, logger="log.snapshot"):
        with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
            stats = load_into(state := MaterializedState(), log)
    assert stats.snapshot_offset is None and stats.snapshot_records == 0
    assert state.state == state_of(written)
    assert any(path in r.getMessage() for r in caplog.records)


def test_a_snapshot_ahead_of_the_log_is_ignored(tmp_path: Path) -> None:
    written: list[list[Record]] = []
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        write(log, written, batches(0, 4))
        snapshot = write_snapshot(log, NOW_MS)
    assert snapshot is not None
    ahead = snapshot.next_offset + 100
    os.unlink(snapshot.path)
    Path(tmp_path, f"{ahead:020d}.snapshot").write_bytes(encode_snapshot(ahead, snapshot.records, NOW_MS, 4))

    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        assert load_into(MaterializedState(), log).snapshot_offset is None
    assert load_into(MaterializedState(), tmp_path).snapshot_offset is None
    assert materialize(tmp_path) == state_of(written)
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        fresh = write_snapshot(log, NOW_MS)
    assert fresh is not None and [o for o, _ in list_snapshots(str(tmp_path))] == [fresh.next_offset]


def test_a_snapshot_whose_name_and_header_disagree_is_ignored(tmp_path: Path) -> None:
    written: list[list[Record]] = []
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        write(log, written, batches(0, 4))
        snapshot = write_snapshot(log, NOW_MS)
    assert snapshot is not None
    os.rename(snapshot.path, tmp_path / f"{snapshot.next_offset - 1:020d}.snapshot")

    assert load_into(MaterializedState(), tmp_path).snapshot_offset is None


def test_no_snapshot_over_records_of_unknown_key_versions(tmp_path: Path) -> None:
    payload = msgpack.packb([None, [11, 0, 1, ["from the future"]]])
    with open(tmp_path / f"{0:020d}.log", "wb") as file:
        file.write(encode_batch(0, 1, 0, EPOCH, NOW_MS, payload))
    with PartitionLog.open(tmp_path, EPOCH) as log:
        assert write_snapshot(log, NOW_MS) is None
        assert list_snapshots(str(tmp_path)) == []
        assert load_into(MaterializedState(), log).skipped_records == 1


def test_an_empty_log_snapshots_an_empty_state(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, EPOCH) as log:
        snapshot = write_snapshot(log, NOW_MS)
        assert snapshot is not None and snapshot.records == [] and snapshot.next_offset == 0
        assert read_snapshot(snapshot.path).records == []
        assert materialize(log) == {}
