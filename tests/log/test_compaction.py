"""Compaction: same state, original offsets, tombstone retention, crash safety."""

from __future__ import annotations

import os
from pathlib import Path

import msgpack
import pytest

from coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    Record,
)
from log import LogConfig, LogReader, PartitionLog, compact, encode_payload, materialize, write_snapshot
from log.batch import encode_batch
from log.compaction import clean_group, commit_swap, plan_compaction
from log.recovery import finish_swap
from log.segment import list_dir

from tests.log.helpers import EPOCH, NOW_MS, commit, group, group_tombstone, model, offset_tombstone

CONFIG = LogConfig(offsets_segment_bytes=400, offsets_delete_retention_ms=1000)


def fill(log: PartitionLog, batches: list[list[Record]], start_ms: int = NOW_MS) -> None:
    for i, batch in enumerate(batches):
        log.append(batch, EPOCH, start_ms + i)
    log.sync()


def history(rounds: int = 12) -> list[list[Record]]:
    out = []
    for i in range(rounds):
        batch = [commit(f"g{i % 3}", "t", p, i * 10 + p) for p in range(3)]
        if i % 4 == 1:
            batch.append(group(f"g{i % 3}", generation=i))
        if i % 5 == 2:
            batch.append(offset_tombstone("g1", "t", 2))
        if i == 7:
            batch.append(group_tombstone("g2"))
        out.append(batch)
    return out


def all_records(batches: list[list[Record]]) -> list[Record]:
    return [r for batch in batches for r in batch]


def test_compaction_keeps_the_state_and_shrinks_the_log(tmp_path: Path) -> None:
    batches = history()
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        fill(log, batches)
        before = sum(os.path.getsize(s.path) for s in list_dir(str(tmp_path)).segments)
        active = list_dir(str(tmp_path)).segments[-1]
        active_bytes = Path(active.path).read_bytes()

        stats = compact(log, NOW_MS)

        assert materialize(log) == model(all_records(batches))
        assert stats.records_out < stats.records_in
        assert Path(active.path).read_bytes() == active_bytes, "the active segment is never compacted"
    after = sum(os.path.getsize(s.path) for s in list_dir(str(tmp_path)).segments)
    assert after < before
    assert materialize(tmp_path) == model(all_records(batches))


def test_compaction_stops_at_the_committed_end_so_a_truncated_tail_supersedes_nothing(
    tmp_path: Path,
) -> None:
    """A leader's durable records past the partition's high watermark may be cut when
    it is deposed: compacted with them, an acknowledged older value would be gone."""
    committed = [[commit("g0", "t", 0, 1)], *history(4)]
    uncommitted = [[commit("g0", "t", 0, 2)], *history(6)]
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        fill(log, committed)
        committed_end = log.log_end_offset
        fill(log, uncommitted)
        assert log.active_segment_base > committed_end, "the uncommitted value sits in a rolled segment"

        compact(log, NOW_MS, committed_end=committed_end)
        log.truncate_to(committed_end)  # deposed: the tail the new leader lacks is cut

        assert materialize(log) == model(all_records(committed))


def test_records_keep_their_offsets_and_batches_their_ranges(tmp_path: Path) -> None:
    batches = history()
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        fill(log, batches)
        original = dict(LogReader(tmp_path).records())
        original_ends = {b.base_offset: b.next_offset for b in LogReader(tmp_path).batches()}
        compact(log, NOW_MS)
        end = log.log_end_offset

    compacted = dict(LogReader(tmp_path).records())
    assert compacted and all(original[offset] == record for offset, record in compacted.items())
    assert all(original_ends[b.base_offset] == b.next_offset for b in LogReader(tmp_path).batches())
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        assert log.log_end_offset == end


def test_tombstones_are_dropped_only_after_the_retention(tmp_path: Path) -> None:
    batches = [[commit("g", "t", 0, 1), group("g")], [offset_tombstone("g", "t", 0), group_tombstone("g")]]
    batches += [[commit("h", "t", p, p)] for p in range(30)]

    def tombstones() -> int:
        return sum(1 for _, r in LogReader(tmp_path).records() if r.value is None)

    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        fill(log, batches, start_ms=NOW_MS)
        compact(log, NOW_MS + 1 + 999)
        assert tombstones() == 2, "tombstones younger than the retention stay"
        stats = compact(log, NOW_MS + 1 + 1000)
        assert tombstones() == 0 and stats.tombstones_dropped == 2
        assert materialize(log) == model(all_records(batches))


