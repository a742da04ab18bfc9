"""The columnar decoder (`log/columnar.py`) against the row path, driver side (no Spark).

The row path (`record_to_row` over `LogReader`'s records) is the reference:
on a generated log holding every record kind, a compacted segment, a
snapshot, a torn tail, unknown key versions and payloads in every layout
the format has had, the Arrow batches hold exactly its rows. On bad input
both paths yield the same rows and then raise the same error.
"""

from __future__ import annotations

import os
import random
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.handoff import ADMIT_KEY, ROUTING_KEY
from coordinator.records import OffsetCommitKey, OffsetCommitValue, Record, ServiceStateKey, ServiceStateValue
from log.batch import encode_batch
from log.codec import encode_payload
from log.columnar import arrow_batches
from log.compaction import compact
from log.config import LogConfig
from log.errors import CorruptLogError, LogError, UnsupportedVersionError
from log.partition import PartitionLog
from log.reader import LogReader
from log.segment import list_dir
from log.snapshot import write_snapshot
from spark_bridge.reader import plan_tasks, read_log_batches, read_log_rows
from spark_bridge.rows import COLUMN_NAMES, arrow_schema, row_model

from tests.log.helpers import consumer_group_kinds, consumer_group_records, group_records, offset_records
from tests.spark.histories import EPOCH, FAST, T0, group, group_tombstone, offset_tombstone

SMALL_SEGMENTS = LogConfig(offsets_segment_bytes=2_000, fsync=False, offsets_delete_retention_ms=1_000)
Rows = list[tuple[Any, ...]]


def batch_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
    for batch in batches:
        assert batch.schema == arrow_schema()
        yield from zip(*(column.to_pylist() for column in batch.columns))


def columnar_rows(data_dir: str | Path, rows_per_batch: int = 65_536) -> Iterator[tuple[Any, ...]]:
    model = row_model()
    for task in plan_tasks(data_dir):
        raw = LogReader(task.directory).raw_batches(task.start_offset, task.stop_offset)
        start, stop = task.start_offset, task.stop_offset
        yield from batch_rows(arrow_batches(task.partition, raw, model, start, stop, rows_per_batch))


def by_position(rows: Iterable[tuple[Any, ...]]) -> Rows:
    return sorted(rows, key=lambda row: (row[0], row[1]))


def assert_same_rows(data_dir: str | Path) -> Rows:
    expected = by_position(read_log_rows(data_dir))
    assert by_position(batch_rows(read_log_batches(data_dir))) == expected
    for rows_per_batch in (1, 7):
        assert by_position(columnar_rows(data_dir, rows_per_batch)) == expected
    return expected


def rows_then_error(read: Callable[[], Iterable[tuple[Any, ...]]]) -> tuple[Rows, Exception | None]:
    rows: Rows = []
    try:
        for row in read():
            rows.append(row)
    except Exception as exc:  # the error is what is compared
        return by_position(rows), exc
    return by_position(rows), None


def assert_same_failure(data_dir: str | Path) -> Exception | None:
    """Both paths give the same rows, then the same error (or none)."""
    expected_rows, expected = rows_then_error(lambda: read_log_rows(data_dir))
    for rows_per_batch in (1, 3, 65_536):
        rows, error = rows_then_error(partial(columnar_rows, data_dir, rows_per_batch))
        assert rows == expected_rows
        assert type(error) is type(expected) and str(error) == str(expected)
    return expected


# ------------------------------------------------------------ the records


def commit(group_id: str, topic: str, partition: int, offset: int, *, epoch: int = EPOCH,
           metadata: str | None = "", expire_ms: int = -1, at_ms: int = T0) -> Record:
    value = OffsetCommitValue(offset, epoch, metadata, at_ms, expire_ms)  # type: ignore[arg-type]
    return Record(OffsetCommitKey(group_id, topic, partition), value)


