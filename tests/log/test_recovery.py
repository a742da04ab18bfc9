"""Recovery on open: torn tails truncated and logged, corruption reported."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from log import CorruptLogError, LogConfig, LogReader, PartitionLog, materialize
from log.segment import list_dir

from tests.log.helpers import EPOCH, NOW_MS, State, commit, model

RECORDS = [[commit("g", "t", p, 10 * i + p) for p in range(3)] for i in range(6)]


def write_log(directory: Path, config: LogConfig | None = None) -> list[int]:
    """Six synced batches; returns each batch's end position in the last segment."""
    ends = []
    with PartitionLog.open(directory, EPOCH, config) as log:
        for batch in RECORDS:
            log.append(batch, EPOCH, NOW_MS)
            log.sync()
            ends.append(os.path.getsize(list_dir(str(directory)).segments[-1].path))
    return ends


def last_segment(directory: Path) -> str:
    return list_dir(str(directory)).segments[-1].path


def expected(batches: int) -> State:
    return model(r for batch in RECORDS[:batches] for r in batch)


@pytest.mark.parametrize("keep_batches", [0, 2, 5])
@pytest.mark.parametrize("extra", [1, 20, 43, 44, 60])
def test_a_torn_tail_is_truncated_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, keep_batches: int, extra: int
) -> None:
    ends = write_log(tmp_path)
    position = ends[keep_batches - 1] if keep_batches else 0
    path = last_segment(tmp_path)
    os.truncate(path, min(position + extra, ends[keep_batches] - 1))

    with caplog.at_level(logging.WARNING, logger="log.recovery"):
        log = PartitionLog.open(tmp_path, EPOCH)
    with log:
        assert log.log_end_offset == 3 * keep_batches
        assert materialize(log) == expected(keep_batches)
        assert log.truncated_bytes > 0
    assert os.path.getsize(path) == position
    (message,) = [r.getMessage() for r in caplog.records if "torn tail" in r.getMessage()]
    assert path in message and f"byte {position}" in message and f"offset {3 * keep_batches}" in message


@pytest.mark.parametrize("garbage", [b"\x00" * 4096, b"RGOL" + os.urandom(100), os.urandom(7), b"R"])
def test_garbage_after_the_end_is_truncated(tmp_path: Path, garbage: bytes) -> None:
    ends = write_log(tmp_path)
    with open(last_segment(tmp_path), "ab") as file:
        file.write(garbage)

    with PartitionLog.open(tmp_path, EPOCH) as log:
        assert log.log_end_offset == 18
        assert materialize(log) == expected(6)
    assert os.path.getsize(last_segment(tmp_path)) == ends[-1]


def test_damage_followed_by_valid_batches_is_corruption_not_a_tail(tmp_path: Path) -> None:
    ends = write_log(tmp_path)
    path = last_segment(tmp_path)
    before = Path(path).read_bytes()
    with open(path, "r+b") as file:
        file.seek(ends[1] + 50)
        file.write(b"\xff")

    with pytest.raises(CorruptLogError) as raised:
        PartitionLog.open(tmp_path, EPOCH)
    assert raised.value.path == path and raised.value.position == ends[1] and raised.value.offset == 6
    assert "valid batch follows" in str(raised.value)
    assert len(Path(path).read_bytes()) == len(before), "nothing may be truncated"
    with pytest.raises(CorruptLogError):
        materialize(tmp_path)


def test_damage_in_an_earlier_segment_stops_loading_with_its_position(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=300)
    write_log(tmp_path, config)
    first = list_dir(str(tmp_path)).segments[0].path
    with open(first, "r+b") as file:
        file.seek(60)
        file.write(b"\x00\x00")

    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        with pytest.raises(CorruptLogError) as raised:
            materialize(log)
    assert raised.value.path == first and raised.value.position == 0
    with pytest.raises(CorruptLogError):
        list(LogReader(tmp_path).records())


def test_a_truncated_earlier_segment_is_corruption(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=300)
    write_log(tmp_path, config)
    first = list_dir(str(tmp_path)).segments[0].path
    os.truncate(first, os.path.getsize(first) - 1)

    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        with pytest.raises(CorruptLogError, match="not the last"):
            materialize(log)


def test_an_empty_last_segment_after_a_roll_is_fine(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=300)
    write_log(tmp_path, config)
    segments = list_dir(str(tmp_path)).segments
    open(os.path.join(tmp_path, f"{18:020d}.log"), "wb").close()
    assert len(list_dir(str(tmp_path)).segments) == len(segments) + 1

    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        assert log.log_end_offset == 18 and materialize(log) == expected(6)
        assert log.append([commit("g", "t", 0, 99)], EPOCH, NOW_MS) == (18, 19)


def test_leftovers_of_an_interrupted_compaction_are_resolved(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=300)
    write_log(tmp_path, config)
    first, second = list_dir(str(tmp_path)).segments[:2]
    # A swap covering the first two segments (a copy of them), an unfinished
    # cleaned file, a stale tmp file: what crashes at each step leave behind.
    end = list_dir(str(tmp_path)).segments[2].base_offset
    swap = os.path.join(tmp_path, f"{first.base_offset:020d}.{end:020d}.swap")
    with open(swap, "wb") as out:
        out.write(Path(first.path).read_bytes() + Path(second.path).read_bytes())
    shutil.copy(first.path, os.path.join(tmp_path, f"{first.base_offset:020d}.log.cleaned"))
    Path(tmp_path, "leader-epoch.tmp").write_text("junk")
    os.unlink(second.path)

    assert materialize(tmp_path) == expected(6), "a reader resolves the swap itself"
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        assert materialize(log) == expected(6)
    names = os.listdir(tmp_path)
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".tmp"))]
    assert os.path.basename(second.path) not in names and os.path.basename(first.path) in names
