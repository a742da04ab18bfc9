"""Replication I/O: a leader's `read_raw`, a follower's `append_raw`, and the
node-local replica directories.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from log import LogConfig, LogError, LogFailedError, PartitionLog, compact, materialize, replica_dir
from log.batch import RawBatch, encode_batch, scan_buffer
from log.codec import encode_payload
from log.segment import list_dir

from tests.log.helpers import NOW_MS, commit, model
from tests.log.replica_support import SMALL, batch_records, log_bytes, segment_bytes, write_epochs

EPOCHS = [1] * 5 + [2] * 5 + [5] * 5


@contextmanager
def leader_and_follower(tmp_path: Path, config: LogConfig) -> Iterator[tuple[PartitionLog, PartitionLog]]:
    """A leader log in `a` (epoch 1) and a follower log in `b` (fencing epoch 0)."""
    with PartitionLog.open(tmp_path / "a", 1, config) as leader:
        with PartitionLog.open(tmp_path / "b", 0, config) as follower:
            yield leader, follower


def replicate(leader: PartitionLog, follower: PartitionLog, max_bytes: int) -> int:
    """Fetch and append until the follower has the leader's durable log; returns fetches."""
    fetches = 0
    while follower.log_end_offset < leader.high_watermark:
        follower.append_raw(leader.read_raw(follower.log_end_offset, max_bytes))
        follower.sync()
        fetches += 1
    return fetches


def bases(data: bytes) -> list[int]:
    return [b.base_offset for b in scan_buffer(data, 0, 0, 0, "").batches]


def test_a_follower_gets_byte_identical_segments_and_the_same_state(tmp_path: Path) -> None:
    with leader_and_follower(tmp_path, SMALL) as (leader, follower):
        records = write_epochs(leader, EPOCHS)
        assert replicate(leader, follower, max_bytes=250) > 3
        assert segment_bytes(tmp_path / "b") == segment_bytes(tmp_path / "a")
        assert len(segment_bytes(tmp_path / "b")) > 3, "the follower rolled like the leader"
        assert follower.epoch_entries() == leader.epoch_entries() == [(1, 0), (2, 10), (5, 20)]
        assert follower.high_watermark == 30
        assert materialize(follower) == materialize(leader) == model(records)
        assert follower.leader_epoch == 0, "a follower's fencing epoch is not its data's"
    with PartitionLog.open(tmp_path / "b", 0, SMALL) as follower:
        assert follower.epoch_entries() == [(1, 0), (2, 10), (5, 20)]


