"""Property: any history of appends, syncs, crashes, reopens, compactions and
snapshots loads to the materialized state of what was acknowledged.

A crash keeps every byte that was synced (the log's durability promise) and
loses an arbitrary suffix of the rest of the last segment, possibly leaving
garbage behind: the file is truncated at a random byte at or after the
synced end, then random bytes may be appended. Reopening must then give
exactly the batches that survived whole, and never lose an acknowledged one.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.records import Record
from log import LogConfig, LogReader, PartitionLog, compact, materialize, write_snapshot
from log.segment import segment_file_name

from tests.log.helpers import EPOCH, NOW_MS, State, log_batches, model

OPS = ["append", "append", "append", "append", "sync", "sync", "crash", "reopen", "compact", "snapshot"]


@dataclass
class Written:
    records: list[Record]
    segment_base: int
    end_position: int


@dataclass
class History:
    directory: str
    config: LogConfig
    written: list[Written] = field(default_factory=list)
    acked: int = 0
    clock_ms: int = NOW_MS

    def state(self, upto: int | None = None) -> State:
        return model(r for w in self.written[:upto] for r in w.records)

    def next_offset(self) -> int:
        return sum(len(w.records) for w in self.written)


def append(log: PartitionLog, history: History, records: list[Record], step_ms: int) -> None:
    history.clock_ms += step_ms
    base, end = log.append(records, EPOCH, history.clock_ms)
    assert (base, end) == (history.next_offset(), history.next_offset() + len(records))
    segment = log.active_segment_base
    size = os.path.getsize(os.path.join(history.directory, segment_file_name(segment)))
    history.written.append(Written(records, segment, size))


def crash(log: PartitionLog, history: History, data: st.DataObject) -> PartitionLog:
    last = log.active_segment_base
    log.close()
    path = os.path.join(history.directory, segment_file_name(last))
    acked = history.written[: history.acked]
    durable = max([w.end_position for w in acked if w.segment_base == last], default=0)
    cut = data.draw(st.integers(durable, os.path.getsize(path)), label="truncate at")
    garbage = data.draw(st.one_of(st.just(b""), st.binary(min_size=1, max_size=60)), label="garbage")
    os.truncate(path, cut)
    with open(path, "ab") as file:
        file.write(garbage)
    survivors = sum(1 for w in history.written if w.segment_base < last or w.end_position <= cut)
    assert survivors >= history.acked
    history.written = history.written[:survivors]
    history.acked = survivors
    reopened = PartitionLog.open(history.directory, EPOCH, history.config)
    assert reopened.log_end_offset == reopened.high_watermark == history.next_offset()
    return reopened


def check(log: PartitionLog, history: History) -> None:
    want = history.state(history.acked)
    assert materialize(log) == want
    assert materialize(log, use_snapshot=False) == want


@given(st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_history_loads_to_the_acknowledged_state(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = os.path.join(tmp, "offsets-0")
        config = LogConfig(
            offsets_segment_bytes=data.draw(st.sampled_from([150, 400, 1 << 20]), label="segment bytes"),
            offsets_delete_retention_ms=50,
            snapshot_batch_records=3,
            # Crashes are modelled by cutting files, not by losing the page
            # cache, so fsyncs would only slow the test down.
            fsync=False,
        )
        history = History(directory, config)
        log = PartitionLog.open(directory, EPOCH, config)
        for _ in range(data.draw(st.integers(1, 30), label="steps")):
            op = data.draw(st.sampled_from(OPS), label="op")
            if op == "append":
                append(log, history, data.draw(log_batches, label="batch"), data.draw(st.integers(0, 40)))
            elif op == "sync":
                assert log.sync() == history.next_offset()
                history.acked = len(history.written)
            elif op == "crash":
                log = crash(log, history, data)
            elif op == "reopen":
                log.close()
                history.acked = len(history.written)
                log = PartitionLog.open(directory, EPOCH, config)
            elif op == "compact":
                compact(log, history.clock_ms + data.draw(st.integers(0, 120), label="compact at +ms"))
            else:
                write_snapshot(log, history.clock_ms)
            check(log, history)
        assert materialize(directory) == history.state(), "a reader sees every complete batch"
        assert LogReader(directory).end_offset() == history.next_offset()
        log.close()
        with PartitionLog.open(directory, EPOCH, config) as reopened:
            assert materialize(reopened) == history.state()