def test_tombstones_at_or_above_a_snapshot_stay(tmp_path: Path) -> None:
    first = [[commit("g", "t", 0, 1)]]
    later = [[offset_tombstone("g", "t", 0)]] + [[commit("h", "t", p, p)] for p in range(30)]
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        fill(log, first)
        write_snapshot(log, NOW_MS)
        fill(log, later)
        compact(log, NOW_MS + 10**9)

        assert offset_tombstone("g", "t", 0) in [r for _, r in LogReader(tmp_path).records()]
        want = model(all_records(first + later))
        assert materialize(log) == materialize(log, use_snapshot=False) == want


def test_batches_with_unknown_key_versions_are_kept_whole(tmp_path: Path) -> None:
    known_run = msgpack.unpackb(encode_payload([commit("g", "t", 0, 1)]))[1]
    body = [None, [9, 0, 1, ["future"]], known_run]
    foreign = encode_batch(0, 2, 1, EPOCH, NOW_MS, msgpack.packb(body))
    with open(tmp_path / f"{0:020d}.log", "wb") as file:
        file.write(foreign)
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        fill(log, [[offset_tombstone("g", "t", 0)]] + [[commit("h", "t", p, p)] for p in range(30)])
        compact(log, NOW_MS + 10**9)

        first = next(LogReader(tmp_path).batches())
        assert first.skipped == 1 and first.records == [commit("g", "t", 0, 1)]
        assert any(r == offset_tombstone("g", "t", 0) for _, r in LogReader(tmp_path).records())
        assert commit("g", "t", 0, 1).key not in materialize(log)


@pytest.mark.parametrize("crash_after", ["plan", "clean", "partial-clean", "commit", "delete-one", "finish"])
def test_a_crash_at_any_step_loads_to_the_same_state(tmp_path: Path, crash_after: str) -> None:
    batches = history(16)
    log = PartitionLog.open(tmp_path, EPOCH, CONFIG)
    fill(log, batches)
    want = model(all_records(batches))
    plan = plan_compaction(log, NOW_MS + 10**9)
    assert plan is not None and plan.groups
    group_ = plan.groups[0]
    if crash_after != "plan":
        cleaned = clean_group(plan, group_)
        if crash_after == "partial-clean":
            os.truncate(cleaned, os.path.getsize(cleaned) // 2)
        elif crash_after != "clean":
            swap = commit_swap(plan, group_, cleaned)
            assert materialize(tmp_path) == want, "readers see the swap"
            if crash_after == "delete-one":
                os.unlink(group_.segments[0].path)
                assert materialize(tmp_path) == want
            elif crash_after == "finish":
                finish_swap(str(tmp_path), swap)
    log.close()

    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as reopened:
        assert materialize(reopened) == want
        compact(reopened, NOW_MS + 10**9)
        assert materialize(reopened) == want
    assert not [n for n in os.listdir(tmp_path) if n.endswith((".swap", ".cleaned"))]


def test_repeated_compaction_merges_segments_and_stays_equivalent(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        written: list[list[Record]] = []
        for round_ in range(4):
            batches = history(10)
            fill(log, batches, NOW_MS + round_ * 100)
            written += batches
            compact(log, NOW_MS + round_ * 100)
            assert materialize(log) == model(all_records(written))
        segments = len(list_dir(str(tmp_path)).segments)
    assert segments < 10


def test_records_of_different_types_with_the_same_fields_are_different_keys(tmp_path: Path) -> None:
    # A classic group "g" is deleted while a consumer group "g" keeps its records: keyed by fields
    # alone, the tombstones would supersede (and compaction drop) the consumer group's records.
    regex = ConsumerGroupRegularExpressionValue(("t",), 1, 0)
    consumer = [
        Record(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(4)),
        Record(ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(4)),
        Record(ConsumerGroupRegularExpressionKey("g", "m0"), regex),
    ]
    batches = [consumer, [group("g")], [group_tombstone("g")], [
        Record(ConsumerGroupCurrentMemberAssignmentKey("g", "m0"), None),
        Record(ConsumerGroupMemberMetadataKey("g", "m0"), None),
    ]] + [[commit("h", "t", p, p)] for p in range(30)]
    with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
        fill(log, batches)
        compact(log, NOW_MS + 10**9)

        state = materialize(log)
        assert state == model(all_records(batches))
        assert [state[r.key] for r in consumer] == [r.value for r in consumer]
        assert GroupMetadataKey("g") not in state
        survivors = [r for _, r in LogReader(tmp_path).records()]
        assert all(r in survivors for r in consumer)