def test_read_raw_starts_at_the_batch_holding_the_offset_and_bounds_its_size(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        write_epochs(log, EPOCHS)
        whole = log.read_raw(0, 10**9)
        assert whole == log_bytes(tmp_path)
        assert bases(log.read_raw(4, 10**9))[0] == 4
        assert bases(log.read_raw(5, 10**9))[0] == 4, "inside a batch: from that batch (Kafka)"
        assert bases(log.read_raw(0, 1)) == [0], "at least one batch"
        one = len(log.read_raw(0, 1))
        assert bases(log.read_raw(0, 3 * one)) == [0, 2, 4]
        assert bases(log.read_raw(0, 3 * one - 1)) == [0, 2]


def test_read_raw_stops_at_the_durable_end_and_refuses_offsets_past_the_log_end(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        write_epochs(log, [1, 1])
        log.append(batch_records(2), 1, NOW_MS)
        assert (log.high_watermark, log.log_end_offset) == (4, 6)
        assert bases(log.read_raw(0, 10**9)) == [0, 2]
        assert log.read_raw(4, 10**9) == b"", "written but not durable: nothing yet"
        assert log.read_raw(6, 10**9) == b""
        for offset in (7, -1):
            with pytest.raises(LogError, match="out of range"):
                log.read_raw(offset, 100)


def test_append_raw_refuses_gaps_overlaps_damage_and_lower_epochs(tmp_path: Path) -> None:
    with leader_and_follower(tmp_path, SMALL) as (leader, follower):
        write_epochs(leader, EPOCHS)
        first, second = leader.read_raw(0, 1), leader.read_raw(2, 1)
        with pytest.raises(LogError, match="a gap"):
            follower.append_raw(second)
        follower.append_raw(first)
        with pytest.raises(LogError, match="an overlap"):
            follower.append_raw(first)
        damaged = bytearray(second)
        damaged[-1] ^= 1
        with pytest.raises(LogError, match="CRC"):
            follower.append_raw(bytes(damaged))
        with pytest.raises(LogError, match="no whole batches"):
            follower.append_raw(second[:-1])
        with pytest.raises(LogError, match="no whole batches"):
            follower.append_raw(b"")
        assert follower.log_end_offset == 2 and not follower.failed, "a refused append writes nothing"
        follower.append_raw(leader.read_raw(2, 10**9))
    with PartitionLog.open(tmp_path / "c", 0, SMALL) as newer:
        newer.append_raw(encoded(0, epoch=7))
        with pytest.raises(LogError, match="leader epoch 3, below 7"):
            newer.append_raw(encoded(1, epoch=3))
        with PartitionLog.open(tmp_path / "d", 0, SMALL) as empty:
            with pytest.raises(LogError, match="leader epoch -1, below 0"):
                empty.append_raw(encoded(0, epoch=-1))
        assert newer.epoch_entries() == [(7, 0)]


def encoded(base: int, epoch: int) -> bytes:
    return encode_batch(base, 1, 0, epoch, NOW_MS, encode_payload([commit("g", "t", 0, base)]))

def test_append_raw_takes_a_raw_batch_and_sync_makes_it_durable(tmp_path: Path) -> None:
    with leader_and_follower(tmp_path, SMALL) as (leader, follower):
        write_epochs(leader, [1, 2])
        raw: list[RawBatch] = [b for _, b in leader.raw_batches()]
        assert follower.append_raw(raw[0]) == (0, 2)
        assert follower.append_raw(raw[1]) == (2, 4)
        assert (follower.log_end_offset, follower.high_watermark) == (4, 0)
        assert follower.read_raw(0, 100) == b"", "a follower's reads stop at its durable end too"
        assert follower.sync() == 4
        assert follower.read_raw(0, 10**9) == leader.read_raw(0, 10**9)
        assert follower.epoch_entries() == [(1, 0), (2, 2)]


def test_a_compaction_gap_is_appended_only_when_allowed(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=1)
    with leader_and_follower(tmp_path, config) as (leader, follower):
        history = [(1, commit("g", "t", 0, 0)), (2, commit("g", "t", 1, 0)), (2, commit("g", "t", 2, 0))]
        history += [(3, commit("g", "t", 0, 1)), (3, commit("g", "t", 1, 1)), (3, commit("h", "t", 0, 0))]
        for epoch, record in history:
            leader.append([record], epoch, NOW_MS)
        leader.sync()
        compact(leader, NOW_MS)
        data = leader.read_raw(0, 10**9)
        assert bases(data) == [2, 3, 4, 5], "offsets 0 and 1 were compacted away"
        with pytest.raises(LogError, match="a gap"):
            follower.append_raw(data)
        assert follower.append_raw(data, allow_gap=True) == (2, 6)
        follower.sync()
        assert materialize(follower) == materialize(leader) == model(r for _, r in history)
        # The gap's epoch start is taken early (safe for truncation), never late.
        assert follower.epoch_entries() == [(2, 0), (3, 3)]
        assert leader.epoch_entries() == [(1, 0), (2, 1), (3, 3)]


def test_reads_continue_correctly_after_their_segment_was_compacted(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path / "probe", 1) as probe:
        write_epochs(probe, [1] * 12)
    config = LogConfig(offsets_segment_bytes=len(log_bytes(tmp_path / "probe")))
    with PartitionLog.open(tmp_path / "p", 1, config) as log:
        write_epochs(log, [1] * 12)
        assert bases(log.read_raw(0, 1)) == [0]  # leaves a hint: offset 2 at the second batch's position
        for _ in range(12):  # the active segment: compaction keeps the newest batch of each group
            log.append([commit("g0", "t", p, 99) for p in range(2)], 1, NOW_MS)
        log.sync()
        assert list_dir(log.directory).segments[1].base_offset == 24, "the first segment is sealed"
        compact(log, NOW_MS)
        # Batches 18, 20 and 22 survive at the first positions of the file: the
        # hint for offset 2 (second position) now points at batch 20.
        assert bases(log.read_raw(0, 10**9))[:4] == [18, 20, 22, 24]
        assert bases(log.read_raw(2, 10**9))[:4] == [18, 20, 22, 24]

def test_a_follower_fetching_beside_appends_and_rolls_gets_every_batch(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=300, fsync=False)
    rounds = 150
    with leader_and_follower(tmp_path, config) as (leader, follower):
        failures: list[BaseException] = []
        done = threading.Event()

        def fetch() -> None:
            try:
                while not (done.is_set() and follower.log_end_offset >= leader.high_watermark):
                    data = leader.read_raw(follower.log_end_offset, 200)
                    if data:
                        follower.append_raw(data)
                        follower.sync()
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)

        thread = threading.Thread(target=fetch)
        thread.start()
        records = []
        for i in range(rounds):
            records += batch_records(i)
            leader.append(batch_records(i), 1 + i // 50, NOW_MS)
            if i % 3 == 0:
                leader.sync()
        leader.sync()
        done.set()
        thread.join(timeout=60)
        assert not thread.is_alive() and not failures, failures
        assert segment_bytes(tmp_path / "b") == segment_bytes(tmp_path / "a")
        assert len(list_dir(str(tmp_path / "b")).segments) > 10
        assert follower.epoch_entries() == [(1, 0), (2, 100), (3, 200)]
        assert materialize(follower) == model(records)


def test_a_failed_log_refuses_replication_calls(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1, SMALL) as log:
        write_epochs(log, [1, 1])
        with pytest.raises(LogFailedError):
            log.truncate_to(2, on_step=fail_step)
        for call in (lambda: log.read_raw(0, 10), lambda: log.append_raw(b""), lambda: log.truncate_to(0)):
            with pytest.raises(LogFailedError):
                call()


def fail_step(name: str) -> None:
    raise OSError(f"disk gone before {name}")


def test_replica_dir_nests_one_directory_per_node(tmp_path: Path) -> None:
    assert replica_dir(tmp_path, "n1", 3) == str(tmp_path / "nodes" / "n1" / "offsets-3")
    assert replica_dir(tmp_path, 2, 0) == str(tmp_path / "nodes" / "2" / "offsets-0")
    for bad in ("", "..", "a/b"):
        with pytest.raises(ValueError):
            replica_dir(tmp_path, bad, 0)
    with PartitionLog.open(replica_dir(tmp_path, "n1", 0), 1) as one, PartitionLog.open(
        replica_dir(tmp_path, "n2", 0), 1
    ) as two:
        one.append([commit("g", "t", 0, 1)], 1, NOW_MS)
        assert (one.log_end_offset, two.log_end_offset) == (1, 0)
