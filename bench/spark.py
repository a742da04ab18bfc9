"""Benchmark of reading the offsets log into Spark: `python -m bench.spark [--records N]`.

Writes a log of N records (default 1,000,000: one group-metadata record
per group, the rest offset commits) over 8 partition directories for up to
10,000 groups, then measures in the same run, each read as a ratio to the
first figure:
- the baseline: the log layer's own load, one process, every partition in
  turn (`log.loader.materialize`): records/s;
- in this process, without Spark: the columnar decoder alone (Arrow record
  batches, `read_log_batches`), the row path (`read_log_rows`, the
  per-record Python work the executors did before the Arrow path) and the
  summarized read's tasks (decoding and `spark_bridge.summary`);
- Spark on RayDP with 1 and with 2 executors (1 core, 1 GB each): every
  row of the DataFrame through a no-op sink, best of 2, after a warm-up
  job: the Arrow path (`read_offsets_log`, mapInArrow), the old row path
  (`read_offsets_log_by_rows`, pickled rows) and the summarized read
  (`read_summarized_log`, what `raygroups report` reads, its records per
  second); with the most executors also
  the replica path both ways, through Ray actors serving the partition
  directories as a replica does (`log_files`, `read_log_file`): Arrow IPC
  blocks read by RayDP's JVM (`read_replicas_log`) and a Ray Dataset of
  Arrow blocks through `Dataset.to_spark` (pandas in Spark's Python
  workers), and the summarized read by day through them
  (`prefetch_summarized_replicas`, what `raygroups lag` reads of a running
  service, its records per second); plus each session's start time.
A local Ray is started for the run (4 logical CPUs: executors hold theirs
for their lifetime). Progress goes to stderr, the figures to stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.driver_log import log_file
from bench.table import Row, progress
from bench.table import print_table as print_table_rows
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from log.config import LogConfig
from log.loader import materialize
from log.partition import PartitionLog
from spark_bridge.reader import (
    SegmentTask,
    partition_dirs,
    plan_tasks,
    read_log_batches,
    read_log_rows,
    read_offsets_log,
    read_offsets_log_by_rows,
    read_prefetched_summary,
    read_summarized_log,
    summarized_task_batches,
)
from spark_bridge.replica_reader import prefetch_summarized_replicas, read_replicas_log, replica_dataset
from spark_bridge.spark_session import session
from spark_bridge.time_windows import DAY_MS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PARTITIONS = 8
PARTITIONS_PER_GROUP = 10
TOPICS = 50
# The window the report chooses for the 10 M-record log's span (about 20 minutes).
SUMMARY_WINDOW_MS = 10_000
BATCH_RECORDS = 1000
EPOCH = 1
NOW_MS = 1_700_000_000_000


def group_records(groups: int) -> list[list[Record]]:
    """Per partition: the metadata record of each group routed there."""
    member = MemberRecord("m-0", None, "bench", "/10.0.0.1", 60_000, 10_000, b"sub", b"assignment")
    out: list[list[Record]] = [[] for _ in range(PARTITIONS)]
    for g in range(groups):
        value = GroupMetadataValue("consumer", 1, "range", "m-0", NOW_MS, (member,))
        out[g % PARTITIONS].append(Record(GroupMetadataKey(f"group-{g:05d}"), value))
    return out


def write_log(data_dir: str, records: int, groups: int) -> None:
    """`records` records: group metadata, then rounds of commits of every group's partitions;
    written as generated, a batch at a time (a 10 M-record log never sits in memory)."""
    config = LogConfig(fsync=False)
    logs = [
        PartitionLog.open(os.path.join(data_dir, f"offsets-{partition}"), EPOCH, config)
        for partition in range(PARTITIONS)
    ]
    pending: list[list[Record]] = group_records(groups)
    written = [0] * PARTITIONS

    def flush(partition: int) -> None:
        batch = pending[partition]
        logs[partition].append(batch, EPOCH, NOW_MS + written[partition])
        written[partition] += len(batch)
        pending[partition] = []

    try:
        for i in range(records - groups):
            g = (i // PARTITIONS_PER_GROUP) % groups
            key = OffsetCommitKey(f"group-{g:05d}", f"topic-{g % TOPICS}", i % PARTITIONS_PER_GROUP)
            partition = g % PARTITIONS
            pending[partition].append(Record(key, OffsetCommitValue(i, EPOCH, "", NOW_MS + i // 1000)))
            if len(pending[partition]) >= BATCH_RECORDS:  # the first holds its groups' metadata too
                flush(partition)
        for partition in range(PARTITIONS):
            if pending[partition]:
                flush(partition)
    finally:
        for log in logs:
            log.close()


def best_of(runs: int, fn: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def read_row(figure: str, records: int, seconds: float, load_s: float, note: str) -> Row:
    return Row(figure, records / seconds, "rows/s", load_s / seconds, f"{seconds:.2f} s, {note}")


def local_rows(data_dir: str, records: int) -> list[Row]:
    """The baseline and the readers without Spark, in this process."""
    directories = [directory for _, directory in partition_dirs(data_dir)]
    load_s = best_of(2, lambda: [materialize(d, use_snapshot=False) for d in directories])
    progress(f"log layer load: {load_s:.2f} s")
    columnar_s = best_of(2, lambda: sum(batch.num_rows for batch in read_log_batches(data_dir)))
    progress(f"columnar decoder: {columnar_s:.2f} s")
    rows_s = best_of(2, lambda: sum(1 for _ in read_log_rows(data_dir)))
    progress(f"row path: {rows_s:.2f} s")
    tasks = [SegmentTask(directory, partition, 0, None) for partition, directory in partition_dirs(data_dir)]
    summary_s = best_of(2, lambda: [sum(b.num_rows for b in summarized_task_batches(task, SUMMARY_WINDOW_MS))
                                    for task in tasks])
    progress(f"summarized: {summary_s:.2f} s")
    return [
        Row(
            "log layer load (materialize), 1 process",
            records / load_s,
            "records/s",
            1.0,
            f"{load_s:.2f} s over {len(directories)} partitions: the baseline",
        ),
        read_row("columnar decoder (read_log_batches), 1 process", records, columnar_s, load_s,
                 "Arrow record batches, no Spark"),
        read_row("row path (read_log_rows), 1 process", records, rows_s, load_s,
                 "a tuple per record, no Spark"),
        read_row("summarized read tasks, 1 process", records, summary_s, load_s,
                 f"decoded and summarized by {SUMMARY_WINDOW_MS // 1000} s windows, no Spark"),
    ]


def noop_read_s(frame_of: Callable[[], DataFrame]) -> float:
    """Best of 2: build the DataFrame and write every row to a no-op sink."""
    return best_of(2, lambda: frame_of().write.format("noop").mode("overwrite").save())


def spark_rows(data_dir: str, records: int, executors: int, load_s: float, replicas: bool) -> list[Row]:
    """Start RayDP with `executors` executors, warm up, time full reads, stop."""
    start = time.perf_counter()
    with session(num_executors=executors, app_name=f"bench-spark-{executors}") as spark:
        start_s = time.perf_counter() - start
        progress(f"RayDP with {executors} executor(s) started in {start_s:.1f} s")
        # The first job starts the executors' Python workers: keep that out of the figure.
        spark.sparkContext.parallelize(range(4 * executors), 2 * executors).map(lambda x: x).count()
        counted = read_offsets_log(spark, data_dir).count()
        if counted != records:
            raise AssertionError(f"Spark read {counted} rows, the log holds {records}")
        segments = len(plan_tasks(data_dir))
        tasks = min(segments, spark.sparkContext.defaultParallelism)
        arrow_s = noop_read_s(lambda: read_offsets_log(spark, data_dir))
        progress(f"Arrow path, {executors} executor(s): {arrow_s:.2f} s")
        pickled_s = noop_read_s(lambda: read_offsets_log_by_rows(spark, data_dir))
        progress(f"row path, {executors} executor(s): {pickled_s:.2f} s")
        summary_s = noop_read_s(lambda: read_summarized_log(spark, data_dir, SUMMARY_WINDOW_MS).frame)
        progress(f"summarized read, {executors} executor(s): {summary_s:.2f} s")
        out = [
            read_row(f"Spark, Arrow path, {executors} executor(s)", records, arrow_s, load_s,
                     f"{segments} segments in {tasks} task(s), mapInArrow, no-op sink"),
            read_row(f"Spark, row path, {executors} executor(s)", records, pickled_s, load_s,
                     "pickled rows (read_offsets_log_by_rows)"),
            read_row(f"Spark, summarized read, {executors} executor(s)", records, summary_s, load_s,
                     "what raygroups report reads (read_summarized_log), records per second"),
        ]
        if replicas:
            out += replica_rows(spark, data_dir, records, executors, load_s)
    started = Row(f"RayDP start, {executors} executor(s)", start_s, "s", None, "init_spark until the session")
    return [*out, started]


def replica_rows(
    spark: SparkSession, data_dir: str, records: int, executors: int, load_s: float
) -> list[Row]:
    """The replica path both ways, through one file-serving actor per partition directory."""
    import ray

    serve = ray.remote(num_cpus=0)(LogFiles)
    servers = {partition: [serve.remote(directory)] for partition, directory in partition_dirs(data_dir)}
    if read_replicas_log(spark, servers).count() != records:
        raise AssertionError("the replica path lost rows")
    blocks_s = noop_read_s(lambda: read_replicas_log(spark, servers))
    progress(f"replica path, Arrow IPC blocks: {blocks_s:.2f} s")
    dataset_s = noop_read_s(lambda: replica_dataset(servers).to_spark(spark))  # type: ignore[union-attr]
    progress(f"replica path, Dataset.to_spark: {dataset_s:.2f} s")
    summary_s = noop_read_s(
        lambda: read_prefetched_summary(spark, prefetch_summarized_replicas(servers, DAY_MS)).frame
    )
    progress(f"replica path, summarized by day: {summary_s:.2f} s")
    return [
        read_row(f"Spark, replica path, {executors} executor(s)", records, blocks_s, load_s,
                 "Ray tasks -> Arrow IPC in the object store -> RayDP's JVM"),
        read_row(f"Spark, replica path via Dataset.to_spark, {executors} executor(s)", records, dataset_s,
                 load_s, "Arrow blocks -> pandas in Python workers -> Spark"),
        read_row(f"Spark, replica path summarized by day, {executors} executor(s)", records, summary_s,
                 load_s, "what raygroups lag reads of a running service, records per second"),
    ]


class LogFiles:
    """What a replica actor serves of its log (actors/partition/export.py), for one directory."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def log_files(self) -> list[tuple[str, int]]:
        return [(os.path.basename(s.path), os.path.getsize(s.path)) for s in _segments(self.directory)]

    def read_log_file(self, name: str, offset: int, length: int) -> bytes:
        with open(os.path.join(self.directory, os.path.basename(name)), "rb") as file:
            file.seek(offset)
            return file.read(length)


