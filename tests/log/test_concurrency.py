"""A live log: readers in other threads, compaction and snapshots beside appends.

A reader racing a compaction may read some segments before and some after
the swap; it must still see the state of a prefix of the log (as Kafka's
readers do, given they finish within `delete.retention.ms`).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from coordinator.records import Record
from log import LogConfig, LogError, LogReader, PartitionLog, compact, materialize, write_snapshot

from tests.log.helpers import EPOCH, NOW_MS, State, commit, group, model, offset_tombstone

ROUNDS = 120


def batch(i: int) -> list[Record]:
    records = [commit(f"g{i % 5}", "t", p, i) for p in range(3)] + [group(f"g{i % 5}", generation=i)]
    if i % 9 == 4:
        records.append(offset_tombstone(f"g{(i + 1) % 5}", "t", 1))
    return records


def test_readers_see_a_prefix_while_the_writer_appends_compacts_and_snapshots(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=600, fsync=False)
    prefix_states = [model(r for i in range(n) for r in batch(i)) for n in range(ROUNDS + 1)]
    log = PartitionLog.open(tmp_path, EPOCH, config)
    stop = threading.Event()
    failures: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            while not stop.is_set():
                state = materialize(tmp_path, use_snapshot=False)
                assert state in prefix_states
                assert LogReader(tmp_path).end_offset() >= 0
                reads[0] += 1
        except BaseException as exc:  # reported to the main thread below
            failures.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for i in range(ROUNDS):
            log.append(batch(i), EPOCH, NOW_MS + i)
            log.sync()
            if i % 10 == 9:
                compact(log, NOW_MS + i)
            if i % 25 == 24:
                write_snapshot(log, NOW_MS + i)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not failures, failures[0]
    assert reads[0] > 0
    assert materialize(log) == prefix_states[-1]
    log.close()


def test_compaction_in_a_thread_beside_appends_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    config = LogConfig(offsets_segment_bytes=500, fsync=False)
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        done = threading.Event()

        def compactor() -> None:
            while not done.is_set():
                compact(log, NOW_MS)

        thread = threading.Thread(target=compactor)
        thread.start()
        try:
            for i in range(ROUNDS):
                log.append(batch(i), EPOCH, NOW_MS + i)
                log.sync()
        finally:
            done.set()
            thread.join()
        assert materialize(log) == prefix_states_end()
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        assert materialize(log) == prefix_states_end()


def prefix_states_end() -> State:
    return model(r for i in range(ROUNDS) for r in batch(i))


def test_close_waits_for_an_append_in_progress_and_never_frees_its_descriptor(tmp_path: Path) -> None:
    """`close` from another thread must not free the descriptors a running
    append or sync uses (a freed number can be reused by another file mid-write)."""
    log = PartitionLog.open(tmp_path, EPOCH, LogConfig(fsync=False))
    log.append(batch(0), EPOCH, NOW_MS)
    log.sync()
    # A failed log (its owner reloads it) closes without syncing first: the path that raced.
    log._fail("an fsync failed")
    closer = threading.Thread(target=log.close)
    with log._state_lock:  # what `append` holds while it writes
        closer.start()
        closer.join(timeout=0.2)
        assert closer.is_alive(), "close went ahead under a running append"
        assert not log._closed
    closer.join()
    assert log._closed
    assert materialize(tmp_path, use_snapshot=False) == model(batch(0))


def test_open_without_create_refuses_a_missing_directory(tmp_path: Path) -> None:
    missing = tmp_path / "offsets-0"
    with pytest.raises(LogError, match="does not exist"):
        PartitionLog.open(missing, EPOCH, LogConfig(fsync=False), create=False)
    assert not missing.exists()
