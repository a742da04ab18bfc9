"""Reading the offsets log into Spark: one task per segment, Arrow batches by `log.columnar`.

Owns turning `<data_dir>/offsets-<p>/` directories into a DataFrame (and,
for small logs and tests, into rows on the driver). Rules:
- Read-only, through `log.reader.LogReader`: nothing is written, truncated,
  renamed or locked, so a live log and a crashed writer's log are both safe
  to read. Only complete, CRC-valid batches are read: a live log is read up
  to its last complete batch when the task runs, and a torn tail is the end.
- The driver only lists segments; the executors read them. A read task covers
  one segment's offset range `[base, next segment's base)` of one partition,
  the last segment's range being open; each Spark task runs every n-th read
  task, n the executors' cores (a Spark task has a fixed cost). Ranges are offsets, not files: a
  compaction or a segment roll between planning and reading changes which
  file holds a range, never which records it holds, so no record is lost
  or read twice.
- A task's rows are `log.columnar`'s Arrow record batches, handed to the
  JVM by `mapInArrow`: no Python object per row, nothing pickled. They are
  exactly the rows `record_to_row` gives (`read_task_rows`, the reference,
  and the driver-side reader for small logs and tests).
- A summarized read (`read_summarized_log`, `spark_bridge.summary`) runs one
  task per partition instead, reading all of its segments in order: its
  summary needs every record of a group, and a group lives in one partition
  (once its admitted copies are set apart: `ownership.split_admitted`, the
  same rule the jobs apply to a plain read). Bad input fails it as it fails the
  plain read (the same decoder).
- A prefetched summarized read (`prefetch_summarized_log`, what the CLI
  does on RayDP) runs the same summary in one Ray task on this node, started
  before Spark is: it decodes while RayDP starts (8 s of a 10 M-record read
  at start-up's cost), then RayDP's JVM reads its Arrow IPC streams from the
  object store (`read_prefetched_summary`). Its errors are the read's own
  (`CorruptLogError` with the file and offset), raised on the driver.
- The executors' Python workers import this module by name, so raygroups
  must be installed on every node (cluster.yaml does it); they load only
  its dependencies (`log`, `spark_bridge.rows`, pyarrow), never Ray or RayDP.
  The data directory must be readable at the same path on every node: for
  a copied directory (offline analysis). A running service's log, on its
  replicas' node-local disks, is read with `replica_reader` instead.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from log.columnar import RowModel, arrow_batches
from log.reader import LogReader
from spark_bridge.ownership import split_admitted
from spark_bridge.rows import COLUMNS, LogRow, arrow_schema, ipc_stream, record_to_row, row_model
from spark_bridge.summary import SUMMARIZED_COLUMNS, check_window, summarize

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from spark_bridge.jobs import SummarizedLog

_PARTITION_DIR = re.compile(r"^offsets-(\d+)$")
T = TypeVar("T")


class SegmentTask(NamedTuple):
    """One Spark task: the records of `partition` with offsets in [start_offset, stop_offset)."""

    directory: str
    partition: int
    start_offset: int
    # None: up to the end of the log when the task runs.
    stop_offset: int | None


def partition_dirs(data_dir: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """(partition, directory) of every `offsets-<p>` directory, by partition."""
    found = []
    for name in os.listdir(data_dir):
        match = _PARTITION_DIR.match(name)
        path = os.path.join(str(data_dir), name)
        if match and os.path.isdir(path):
            found.append((int(match[1]), path))
    return sorted(found)


def plan_tasks(data_dir: str | os.PathLike[str]) -> list[SegmentTask]:
    """One task per segment of every partition log under `data_dir`."""
    tasks: list[SegmentTask] = []
    for partition, directory in partition_dirs(data_dir):
        bases = [segment.base_offset for segment in LogReader(directory).segments()]
        stops: list[int | None] = [*bases[1:], None]
        tasks.extend(SegmentTask(directory, partition, base, stop) for base, stop in zip(bases, stops))
    return tasks


def read_task_rows(task: SegmentTask) -> Iterator[LogRow]:
    """The rows of one task's offset range; runs in a Spark executor's Python worker."""
    start, stop = task.start_offset, task.stop_offset
    for batch in LogReader(task.directory).batches(start, stop):
        timestamp_ms = batch.timestamp_ms
        for offset, record in zip(batch.offsets, batch.records):
            if offset >= start and (stop is None or offset < stop):
                yield record_to_row(task.partition, offset, timestamp_ms, record)


def read_log_rows(data_dir: str | os.PathLike[str]) -> Iterator[LogRow]:
    """Every row of the log, read in this process (small logs, tests)."""
    for task in plan_tasks(data_dir):
        yield from read_task_rows(task)


def read_task_batches(task: SegmentTask, model: RowModel | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one task's offset range as Arrow record batches (`log.columnar`)."""
    raw = LogReader(task.directory).raw_batches(task.start_offset, task.stop_offset)
    model = model or row_model()
    return arrow_batches(task.partition, raw, model, task.start_offset, task.stop_offset)


