"""Leader epochs of the log: entries per epoch, the checkpoint file, rebuild
from batch headers on open, and entries that survive compaction.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from log import FencedEpochError, LogConfig, PartitionLog, compact, materialize
from log.batch import encode_batch
from log.codec import encode_payload
from log.epochs import assign, iter_headers, rebuild
from log.segment import list_dir

from tests.log.helpers import NOW_MS, commit, model
from tests.log.replica_support import SMALL, batch_records, checkpoint_path, write_epochs

# 15 batches of 2 records: epoch 1 at 0, epoch 2 at 10, epoch 5 at 20.
EPOCHS = [1] * 5 + [2] * 5 + [5] * 5
ENTRIES = [(1, 0), (2, 10), (5, 20)]


def stored(directory: str | Path) -> list[tuple[int, int]]:
    with open(checkpoint_path(directory)) as file:
        return [(epoch, start) for epoch, start in json.load(file)["entries"]]


def test_entries_record_the_first_offset_of_each_epoch(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        assert (log.epoch_entries(), log.last_epoch) == ([], -1)
        write_epochs(log, EPOCHS)
        assert log.epoch_entries() == ENTRIES
        assert log.last_epoch == 5
        assert len(list_dir(str(tmp_path)).segments) > 3
    assert stored(tmp_path) == ENTRIES
    with PartitionLog.open(tmp_path, 5, SMALL) as log:
        assert log.epoch_entries() == ENTRIES


def test_an_empty_log_writes_no_checkpoint(tmp_path: Path) -> None:
    PartitionLog.open(tmp_path, 1).close()
    assert not os.path.exists(checkpoint_path(tmp_path))


def test_the_checkpoint_is_written_before_the_batch_that_opens_an_epoch(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        write_epochs(log, [1, 1])
        log.append(batch_records(2), 3, NOW_MS)
        # Not synced yet: the batch may still be lost, the entry is already on disk.
        assert stored(tmp_path) == [(1, 0), (3, 4)]
        log.append(batch_records(3), 3, NOW_MS)
        assert stored(tmp_path) == [(1, 0), (3, 4)]


def test_a_lower_epoch_than_the_logs_last_is_fenced(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        write_epochs(log, [1, 4])
    # The directory's fencing epoch is 4 now; a writer at 4 appending at 3 is refused too.
    with PartitionLog.open(tmp_path, 4, SMALL) as log:
        with pytest.raises(FencedEpochError):
            log.append(batch_records(9), 3, NOW_MS)
        assert log.epoch_entries() == [(1, 0), (4, 2)]


@pytest.mark.parametrize("damage", ["delete", "garbage", "not increasing", "wrong version", "bool entries"])
def test_a_missing_or_unreadable_checkpoint_is_rebuilt_from_the_headers(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        write_epochs(log, EPOCHS)
    path = checkpoint_path(tmp_path)
    content = {
        "garbage": b"\x00{not json",
        "not increasing": json.dumps({"version": 1, "entries": [[2, 10], [1, 0]]}).encode(),
        "wrong version": json.dumps({"version": 9, "entries": [[1, 0]]}).encode(),
        "bool entries": json.dumps({"version": 1, "entries": [[True, 0]]}).encode(),
    }
    if damage == "delete":
        os.remove(path)
    else:
        Path(path).write_bytes(content[damage])
    with caplog.at_level(logging.WARNING), PartitionLog.open(tmp_path, 5, SMALL) as log:
        assert log.epoch_entries() == ENTRIES
    assert stored(tmp_path) == ENTRIES
    if damage != "delete":
        assert "rebuilding it from the batch headers" in caplog.text


def test_a_checkpoint_behind_the_active_segment_is_completed_from_its_headers(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        write_epochs(log, EPOCHS)
        old = Path(checkpoint_path(tmp_path)).read_bytes()
        log.append(batch_records(15), 7, NOW_MS)
        assert log.active_segment_base > 20
    # As if the checkpoint write had been lost but the batch had reached the disk.
    Path(checkpoint_path(tmp_path)).write_bytes(old)
    with PartitionLog.open(tmp_path, 7, SMALL) as log:
        assert log.epoch_entries() == [*ENTRIES, (7, 30)]
    assert stored(tmp_path) == [*ENTRIES, (7, 30)]


def test_entries_past_a_torn_tail_are_dropped_on_open(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        write_epochs(log, EPOCHS)
        log.append(batch_records(15), 8, NOW_MS)
        active = list_dir(str(tmp_path)).segments[-1].path
    os.truncate(active, os.path.getsize(active) - 3)
    with PartitionLog.open(tmp_path, 8, SMALL) as log:
        assert log.log_end_offset == 30
        assert log.epoch_entries() == ENTRIES
        assert log.last_epoch == 5
    assert stored(tmp_path) == ENTRIES


def test_compaction_keeps_an_epoch_start_whose_batches_it_dropped(tmp_path: Path) -> None:
    # Offsets 0-1 epoch 1, 2-3 epoch 2, 4.. epoch 3; each batch its own segment.
    # The keys of offsets 0, 1 and 2 are written again later: compaction drops
    # the first batch of epoch 2 (and all of epoch 1), so the headers alone
    # no longer show where epochs 1 and 2 began.
    config = LogConfig(offsets_segment_bytes=1)
    key_a, key_b, key_c = (commit("g", "t", p, 0) for p in range(3))
    history = [(1, key_a), (1, key_b), (2, key_c), (2, commit("g", "t", 9, 0))]
    history += [(3, commit("g", "t", p, 1)) for p in range(3)] + [(3, commit("h", "t", 0, 0))]
    with PartitionLog.open(tmp_path, 1, config) as log:
        for epoch, record in history:
            log.append([record], epoch, NOW_MS)
        log.sync()
        before = materialize(log)
        assert compact(log, NOW_MS).records_out < len(history)
        segments = list_dir(str(tmp_path)).segments
        bases = [h.base_offset for s in segments for h in iter_headers(s.path, 4096)]
        assert bases[0] == 3, "epoch 1 and the first batch of epoch 2 are gone"
        assert log.epoch_entries() == [(1, 0), (2, 2), (3, 4)]
    with PartitionLog.open(tmp_path, 3, config) as log:
        assert log.epoch_entries() == [(1, 0), (2, 2), (3, 4)]
        assert materialize(log) == before == model(r for _, r in history)
    # Without the checkpoint the headers can only give starts at or below the
    # true ones (a follower then truncates more, never less).
    os.remove(checkpoint_path(tmp_path))
    with PartitionLog.open(tmp_path, 3, config) as log:
        rebuilt = dict(log.epoch_entries())
    assert rebuilt == {2: 0, 3: 4}


def test_rebuild_starts_an_epoch_at_the_gap_before_its_first_surviving_batch(tmp_path: Path) -> None:
    def batch(base: int, span: int, epoch: int) -> bytes:
        return encode_batch(base, 1, span - 1, epoch, NOW_MS, encode_payload([commit("g", "t", 0, base)]))

    # Batches [0,2) e1, [2,4) e1, gap, [9,10) e2, [10,11) e2, gap, [20,21) e4.
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(batch(0, 2, 1) + batch(2, 2, 1) + batch(9, 1, 2) + batch(10, 1, 2) + batch(20, 1, 4))
    assert rebuild(list_dir(str(tmp_path)).segments, 64) == [(1, 0), (2, 4), (4, 11)]


def test_assign_follows_kafkas_epoch_cache() -> None:
    entries = [(1, 0), (3, 10)]
    assert not assign(entries, 3, 15), "the same epoch again is no change"
    assert not assign(entries, -1, 20), "no epoch: ignored"
    assert assign(entries, 4, 20) and entries == [(1, 0), (3, 10), (4, 20)]
    assert assign(entries, 2, 25) and entries == [(1, 0), (2, 25)], "non-monotonic entries are removed"
    assert assign(entries, 6, 5) and entries == [(1, 0), (6, 5)]

