"""FORMAT.md is enough to read a log: a reader written only from the document
(struct, zlib, msgpack; nothing from log/) must see what the log's own
reader sees, across rolled, compacted and snapshotted logs.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any
from uuid import UUID

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    Record,
)
from log import LogConfig, LogReader, PartitionLog, compact, write_snapshot

from tests.log.helpers import (
    EPOCH,
    NOW_MS,
    commit,
    consumer_group_records,
    group,
    group_tombstone,
    offset_tombstone,
)

HEADER = ">4sBBHqiiiqII"


class ConsumerDraws:
    """A few consumer group records for some batches of the history."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def draw(self, index: int) -> list[Record]:
        if index % 3:
            return []
        return self.data.draw(st.lists(consumer_group_records, max_size=3), label=f"consumer records {index}")


def spec_segments(directory: str) -> list[str]:
    names = os.listdir(directory)
    logs = {int(m[1]): n for n in names if (m := re.fullmatch(r"(\d{20})\.log", n))}
    swaps = [(int(m[1]), int(m[2]), n) for n in names if (m := re.fullmatch(r"(\d{20})\.(\d{20})\.swap", n))]
    for base, end, name in swaps:
        logs = {b: n for b, n in logs.items() if not base <= b < end}
        logs[base] = name
    return [os.path.join(directory, logs[base]) for base in sorted(logs)]


def spec_records(directory: str) -> list[tuple[int, tuple[Any, ...], tuple[Any, ...] | None]]:
    """(offset, key fields, value fields or None) of every record, by the document."""
    out = []
    for path in spec_segments(directory):
        data = Path(path).read_bytes()
        position = 0
        while position + 44 <= len(data):
            fields = struct.unpack_from(HEADER, data, position)
            magic, version, _, _, base, _, count, _, _, length, crc = fields
            payload = data[position + 44:position + 44 + length]
            assert magic == b"RGOL" and version == 1 and len(payload) == length
            assert zlib.crc32(payload, zlib.crc32(data[position:position + 40])) == crc
            body = msgpack.unpackb(payload)
            deltas = body[0] if body[0] is not None else list(range(count))
            index = 0
            for run in body[1:]:
                for key, value in spec_run(run):
                    out.append((base + deltas[index], key, value))
                    index += 1
            position += 44 + length
    return out


def spec_run(run: list[Any]) -> list[tuple[tuple[Any, ...], tuple[Any, ...] | None]]:
    key_version, value_version, count = run[:3]

    def strings(column: list[Any]) -> list[Any]:
        table, indices = column
        return [table[indices]] * count if isinstance(indices, int) else [table[i] for i in indices]

    def ints(column: Any) -> list[Any]:
        return [column] * count if isinstance(column, int) else column

    keys: list[tuple[Any, ...]]
    if key_version in (0, 1):
        keys = [("offset", *k) for k in zip(strings(run[3]), strings(run[4]), run[5])]
        if value_version is None:
            return [(k, None) for k in keys]
        values = zip(ints(run[6]), ints(run[7]), strings(run[8]), ints(run[9]), ints(run[10]))
        return [(k, tuple(v)) for k, v in zip(keys, values)]
    if key_version == 2:
        keys = [("group", g) for g in strings(run[3])]
        if value_version is None:
            return [(k, None) for k in keys]
        rows = [(*row[:5], tuple(tuple(m) for m in row[5])) for row in run[4]]
        return list(zip(keys, rows))
    # Consumer group records: key columns, then (unless tombstones) one array of rows.
    key_columns = run[3:] if value_version is None else run[3:-1]
    keys = [(key_version, *fields) for fields in zip(*map(strings, key_columns))]
    if value_version is None:
        return [(k, None) for k in keys]
    return [(k, tuple(row)) for k, row in zip(keys, run[-1])]


CONSUMER_KEY_VERSIONS = {
    ConsumerGroupMetadataKey: 3, ConsumerGroupPartitionMetadataKey: 4, ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6, ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8, ConsumerGroupRegularExpressionKey: 16,
}


def raw(value: Any) -> Any:
    """A consumer group value as the document lays it out: arrays of fields, ids as bytes."""
    if isinstance(value, UUID):
        return value.bytes
    if isinstance(value, tuple):
        return [raw(field) for field in value]
    return value


def as_spec(key: Any, value: Any) -> tuple[tuple[Any, ...], tuple[Any, ...] | None]:
    if type(key) in CONSUMER_KEY_VERSIONS:
        return (CONSUMER_KEY_VERSIONS[type(key)], *key), None if value is None else tuple(raw(value))
    kind = ("offset",) if len(key) == 3 else ("group",)
    return (*kind, *key), None if value is None else tuple(value)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_reader_built_from_the_document_sees_what_the_log_reader_sees(
    tmp_path: Path, data: st.DataObject
) -> None:
    consumer = ConsumerDraws(data)
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))
    config = LogConfig(offsets_segment_bytes=400, offsets_delete_retention_ms=0)
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        for i in range(40):
            batch = [commit(f"g{i % 3}", "t", p, i) for p in range(2)] + [group(f"g{i % 3}", generation=i)]
            if i % 7 == 3:
                batch += [offset_tombstone("g1", "t", 0), group_tombstone("g2")]
            batch += consumer.draw(i)
            log.append(batch, EPOCH, NOW_MS + i)
            log.sync()
            if i == 30:
                compact(log, NOW_MS + 20)
                write_snapshot(log, NOW_MS)

    expected = [(offset, *as_spec(*record)) for offset, record in LogReader(tmp_path).records()]
    assert spec_records(str(tmp_path)) == expected
    assert len(expected) < 40 * 3, "the log was compacted, with gaps in offsets"
