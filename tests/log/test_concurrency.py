"""A live log: readers in other threads, compaction and snapshots beside appends.

A reader racing a compaction may read some segments before and some after
the swap; it must still see the state of a prefix of the log (as Kafka's
readers do, given they finish within `delete.retention.ms`).
"""

from __future__ import annotations

import threading
from pathlib import Path

from coordinator.records import Record
from log import LogConfig, LogReader, PartitionLog, compact, materialize, write_snapshot

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