def random_batch(rng: random.Random, i: int, service_state: bool = False) -> list[Record]:
    """Mostly commits of a few groups, with every variation of their fields, now and then the rest
    (with `service_state`, the handoff's entries too)."""
    records = []
    for j in range(rng.randint(1, 12)):
        g = f"group-{rng.randint(0, 5)}"
        roll = rng.random()
        if roll < 0.8:
            records.append(commit(
                g, rng.choice(["orders", "payments", "ünïcode"]), rng.randint(0, 3), i * 100 + j,
                epoch=rng.choice([EPOCH, EPOCH, -1, 5]), metadata=rng.choice(["", "", "meta", None]),
                expire_ms=rng.choice([-1, -1, T0 + 99_000]), at_ms=T0 + i,
            ))
        elif roll < 0.88:
            records.append(offset_tombstone(g, "orders", rng.randint(0, 3)))
        elif roll < 0.95:
            records.append(group(g, i, rng.randint(0, 3), T0 + i))
        else:
            records.append(group_tombstone(g))
    if i % 17 == 0:
        records += consumer_group_kinds(f"cg-{i % 3}", i + 1)
    if service_state and i % 23 == 5:  # the handoff's entries and a service state tombstone
        records += [Record(ROUTING_KEY, ServiceStateValue(f"{i};4;2;0".encode())),
                    Record(ADMIT_KEY, ServiceStateValue(b"")), Record(ServiceStateKey("topic", g), None)]
    return records


def write_generated(
    directory: str, batches: int, seed: int, config: LogConfig = SMALL_SEGMENTS
) -> PartitionLog:
    rng = random.Random(seed)
    log = PartitionLog.open(directory, EPOCH, config)
    for i in range(batches):
        log.append(random_batch(rng, i, service_state=True), EPOCH, T0 + i)
    log.sync()
    return log


# ----------------------------------------------- hand-made payloads (old layouts)