def read_log_batches(data_dir: str | os.PathLike[str]) -> Iterator[pa.RecordBatch]:
    """Every row of the log as Arrow record batches, read in this process."""
    model = row_model()
    for task in plan_tasks(data_dir):
        yield from read_task_batches(task, model)


def log_schema(columns: tuple[tuple[str, str], ...] = COLUMNS) -> StructType:
    """The Spark schema of `columns` (the log's rows)."""
    from pyspark.sql import types

    spark_types = {
        "int": types.IntegerType(), "long": types.LongType(), "string": types.StringType(),
        "boolean": types.BooleanType(), "binary": types.BinaryType(),
    }
    return types.StructType([types.StructField(name, spark_types[kind], True) for name, kind in columns])


def read_offsets_log(spark: SparkSession, data_dir: str | os.PathLike[str]) -> DataFrame:
    """A DataFrame of every record of the offsets log under `data_dir`, read by the executors.

    Each task's rows go to the JVM as Arrow record batches (`mapInArrow`): no Python object
    per row on either side, and no pickling."""
    tasks = plan_tasks(os.path.abspath(data_dir))
    if not tasks:
        return spark.createDataFrame([], log_schema())
    # One Spark task per executor core, each reading every n-th segment: a Python task costs
    # Spark ~0.1 s whatever it reads (measured), a segment's decoding about half that.
    slices = max(1, min(len(tasks), spark.sparkContext.defaultParallelism))
    # spark.range of n ids in n slices: one id, so one Spark task, per slice.
    ids = spark.range(slices, numPartitions=slices)
    return ids.mapInArrow(partial(_read_tasks_arrow, tasks, slices), log_schema())


