"""truncate_to: cutting a follower's log tail at every kind of boundary, its
epochs and snapshots, crashes between its steps, and appending after it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.records import Record
from log import (
    LogConfig,
    LogError,
    LogFailedError,
    PartitionLog,
    compact,
    load_into,
    materialize,
    write_snapshot,
)
from log.loader import MaterializedState
from log.segment import list_dir
from log.snapshot import list_snapshots

from tests.log.helpers import NOW_MS, commit, model
from tests.log.replica_support import SMALL, batch_records, checkpoint_path, log_bytes, write_epochs

# 15 batches of 2 records (offset == record index): epoch 1 at 0, 2 at 10, 5 at 20.
EPOCHS = [1] * 5 + [2] * 5 + [5] * 5
ENTRIES = [(1, 0), (2, 10), (5, 20)]


class Crash(Exception):
    """Stands for the process dying before a step."""


def written(directory: Path) -> tuple[list[Record], bytes]:
    with PartitionLog.open(directory, 1, SMALL) as log:
        records = write_epochs(log, EPOCHS)
        write_snapshot(log, NOW_MS)
    return records, log_bytes(directory)


def entries_below(offset: int) -> list[tuple[int, int]]:
    return [(epoch, start) for epoch, start in ENTRIES if start < offset]


def check_prefix(log: PartitionLog, records: list[Record], original: bytes, end: int) -> None:
    """The log is exactly the old log's first `end` offsets, durable, with matching epochs."""
    assert (log.log_end_offset, log.high_watermark) == (end, end)
    data = log_bytes(log.directory)
    assert data == original[: len(data)]
    assert materialize(log) == model(records[:end])
    assert log.epoch_entries() == entries_below(end)
    assert all(offset <= end for offset, _ in list_snapshots(log.directory))


def boundaries(directory: Path) -> dict[str, int]:
    """One truncation offset of each kind, for the log `written` makes."""
    bases = [s.base_offset for s in list_dir(str(directory)).segments]
    assert len(bases) >= 4, bases
    return {
        "inside the active segment": bases[-1] + 2,
        "at a segment boundary": bases[-2],
        "below several segments": 2,
        "to zero": 0,
        "at the log end": 30,
    }


KINDS = [
    "inside the active segment", "at a segment boundary", "below several segments",
    "to zero", "at the log end",
]


@pytest.mark.parametrize("kind", KINDS)
def test_truncation_keeps_exactly_the_records_below_the_offset(tmp_path: Path, kind: str) -> None:
    records, original = written(tmp_path)
    offset = boundaries(tmp_path)[kind]
    with PartitionLog.open(tmp_path, 5, SMALL) as log:
        assert log.truncate_to(offset) == offset
        check_prefix(log, records, original, offset)
        assert [b.next_offset for _, b in log.raw_batches()][-1:] == ([offset] if offset else [])
    with PartitionLog.open(tmp_path, 5, SMALL) as log:
        check_prefix(log, records, original, offset)
        more = [commit("after", "t", 0, i) for i in range(3)]
        assert log.append(more, 7, NOW_MS) == (offset, offset + 3)
        log.sync()
        assert log.epoch_entries() == [*entries_below(offset), (7, offset)]
    with PartitionLog.open(tmp_path, 7, SMALL) as log:
        assert materialize(log) == model(records[:offset] + more)
        assert log.epoch_entries() == [*entries_below(offset), (7, offset)]


def test_an_offset_inside_a_batch_or_past_the_end_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    records, original = written(tmp_path)
    with PartitionLog.open(tmp_path, 5, SMALL) as log:
        for offset in (3, 29, 31, -1):
            with pytest.raises(LogError) as raised:
                log.truncate_to(offset)
            assert not isinstance(raised.value, LogFailedError)
        assert not log.failed
        check_prefix(log, records, original, 30)


