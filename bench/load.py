"""Benchmark of the offsets log: `python -m bench.load [--records N]`.

Writes a log of N offset-commit records (default 1,000,000) for up to
10,000 groups (10 partitions each, committed over and over), then prints
durable append throughput, load throughput (into `coordinator.Shard` when
it can replay, and into the materialized-dict model), load time after
compaction and from a snapshot, and bytes on disk per record. Each figure
is also a ratio to `msgpack.unpackb` of the same payload bytes, timed in
the same run: "how many times the cost of just parsing the bytes".

Group commit is measured on the partition's real write path: an in-process
`actors.partition.actor.OffsetPartition` (a plain class until `ray.remote` wraps
it, so no Ray is started) takes OffsetCommits from concurrent producer
coroutines through `handle`, and its flush task appends and fsyncs
everything pending as one batch while the next gathers.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgpack

from actors.core.settings import ServiceSettings
from actors.partition.actor import OffsetPartition
from bench.table import Row
from bench.table import print_table as print_table_rows
from coordinator import Errors
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from coordinator.records import OffsetCommitKey, OffsetCommitValue, Record
from log import (
    LogConfig,
    MaterializedState,
    PartitionLog,
    compact,
    load_into,
    write_snapshot,
)
from log.scan import iter_log_batches
from log.snapshot import list_snapshots, read_snapshot

SHARD = "coordinator.Shard"
MODEL = "dict model"
PARTITIONS_PER_GROUP = 10
TOPICS = 50
EPOCH = 1
NOW_MS = 1_700_000_000_000
# Distinct commits each producer cycles through: built before the clock starts,
# since building a request is the client's work, not the partition's.
REQUESTS_PER_PRODUCER = 4


def make_batches(records: int, groups: int, batch_records: int) -> list[list[Record]]:
    """Commits in rounds: every group commits its partitions, again and again."""
    keys = [
        OffsetCommitKey(f"group-{g:05d}", f"topic-{g % TOPICS}", p)
        for g in range(groups)
        for p in range(PARTITIONS_PER_GROUP)
    ]
    out: list[Record] = []
    for i in range(records):
        key = keys[i % len(keys)]
        out.append(Record(key, OffsetCommitValue(i, EPOCH, "", NOW_MS + i // 1000)))
    return [out[i : i + batch_records] for i in range(0, records, batch_records)]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def unpack_seconds(payloads: Iterable[bytes], repeat: int = 3) -> float:
    payloads = list(payloads)
    unpackb = msgpack.unpackb
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            for payload in payloads:
                unpackb(payload)
            best = min(best, time.perf_counter() - start)
    finally:
        gc.enable()
    return best


def log_payloads(directory: str) -> list[bytes]:
    return [bytes(batch.payload) for _, batch in iter_log_batches(directory, 5 * 1024 * 1024)]


def log_bytes(directory: str, suffix: str = ".log") -> int:
    names = [n for n in os.listdir(directory) if n.endswith(suffix)]
    return sum(os.path.getsize(os.path.join(directory, n)) for n in names)


class CountingSync:
    """Wraps a log's `sync`, counting the fsyncs the partition asks for."""

    def __init__(self, sync: Callable[[], int]) -> None:
        self.sync = sync
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.sync()


@dataclass
class GroupCommitRun:
    seconds: float
    requests: int
    records: int
    syncs: int

    @property
    def fsyncs_per_request(self) -> float:
        return self.syncs / self.requests