def _read_tasks_arrow(
    tasks: list[SegmentTask], slices: int, ids: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Runs in an executor's Python worker: the record batches of the slices named by `ids`."""
    model = row_model()
    for batch in ids:
        for index in batch.column(0).to_pylist():
            for task in tasks[index::slices]:
                yield from read_task_batches(task, model)


class LogExtent(NamedTuple):
    """How many records a log holds and the first and last batch time (None: no records)."""

    records: int
    span: tuple[int, int] | None


def log_extent(data_dir: str | os.PathLike[str]) -> LogExtent:
    """The log's extent from its batch headers, on the driver (no record is decoded): what a
    summarized read's window size is chosen from (`time_windows.choose_window_ms`)."""
    records, times = 0, []
    for _, directory in partition_dirs(data_dir):
        for _, batch in LogReader(directory).raw_batches():
            records += batch.record_count
            times.append(batch.timestamp_ms)
    return LogExtent(records, (min(times), max(times)) if times else None)


def read_summarized_log(
    spark: SparkSession, data_dir: str | os.PathLike[str], window_ms: int
) -> SummarizedLog:
    """The log under `data_dir` summarized by `window_ms` windows (`spark_bridge.summary`):
    one task per offsets partition, each reading the partition's every segment in order."""
    from spark_bridge.jobs import SummarizedLog

    tasks = _summary_tasks(data_dir, window_ms)
    schema = log_schema(SUMMARIZED_COLUMNS)
    if not tasks:
        return SummarizedLog(spark.createDataFrame([], schema), window_ms)
    ids = spark.range(len(tasks), numPartitions=len(tasks))
    return SummarizedLog(ids.mapInArrow(partial(_summarize_tasks, tasks, window_ms), schema), window_ms)


def _summary_tasks(data_dir: str | os.PathLike[str], window_ms: int) -> list[SegmentTask]:
    """A summarized read's tasks: each partition whole."""
    check_window(window_ms)
    return [SegmentTask(directory, partition, 0, None) for partition, directory in partition_dirs(
        os.path.abspath(data_dir))]


def _summarize_tasks(
    tasks: list[SegmentTask], window_ms: int, ids: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Runs in an executor's Python worker: the summarized rows of the partitions named by `ids`."""
    for batch in ids:
        for index in batch.column(0).to_pylist():
            yield from summarized_task_batches(tasks[index], window_ms)


def summarized_task_batches(task: SegmentTask, window_ms: int) -> Iterator[pa.RecordBatch]:
    """The summarized rows of one task, a whole partition (`spark_bridge.summary`)."""
    return summarized_batches(read_task_batches(task), window_ms)


def summarized_batches(batches: Iterable[pa.RecordBatch], window_ms: int) -> Iterator[pa.RecordBatch]:
    """A whole partition's rows (`batches`, in offset order) summarized by `window_ms` windows."""
    import pyarrow as pa

    table, admitted = split_admitted(pa.Table.from_batches(list(batches), arrow_schema()))
    yield from summarize(table, window_ms, admitted).to_batches()


class PrefetchedSummary(NamedTuple):
    """A summarized read under way in Ray (`prefetch_summary`)."""

    window_ms: int
    # One Arrow IPC stream per partition, then the number of records read (which raises the
    # read's error).
    streams: list[Any]
    records: Any
    # When it started (time.monotonic()).
    started: float


def prefetch_summarized_log(data_dir: str | os.PathLike[str], window_ms: int) -> PrefetchedSummary:
    """Start the summarized read of `data_dir` in one Ray task on this node (where the
    directory is), to run while Spark starts; `read_prefetched_summary` then gives it to Spark."""
    return prefetch_summary(read_task_batches, _summary_tasks(data_dir, window_ms), window_ms)


def prefetch_summary(
    read: Callable[[T], Iterable[pa.RecordBatch]], tasks: list[T], window_ms: int
) -> PrefetchedSummary:
    """Start summarizing `tasks` (each a whole partition, whose rows `read` gives) in one Ray
    task on this node: the command's own work, as its driver's is."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    check_window(window_ms)
    started = time.monotonic()
    if not tasks:
        return PrefetchedSummary(window_ms, [], ray.put(0), started)
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    # No CPU reserved: it must not wait for a CPU the executors hold (or one a head node
    # without CPUs never has).
    summarize_all = ray.remote(summarized_streams).options(
        num_cpus=0, num_returns=len(tasks) + 1, scheduling_strategy=here, max_retries=0
    )
    *streams, records = summarize_all.remote(read, tasks, window_ms)
    return PrefetchedSummary(window_ms, streams, records, started)


def summarized_streams(
    read: Callable[[T], Iterable[pa.RecordBatch]], tasks: list[T], window_ms: int
) -> tuple[Any, ...]:
    """Runs in a Ray task: each task's summarized rows as an Arrow IPC stream, then the number
    of records read."""
    schema = arrow_schema(SUMMARIZED_COLUMNS)
    parts, records = summarized_parts(read, tasks, window_ms)
    return (*(ipc_stream(schema, batches) for batches in parts), records)


def summarized_parts(
    read: Callable[[T], Iterable[pa.RecordBatch]], tasks: list[T], window_ms: int
) -> tuple[list[list[pa.RecordBatch]], int]:
    """Each task's summarized rows (each task a whole partition, whose rows `read` gives), and
    the number of records read."""
    parts, records = [], 0
    for task in tasks:
        batches = list(read(task))  # the summary holds a whole partition anyway
        records += sum(batch.num_rows for batch in batches)
        parts.append(list(summarized_batches(batches, window_ms)))
    return parts, records


def read_prefetched_summary(spark: SparkSession, prefetched: PrefetchedSummary) -> SummarizedLog:
    """The prefetched summarized read as a `jobs.SummarizedLog`, once its Ray task is done: RayDP's
    JVM reads the streams from Ray's object store. Raises the read's own error (`CorruptLogError`)."""
    import ray
    from ray.exceptions import RayTaskError

    from spark_bridge.jobs import SummarizedLog
    from spark_bridge.spark_session import raydp_session

    try:
        ray.get(prefetched.records)
    except RayTaskError as exc:
        if isinstance(exc.cause, BaseException):  # the read's own error, not Ray's wrapping of it
            raise exc.cause from None
        raise
    started = raydp_session(spark)
    if started is None:
        raise RuntimeError("a prefetched read needs the RayDP session it was started for")
    frame = started.arrow_frame(arrow_schema(SUMMARIZED_COLUMNS), prefetched.streams)
    return SummarizedLog(frame, prefetched.window_ms)


def read_offsets_log_by_rows(spark: SparkSession, data_dir: str | os.PathLike[str]) -> DataFrame:
    """`read_offsets_log` the old way: rows pickled from the Python workers, unpickled by the
    JVM. The same DataFrame, several times slower: kept as the benchmark's reference."""
    tasks = plan_tasks(os.path.abspath(data_dir))
    # One slice per task: parallelize would otherwise pack several segments into one task.
    rdd = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(read_task_rows)
    # Rows are built by record_to_row against COLUMNS: checking each one again costs time for nothing.
    return spark.createDataFrame(rdd, log_schema(), verifySchema=False)


def rows_dataframe(spark: SparkSession, rows: Iterable[LogRow]) -> DataFrame:
    """A DataFrame of rows built on the driver (constructed histories, small logs)."""
    return spark.createDataFrame(list(rows), log_schema())