def test_snapshots_past_the_offset_are_deleted_and_one_at_it_is_kept(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        records = write_epochs(log, EPOCHS[:10])
        write_snapshot(log, NOW_MS)
        records += write_epochs(log, EPOCHS[10:], first=10)
        assert [offset for offset, _ in list_snapshots(str(tmp_path))] == [20]
        log.truncate_to(20)
        assert [offset for offset, _ in list_snapshots(str(tmp_path))] == [20]
        state = MaterializedState()
        assert load_into(state, log).snapshot_offset == 20
        assert state.state == model(records[:20])
        log.truncate_to(10)
        assert list_snapshots(str(tmp_path)) == []
        assert materialize(log) == model(records[:10])


def test_truncation_below_the_durable_end_and_of_unsynced_data(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        records = write_epochs(log, EPOCHS[:5])
        log.append(batch_records(5), 2, NOW_MS)
        assert (log.high_watermark, log.log_end_offset) == (10, 12)
        assert log.truncate_to(8) == 8
        assert (log.high_watermark, log.log_end_offset) == (8, 8)
        assert log.epoch_entries() == [(1, 0)]
        assert materialize(log) == model(records[:8])


def test_truncation_into_a_compaction_gap_ends_the_log_at_the_data_below_it(tmp_path: Path) -> None:
    # Batches [0,2) [2,4) [4,6) [6,8) in one sealed segment; [4,6) rewrites the keys of [2,4).
    keys = [("a", "b"), ("c", "d"), ("c", "d"), ("e", "f")]
    batches = [[commit(g, "t", 0, i) for g in pair] for i, pair in enumerate(keys)]
    with PartitionLog.open(tmp_path / "probe", 1) as probe:
        for batch in batches:
            probe.append(batch, 1, NOW_MS)
    config = LogConfig(offsets_segment_bytes=len(log_bytes(tmp_path / "probe")))
    with PartitionLog.open(tmp_path / "p", 1, config) as log:
        for batch in batches:
            log.append(batch, 1, NOW_MS)
        log.append(batch_records(9), 2, NOW_MS)
        log.sync()
        assert log.active_segment_base == 8
        compact(log, NOW_MS)
        assert [b.base_offset for _, b in log.raw_batches()] == [0, 4, 6, 8]
        assert log.truncate_to(3) == 2, "offsets 2 and 3 are a gap: the log ends after batch [0, 2)"
        assert (log.log_end_offset, log.epoch_entries()) == (2, [(1, 0)])
        assert materialize(log) == model(batches[0])
    with PartitionLog.open(tmp_path / "p", 2, config) as log:
        assert (log.log_end_offset, log.epoch_entries()) == (2, [(1, 0)])


def test_a_crash_before_any_step_recovers_to_a_prefix_and_truncating_again_finishes(tmp_path: Path) -> None:
    source = tmp_path / "source"
    records, original = written(source)
    offset = boundaries(source)["below several segments"]
    steps: list[str] = []
    probe = tmp_path / "probe"
    shutil.copytree(source, probe)
    with PartitionLog.open(probe, 5, SMALL) as log:
        log.truncate_to(offset, on_step=steps.append)
    assert steps[0] == "delete snapshots" and steps[-1] == "write epoch checkpoint"
    assert sum(step.startswith("delete segment") for step in steps) >= 3

    for index, step in enumerate(steps):
        directory = tmp_path / f"crash-{index}"
        shutil.copytree(source, directory)
        with PartitionLog.open(directory, 5, SMALL) as log:
            with pytest.raises(LogFailedError, match="part way"):
                log.truncate_to(offset, on_step=crash_at(step))
            with pytest.raises(LogFailedError):
                log.append(batch_records(0), 5, NOW_MS)
        with PartitionLog.open(directory, 5, SMALL) as log:
            end = log.log_end_offset
            assert offset <= end <= 30, step
            check_prefix(log, records, original, end)
            log.truncate_to(offset)
        with PartitionLog.open(directory, 5, SMALL) as log:
            check_prefix(log, records, original, offset)
            assert log_bytes(directory) == log_bytes(probe)


def crash_at(target: str) -> Callable[[str], None]:
    def step(name: str) -> None:
        if name == target:
            raise Crash(name)

    return step


def test_a_stale_checkpoint_after_a_crash_mid_truncation_is_corrected(tmp_path: Path) -> None:
    written(tmp_path)
    with PartitionLog.open(tmp_path, 5, SMALL) as log:
        with pytest.raises(LogFailedError):
            log.truncate_to(12, on_step=crash_at("write epoch checkpoint"))
    assert '[5, 20]' in Path(checkpoint_path(tmp_path)).read_text()
    with PartitionLog.open(tmp_path, 5, SMALL) as log:
        assert log.log_end_offset == 12
        assert log.epoch_entries() == [(1, 0), (2, 10)]
    assert '[5, 20]' not in Path(checkpoint_path(tmp_path)).read_text()


def test_a_diverged_follower_truncates_and_catches_up_byte_for_byte(tmp_path: Path) -> None:
    # Both hold epoch 1's offsets 0-9. The old leader (now follower) wrote 10-13
    # in epoch 2 that nobody fetched; the new leader wrote 10-15 in epoch 3.
    with PartitionLog.open(tmp_path / "new", 1, SMALL) as leader, PartitionLog.open(
        tmp_path / "old", 1, SMALL
    ) as follower:
        common = write_epochs(leader, [1] * 5)
        follower.append_raw(leader.read_raw(0, 10**9))
        write_epochs(follower, [2, 2], first=50)
        ahead = write_epochs(leader, [3, 3, 3], first=70)
        # The leader's end offset for the follower's last epoch (2): the start
        # of its next higher epoch, 10 (replication-notes section 5).
        assert leader.epoch_entries() == [(1, 0), (3, 10)]
        assert follower.epoch_entries() == [(1, 0), (2, 10)]
        follower.truncate_to(10)
        follower.append_raw(leader.read_raw(follower.log_end_offset, 10**9))
        follower.sync()
        assert log_bytes(tmp_path / "old") == log_bytes(tmp_path / "new")
        assert follower.epoch_entries() == leader.epoch_entries()
        assert materialize(follower) == model(common + ahead)