def write_segment(directory: str, base: int, batches: list[tuple[int, int, int, bytes]]) -> None:
    """(base offset, record count, last offset delta, payload) batches as one segment file."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{base:020d}.log"), "wb") as file:
        for batch_base, count, delta, payload in batches:
            file.write(encode_batch(batch_base, count, delta, EPOCH, T0 + batch_base, payload))


def old_layout_payloads() -> list[tuple[int, int, int, bytes]]:
    """Payloads as older writers laid them out: every column an array (before constant columns
    were written once), key version 0 (legacy commits), unknown key versions, explicit deltas."""
    strings = [["g", "h"], [0, 1, 0]]
    every_column_an_array = [
        None,
        [1, 0, 3, strings, [["t"], [0, 0, 0]], [0, 1, 2], [10, 11, 12], [3, 3, -1], [["", "m"], [0, 1, 1]],
         [T0, T0, T0], [-1, T0 + 5, -1]],
    ]
    legacy_key_version_0 = [
        None,
        [0, 0, 2, [["old"], [0, 0]], [["t"], [0, 0]], [4, 5], [1, 2], [-1, -1], [[""], [0, 0]],
         [T0, T0], [-1, -1]],
        [0, None, 1, [["old"], [0]], [["t"], [0]], [4]],
    ]
    unknown_key_versions = [
        None,
        [99, 0, 2, "anything", {"a": 1}],
        [1, 0, 1, [["g"], 0], [["t"], 0], [9], 7, 1, [["x"], 0], T0, -1],
        [42, None, 1],
    ]
    compacted = [
        [0, 4, 9],
        [1, 0, 2, [["g"], 0], [["t"], 0], [0, 1], [20, 21], 1, [[""], 0], T0, -1],
        [2, None, 1, [["g"], [0]]],
    ]
    return [
        (0, 3, 2, msgpack.packb(every_column_an_array)),
        (3, 3, 2, msgpack.packb(legacy_key_version_0)),
        (6, 4, 3, msgpack.packb(unknown_key_versions)),
        (10, 3, 9, msgpack.packb(compacted)),
    ]


# ------------------------------------------------------------------ tests


def test_a_generated_log_of_every_kind_gives_the_row_paths_rows(tmp_path: Path) -> None:
    # Partition 0: compacted segments (tombstones dropped, explicit offset deltas) and live ones.
    log = write_generated(str(tmp_path / "offsets-0"), 160, seed=1)
    compact(log, T0 + 10_000)
    log.close()
    # Partition 1: a snapshot beside its segments (readers of the log ignore it).
    log = write_generated(str(tmp_path / "offsets-1"), 80, seed=2)
    assert write_snapshot(log, T0 + 1_000) is not None
    log.close()
    # Partition 2: a torn tail.
    write_generated(str(tmp_path / "offsets-2"), 60, seed=3).close()
    last = list_dir(str(tmp_path / "offsets-2")).segments[-1].path
    os.truncate(last, os.path.getsize(last) - 5)
    # Partition 3: payloads in every layout the format has had.
    write_segment(str(tmp_path / "offsets-3"), 0, old_layout_payloads())

    rows = assert_same_rows(tmp_path)

    kinds = {row[COLUMN_NAMES.index("record_type")] for row in rows}
    assert len(kinds) == 10  # offset commits, group metadata, seven consumer group kinds, service state
    assert {row[COLUMN_NAMES.index("state_kind")] for row in rows} == {None, "routing", "admitted", "topic"}
    assert any(name.endswith(".snapshot") for name in os.listdir(tmp_path / "offsets-1"))
    assert {row[1] for row in rows if row[0] == 3} == {0, 1, 2, 3, 4, 5, 8, 10, 14, 19}
    assert sum(1 for row in rows if row[COLUMN_NAMES.index("tombstone")]) > 10


def test_offsets_within_a_task_range_cut_a_batch_as_the_row_path_does(tmp_path: Path) -> None:
    write_generated(str(tmp_path / "offsets-0"), 30, seed=4, config=FAST).close()
    directory = str(tmp_path / "offsets-0")
    model = row_model()
    for start, stop in ((5, 17), (0, 1), (13, None)):
        raw = LogReader(directory).raw_batches(start, stop)
        got = by_position(batch_rows(arrow_batches(0, raw, model, start, stop, rows_per_batch=4)))
        expected = [
            row for row in read_log_rows(tmp_path) if row[1] >= start and (stop is None or row[1] < stop)
        ]
        assert got == expected and got


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.one_of(offset_records, offset_records, group_records, consumer_group_records),
                         min_size=1, max_size=10), min_size=1, max_size=6))
def test_any_records_give_the_row_paths_rows(batches: list[list[Record]]) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        with PartitionLog.open(os.path.join(data_dir, "offsets-0"), EPOCH, FAST) as log:
            for i, records in enumerate(batches):
                log.append(records, EPOCH, T0 + i)
        assert_same_rows(data_dir)


# ------------------------------------------------------------- bad input


def three_segments(tmp_path: Path) -> list[str]:
    directory = str(tmp_path / "offsets-0")
    write_generated(directory, 40, seed=5).close()
    segments = [segment.path for segment in list_dir(directory).segments]
    assert len(segments) >= 3
    return segments


def test_a_crc_mismatch_mid_segment_is_the_same_corruption(tmp_path: Path) -> None:
    segments = three_segments(tmp_path)
    with open(segments[1], "r+b") as file:
        file.seek(60)
        byte = file.read(1)
        file.seek(60)
        file.write(bytes([byte[0] ^ 0xFF]))

    error = assert_same_failure(tmp_path)

    assert isinstance(error, CorruptLogError) and error.path == segments[1]


def test_a_truncated_segment_that_is_not_the_last_is_the_same_corruption(tmp_path: Path) -> None:
    segments = three_segments(tmp_path)
    os.truncate(segments[0], os.path.getsize(segments[0]) - 10)

    error = assert_same_failure(tmp_path)

    assert isinstance(error, CorruptLogError) and error.path == segments[0]


def test_a_truncated_last_segment_is_the_end(tmp_path: Path) -> None:
    segments = three_segments(tmp_path)
    os.truncate(segments[-1], os.path.getsize(segments[-1]) // 2)

    assert assert_same_failure(tmp_path) is None


def test_an_undecodable_payload_is_corruption_at_its_batch_after_the_rows_before(tmp_path: Path) -> None:
    directory = str(tmp_path / "offsets-0")
    good = encode_payload([commit("g", "t", 0, 1), commit("g", "t", 1, 2)])
    write_segment(directory, 0, [(0, 2, 1, good), (2, 1, 0, b"\xc1 not msgpack"), (3, 2, 1, good)])

    error = assert_same_failure(tmp_path)

    assert isinstance(error, CorruptLogError) and error.offset == 2


@pytest.mark.parametrize(
    "column, value",
    [(6, [1.5]), (6, [2**63]), (6, [-1, 2**63]), (7, ["x"]), (5, [2**40]), (4, [["t"], [3]])],
)
def test_a_column_of_the_wrong_kind_is_corruption_never_a_row(
    tmp_path: Path, column: int, value: Any
) -> None:
    directory = str(tmp_path / "offsets-0")
    run = [1, 0, 1, [["g"], 0], [["t"], 0], [0], 10, 1, [[""], 0], T0, -1]
    run[column] = value
    good = encode_payload([commit("g", "t", 0, 1)])
    write_segment(directory, 0, [(0, 1, 0, good), (1, 1, 0, msgpack.packb([None, run]))])
    rows, error = rows_then_error(lambda: columnar_rows(tmp_path, 65_536))

    assert isinstance(error, CorruptLogError) and error.offset == 1
    assert [row[1] for row in rows] == [0]


def test_an_unknown_value_version_of_a_known_key_is_refused_the_same_way(tmp_path: Path) -> None:
    directory = str(tmp_path / "offsets-0")
    good = encode_payload([commit("g", "t", 0, 1)])
    newer = msgpack.packb([None, [1, 7, 1, [["g"], 0], [["t"], 0], [0], 10]])
    write_segment(directory, 0, [(0, 1, 0, good), (1, 1, 0, newer)])

    assert isinstance(assert_same_failure(tmp_path), UnsupportedVersionError)


def test_an_unknown_batch_format_version_is_refused_the_same_way(tmp_path: Path) -> None:
    directory = str(tmp_path / "offsets-0")
    batch = bytearray(encode_batch(1, 1, 0, EPOCH, T0, encode_payload([commit("g", "t", 0, 1)])))
    batch[4] = 9  # format version 9, then a valid CRC for it
    batch[40:44] = zlib.crc32(bytes(batch[44:]), zlib.crc32(bytes(batch[:40]))).to_bytes(4, "big")
    good = encode_batch(0, 1, 0, EPOCH, T0, encode_payload([commit("g", "t", 0, 0)]))
    os.makedirs(directory)
    with open(os.path.join(directory, f"{0:020d}.log"), "wb") as file:
        file.write(good + bytes(batch))

    assert isinstance(assert_same_failure(tmp_path), UnsupportedVersionError)


def test_a_directory_that_is_not_a_log(tmp_path: Path) -> None:
    (tmp_path / "offsets-0").mkdir()
    (tmp_path / "offsets-0" / f"{0:020d}.log").write_bytes(b"this is not a log, just bytes" * 10)
    (tmp_path / "notes").mkdir()

    assert assert_same_failure(tmp_path) is None
    assert list(read_log_rows(tmp_path)) == []
    with pytest.raises(LogError):
        list(arrow_batches(0, LogReader(str(tmp_path / "missing")).raw_batches(), row_model()))