def run(records: int, groups: int, executor_counts: list[int]) -> list[Row]:
    import ray

    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-spark-")
    try:
        progress(f"writing {records:,} records")
        write_log(data_dir, records, groups)
        rows = local_rows(data_dir, records)
        load_s = records / rows[0].value
        size = sum(os.path.getsize(s.path) for _, d in partition_dirs(data_dir) for s in _segments(d))
        rows.append(Row("log size", size / 1e6, "MB", None, f"{size / records:.1f} B/record"))
        with log_file("bench-spark"):
            ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
            try:
                for executors in executor_counts:
                    replicas = executors == max(executor_counts)
                    rows.extend(spark_rows(data_dir, records, executors, load_s, replicas))
            finally:
                ray.shutdown()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return rows

def _segments(directory: str) -> list[Any]:
    from log.reader import LogReader

    return LogReader(directory).segments()


def print_table(rows: list[Row], records: int, groups: int) -> None:
    print_table_rows(
        f"offsets log -> Spark: {records:,} records, {groups:,} groups, {PARTITIONS} partition logs",
        rows,
        "x log load",
        3,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--executors", default="1,2", help="comma-separated executor counts")
    args = parser.parse_args()
    groups = max(1, min(args.groups, args.records // 2))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    rows = run(args.records, groups, [int(n) for n in args.executors.split(",")])
    print_table(rows, args.records, groups)


if __name__ == "__main__":
    main()
