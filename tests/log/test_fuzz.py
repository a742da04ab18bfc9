"""Damaged bytes in segments: the only outcomes are a truncated torn tail or
the documented CorruptLogError, decided exactly as documented:

- damage in a segment other than the last: loading raises CorruptLogError;
- damage in the last segment with a valid batch after it: opening raises
  CorruptLogError (and a reader raises it too);
- damage in the last segment with nothing valid after it: a torn tail, cut
  at the first damaged batch, loading everything before it.

Every byte of a batch is covered by the magic or the CRC, so any changed
byte invalidates exactly the batch it sits in.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.records import Record
from log import CorruptLogError, LogConfig, PartitionLog, materialize
from log.segment import list_dir, segment_file_name

from tests.log.helpers import EPOCH, NOW_MS, State, log_batches, model, snapshot_files


def write(directory: str, config: LogConfig, written: list[list[Record]]) -> list[tuple[int, int, int]]:
    """Append and sync; (segment base, start, end) of every batch."""
    places: list[tuple[int, int, int]] = []
    with PartitionLog.open(directory, EPOCH, config) as log:
        for records in written:
            log.append(records, EPOCH, NOW_MS)
            path = os.path.join(directory, segment_file_name(log.active_segment_base))
            end = os.path.getsize(path)
            start = places[-1][2] if places and places[-1][0] == log.active_segment_base else 0
            places.append((log.active_segment_base, start, end))
        log.sync()
    return places


@given(
    written=st.lists(log_batches, min_size=1, max_size=10),
    segment_bytes=st.sampled_from([250, 1 << 20]),
    data=st.data(),
)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_damaged_segments_are_truncated_or_reported_never_misread(
    written: list[list[Record]], segment_bytes: int, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        config = LogConfig(offsets_segment_bytes=segment_bytes, fsync=False)
        places = write(directory, config, written)
        segments = [s.base_offset for s in list_dir(directory).segments]
        original = snapshot_files(directory)
        for _ in range(data.draw(st.integers(1, 3), label="flips")):
            index = data.draw(st.integers(0, len(written) - 1), label="batch")
            base, start, end = places[index]
            position = data.draw(st.integers(start, end - 1), label="byte")
            with open(os.path.join(directory, segment_file_name(base)), "r+b") as file:
                file.seek(position)
                old = file.read(1)[0]
                file.seek(position)
                file.write(bytes([old ^ data.draw(st.integers(1, 255), label="xor")]))
        files = snapshot_files(directory)
        # Flips of one byte may cancel out: compare with the original bytes.
        damaged = {
            i for i, (base, start, end) in enumerate(places)
            if files[segment_file_name(base)][start:end] != original[segment_file_name(base)][start:end]
        }
        if not damaged:
            damaged = {len(written)}

        first = min(damaged)
        in_last = first == len(written) or places[first][0] == segments[-1]
        valid_after = any(
            i not in damaged and places[i][0] == segments[-1] for i in range(first + 1, len(written))
        )
        want = model(r for batch in written[:first] for r in batch)

        read_only = _outcome(lambda: materialize(directory))
        assert snapshot_files(directory) == files, "reading never modifies"
        opened = _outcome(lambda: _open_and_load(directory, config))

        if not in_last or valid_after:
            assert read_only == "corrupt"
            assert opened == "corrupt"
        else:
            assert read_only == want
            assert opened == want


def _open_and_load(directory: str, config: LogConfig) -> State:
    with PartitionLog.open(directory, EPOCH, config) as log:
        return materialize(log)


def _outcome(load: object) -> object:
    try:
        return load()  # type: ignore[operator]
    except CorruptLogError:
        return "corrupt"
