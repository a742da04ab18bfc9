"""The version rule of a cluster mid-upgrade (docs/operations.md "Versions side by side"),
on two versions of the record format: "new" code writes a record kind this ("old") code
does not know, and a value version and a batch format it does not know; this code, as a
follower and as a loader, does what log/FORMAT.md says.

- An unknown key version (a new record kind): a follower appends the leader's bytes
  unchanged; loading skips the run and counts it; compaction keeps the batch whole; no
  snapshot is written over it; so the records are still there, byte for byte, when the
  replica runs the new code again (upgrade, downgrade, upgrade).
- A known key with an unknown value version, or an unknown batch format version: never
  skipped (an older value would win) and never truncated as a torn tail: the replica
  refuses the log (UnsupportedVersionError) and the file is left as it was.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import msgpack
import pytest

from log import LogConfig, PartitionLog, compact, encode_payload, materialize, write_snapshot
from log.batch import HEADER, encode_batch
from log.errors import UnsupportedVersionError

from tests.log.helpers import EPOCH, NOW_MS, commit, group

CONFIG = LogConfig(offsets_segment_bytes=300, offsets_delete_retention_ms=1000)
NEW_KIND = 101  # a record kind a later release adds (raygroups' own numbering starts at 100)


def new_code_batch(base: int, offset: int) -> bytes:
    """A batch as the new release writes it: a commit, then a run of the new kind."""
    body = msgpack.unpackb(encode_payload([commit("g", "t", 0, offset)]))
    body.append([NEW_KIND, 0, 2, [["share-group"], [0, 0]], [offset, offset + 1]])
    return encode_batch(base, 3, 2, EPOCH, NOW_MS + base, msgpack.packb(body))


def new_runs(directory: Path) -> list[list[object]]:
    """The new kind's runs in a directory's batches, as the new code reads them."""
    with PartitionLog.open(directory, EPOCH, CONFIG) as log:
        payloads = [msgpack.unpackb(batch.payload) for _, batch in log.raw_batches(0, log.log_end_offset)]
    return [run for payload in payloads for run in payload[1:] if run[0] == NEW_KIND]


def test_an_old_follower_keeps_a_new_record_kind_through_compaction(tmp_path: Path) -> None:
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    leader.mkdir()
    with open(leader / f"{0:020d}.log", "wb") as file:
        for i in range(6):
            file.write(new_code_batch(3 * i, i + 1))
    with PartitionLog.open(leader, EPOCH, CONFIG) as source:
        shipped = source.read_raw(0, 1 << 20)  # replication ships the bytes unchanged
    with PartitionLog.open(follower, EPOCH, CONFIG) as log:
        log.append_raw(shipped)
        log.append([group("g")], EPOCH, NOW_MS + 100)  # the old code leads on: its own records
        log.sync()
        assert materialize(log)[commit("g", "t", 0, 6).key] == commit("g", "t", 0, 6).value
        assert write_snapshot(log, NOW_MS + 200) is None  # a snapshot would drop the new kind
        compact(log, NOW_MS + 10**9)
        assert materialize(log) == materialize(log, use_snapshot=False)
    kept = new_runs(follower)
    assert len(kept) == 6 and kept[-1][4] == [6, 7]  # every new-kind run, unchanged


def test_a_new_value_version_of_a_known_key_is_refused_never_skipped(tmp_path: Path) -> None:
    body = msgpack.unpackb(encode_payload([commit("g", "t", 0, 1)]))
    body[1][1] = 7  # value version 7 of an offset commit: the old code does not know it
    segment = tmp_path / f"{0:020d}.log"
    with open(segment, "wb") as file:
        file.write(encode_batch(0, 1, 0, EPOCH, NOW_MS, msgpack.packb(body)))
    before = segment.read_bytes()
    with pytest.raises(UnsupportedVersionError, match="value version 7"):
        with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
            materialize(log)
    assert segment.read_bytes() == before


def test_a_new_batch_format_is_refused_never_truncated_as_a_torn_tail(tmp_path: Path) -> None:
    good = encode_batch(0, 1, 0, EPOCH, NOW_MS, encode_payload([commit("g", "t", 0, 1)]))
    future = bytearray(encode_batch(1, 1, 0, EPOCH, NOW_MS, encode_payload([commit("g", "t", 0, 2)])))
    future[4] = 2  # format version 2, CRC made valid again: a batch of a later release
    fields = list(HEADER.unpack_from(bytes(future)))
    payload = bytes(future[HEADER.size:])
    fields[-1] = zlib.crc32(payload, zlib.crc32(bytes(future[:HEADER.size - 4])))
    future[:HEADER.size] = HEADER.pack(*fields)
    segment = tmp_path / f"{0:020d}.log"
    segment.write_bytes(good + bytes(future))
    with pytest.raises(UnsupportedVersionError, match="batch format version 2"):
        with PartitionLog.open(tmp_path, EPOCH, CONFIG) as log:
            materialize(log)
    assert segment.read_bytes() == good + bytes(future)