def commit_requests(producer: int, partitions: int) -> list[OffsetCommitRequest]:
    """One consumer's commits of all its `partitions` (spread over the topics)."""
    return [
        OffsetCommitRequest(
            f"producer-{producer}",
            tuple(OffsetCommitPartition(f"topic-{p % TOPICS}", p // TOPICS, n) for p in range(partitions)),
        )
        for n in range(REQUESTS_PER_PRODUCER)
    ]


async def commit_through_partition(
    data_dir: str, config: LogConfig, requests: int, partitions: int, producers: int
) -> GroupCommitRun:
    """`producers` coroutines send `requests` OffsetCommits in all to one
    in-process partition; each returns once its records are durable."""
    settings = ServiceSettings(data_dir=data_dir, num_partitions=1, log=config, maintenance_interval_s=3600.0)
    partition = OffsetPartition(0, EPOCH, settings)
    await partition.activate()
    if await partition.wait_active() != "ACTIVE" or partition.log is None:
        raise RuntimeError(f"the partition did not load: {partition.runtime.failure}")
    sync = CountingSync(partition.log.sync)
    partition.log.sync = sync  # type: ignore[method-assign]
    queue = iter(range(requests))
    prepared = [commit_requests(k, partitions) for k in range(producers)]
    responses: list[Any] = []

    async def producer(mine: list[OffsetCommitRequest]) -> None:
        for i in queue:
            responses.append(await partition.handle(mine[i % len(mine)]))

    start = time.perf_counter()
    await asyncio.gather(*map(producer, prepared))
    seconds = time.perf_counter() - start
    durable, syncs, failures = partition.runtime.durable_end, sync.calls, partition.runtime.failures
    await partition.unload(EPOCH)
    refused = sum(any(e is not Errors.NONE for e in r.errors().values()) for r in responses)
    if refused or failures:
        raise RuntimeError(f"{refused} commits refused, {failures} partition failures")
    return GroupCommitRun(seconds, requests, durable, syncs)


def run_group_commit(
    data_dir: str, config: LogConfig, requests: int, partitions: int, producers: int
) -> GroupCommitRun:
    """`commit_through_partition`, undoing what the partition does to its
    process (its GC settings) so the later figures see the process as before."""
    threshold = gc.get_threshold()
    try:
        return asyncio.run(commit_through_partition(data_dir, config, requests, partitions, producers))
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def append_sequential(log: PartitionLog, batches: list[list[Record]]) -> None:
    for batch in batches:
        log.append(batch, EPOCH, NOW_MS)
        log.sync()


@dataclass
class Timing:
    """Best of several runs; the baseline is timed between the runs, so load
    and baseline see the same machine (this one is shared and noisy)."""

    wall_s: float
    cpu_s: float
    open_s: float
    baseline_s: float

    @property
    def ratio(self) -> float:
        return self.wall_s / self.baseline_s


def load_timing(
    directory: str,
    config: LogConfig,
    target_factory: Callable[[], Any],
    snapshot: bool,
    payloads: list[bytes],
    runs: int = 5,
) -> Timing:
    """Open (with recovery) + load into a fresh target, against unpackb of `payloads`."""
    best = Timing(float("inf"), float("inf"), float("inf"), float("inf"))
    for _ in range(runs):
        best.baseline_s = min(best.baseline_s, unpack_seconds(payloads, repeat=1))
        target = target_factory()
        start, cpu_start = time.perf_counter(), time.process_time()
        with PartitionLog.open(directory, EPOCH, config) as log:
            opened = time.perf_counter()
            load_into(target, log, use_snapshot=snapshot)
            end, cpu_end = time.perf_counter(), time.process_time()
        best.wall_s, best.cpu_s = min(best.wall_s, end - start), min(best.cpu_s, cpu_end - cpu_start)
        best.open_s = min(best.open_s, opened - start)
        del target
    return best


def shard_factory() -> tuple[Callable[[], Any] | None, str]:
    try:
        from coordinator.shard import Shard

        Shard().replay_many([])
    except Exception as exc:  # the core is being written in parallel: report, don't fail
        return None, f"coordinator.Shard unavailable ({type(exc).__name__}: {exc})"
    return Shard, "Shard.replay_many"


def run(records: int, batch_records: int, producers: int, segment_bytes: int) -> list[Row]:
    groups = min(10_000, max(1, records // PARTITIONS_PER_GROUP))
    batches = make_batches(records, groups, batch_records)
    config = LogConfig(offsets_segment_bytes=segment_bytes)
    root = tempfile.mkdtemp(prefix="raygroups-bench-")
    try:
        directory = os.path.join(root, "offsets-1")
        rows = append_rows(root, directory, config, batches, producers)
        rows.extend(load_rows(directory, config, records))
        payload_bytes = sum(map(len, log_payloads(directory)))
        rows.append(
            Row(
                "bytes on disk per record",
                log_bytes(directory) / records,
                "B",
                log_bytes(directory) / payload_bytes,
                "ratio: disk / payload bytes",
            )
        )
        rows.extend(compaction_rows(directory, config, groups))
        rows.append(recovery_row(os.path.join(root, "offsets-2"), batches))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def append_rows(
    root: str, directory: str, config: LogConfig, batches: list[list[Record]], producers: int
) -> list[Row]:
    """Durable appends: group commit through a partition, fsync per batch over a
    tenth of the batches; then the whole log the load figures read."""
    records = sum(map(len, batches))
    sample = batches[: max(1, len(batches) // 10)]
    with PartitionLog.open(os.path.join(root, "offsets-0"), EPOCH, config) as log:
        seq_s, _ = timed(lambda: append_sequential(log, sample))
    partitions = len(batches[0])
    commits = run_group_commit(os.path.join(root, "partition"), config, len(batches), partitions, producers)
    with PartitionLog.open(directory, EPOCH, config) as log:
        for batch in batches:
            log.append(batch, EPOCH, NOW_MS)
        log.sync()
    unpack_s = unpack_seconds(log_payloads(directory))
    sample_records = sum(map(len, sample))
    note = (
        f"OffsetPartition.handle, {producers} producers, {partitions}-partition OffsetCommits; "
        f"{commits.syncs:,} fsyncs for {commits.requests:,} requests ({commits.fsyncs_per_request:.2f} each)"
    )
    return [
        Row(
            "durable append, group commit",
            commits.records / commits.seconds,
            "records/s",
            commits.seconds / unpack_s * records / commits.records,
            note,
        ),
        Row(
            "durable append, fsync per batch",
            sample_records / seq_s,
            "records/s",
            seq_s / unpack_s * records / sample_records,
            f"{len(sample)} batches, one producer",
        ),
        Row(
            "raw msgpack.unpackb of the log payloads",
            records / unpack_s,
            "records/s",
            1.0,
            f"{unpack_s * 1000:.0f} ms: the baseline",
        ),
    ]


def load_rows(directory: str, config: LogConfig, records: int) -> list[Row]:
    rows = []
    payloads = log_payloads(directory)
    factory, shard_note = shard_factory()
    for name, target, note in ((SHARD, factory, shard_note), (MODEL, MaterializedState, "dict.update")):
        if target is None:
            rows.append(Row(f"load full log -> {name}", float("nan"), "records/s", None, note))
            continue
        timing = load_timing(directory, config, target, False, payloads)
        note += f"; {timing.wall_s:.3f} s ({timing.cpu_s:.3f} s CPU) incl. {timing.open_s * 1000:.0f} ms open"
        rows.append(Row(f"load full log -> {name}", records / timing.wall_s, "records/s", timing.ratio, note))
    return rows


def compaction_rows(directory: str, config: LogConfig, groups: int) -> list[Row]:
    factory, _ = shard_factory()
    target, name = (factory, SHARD) if factory else (MaterializedState, MODEL)
    with PartitionLog.open(directory, EPOCH, config) as log:
        compact_s, stats = timed(lambda: compact(log, NOW_MS))
    timing = load_timing(directory, config, target, False, log_payloads(directory))
    note = f"{stats.records_out:,} of {stats.records_in:,} records kept; compaction took {compact_s:.2f} s"
    rows = [Row(f"load after compaction -> {name}", timing.wall_s, "s", timing.ratio, note)]
    with PartitionLog.open(directory, EPOCH, config) as log:
        snap_s, snapshot = timed(lambda: write_snapshot(log, NOW_MS))
    path = list_snapshots(directory)[-1][1]
    payloads = [bytes(b.payload) for b in _snapshot_batches(path)]
    timing = load_timing(directory, config, target, True, payloads)
    note = f"{len(snapshot.records):,} live records, {groups:,} groups; written in {snap_s:.2f} s"
    rows.append(Row(f"load from snapshot -> {name}", timing.wall_s, "s", timing.ratio, note))
    size = os.path.getsize(path)
    rows.append(
        Row(
            "snapshot bytes per live record",
            size / len(snapshot.records),
            "B",
            size / sum(map(len, payloads)),
            "ratio: file / payload bytes",
        )
    )
    return rows


def recovery_row(directory: str, batches: list[list[Record]]) -> Row:
    """Open (recovery scans the last segment) when the whole log is one Kafka-sized segment."""
    config = LogConfig(fsync=False)
    with PartitionLog.open(directory, EPOCH, config) as log:
        for batch in batches:
            log.append(batch, EPOCH, NOW_MS)
    size = log_bytes(directory)
    best = min(timed(lambda: PartitionLog.open(directory, EPOCH, config).close())[0] for _ in range(3))
    unpack_s = unpack_seconds(log_payloads(directory))
    note = f"one {size / 1e6:.0f} MB active segment (default {config.offsets_segment_bytes >> 20} MiB roll)"
    return Row("open: recovery scan of the last segment", best, "s", best / unpack_s, note)


def _snapshot_batches(path: str) -> list[Any]:
    from log.batch import scan_buffer
    from log.snapshot import SNAPSHOT_HEADER_SIZE

    read_snapshot(path)
    with open(path, "rb") as file:
        data = file.read()
    return scan_buffer(data, SNAPSHOT_HEADER_SIZE, 0, 0, path).batches


def print_table(rows: list[Row], records: int, segment_bytes: int) -> None:
    print_table_rows(
        f"offsets log: {records:,} offset-commit records, {segment_bytes:,}-byte segments",
        rows,
        "x unpackb",
        2,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--batch-records",
        type=int,
        default=1000,
        help="records per appended batch, and partitions per OffsetCommit in the group-commit figure",
    )
    parser.add_argument("--producers", type=int, default=8, help="concurrent committers, group-commit figure")
    parser.add_argument(
        "--segment-bytes",
        type=int,
        default=None,
        help="segment size (default: about an eighth of the log, so compaction has work)",
    )
    args = parser.parse_args()
    # Before the partition's own basicConfig (INFO), which would print its load and the compaction.
    logging.basicConfig(level=logging.WARNING)
    segment_bytes = args.segment_bytes or max(64 * 1024, args.records * 3)
    rows = run(args.records, args.batch_records, args.producers, segment_bytes)
    print_table(rows, args.records, segment_bytes)


if __name__ == "__main__":
    main()
