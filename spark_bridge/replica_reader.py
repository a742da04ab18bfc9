"""Reading the offsets log through the replica actors that hold it (no shared filesystem).

Owns turning `{partition: [replica handles]}` into rows, a Ray Dataset and
a Spark DataFrame with the same schema and rows as `reader.read_offsets_log`
gives for the same log. The handles come from the caller (the CLI asks the
controller's `log_sources`): spark_bridge never imports actors. Rules:
- The replicas are asked, never a path: `log_files()` lists the committed
  segment files of a replica's own log directory, `read_log_file(name,
  offset, length)` returns their bytes (actors/partition/export.py). Only the
  committed part is listed, so a live log is read up to its high watermark.
- Planning lists each partition once (on the driver) and makes one read
  task per segment: the records of `[base, next segment's base)`, the first
  task from offset 0 and the last open-ended. Ranges are offsets, not
  files: a compaction, a roll or another replica's segment layout changes
  which file holds a range, never which records it holds.
- A task lists the files again when it runs, reads them in chunks and
  decodes whole batches (CRC-checked, offsets increasing). Any failure
  (actor gone, file compacted away, short read, bad batch) makes it list
  again on the next replica of the list and go on from the first offset it
  has not yielded; after `ATTEMPTS_PER_REPLICA` failures per replica in a
  row without progress it raises `ReplicaReadError`.
- An incomplete batch at a file's listed end is the end of that file's
  committed data, as for `LogReader` (a torn tail).
- A task's rows are `log.columnar`'s Arrow record batches. The read tasks
  are Ray tasks calling the actors, each returning its rows as one Arrow
  IPC stream; RayDP's JVM reads those from the object store into Spark
  (`ray_dataset_to_spark_dataframe` on bytes blocks). `Dataset.to_spark`
  would go through pandas in Spark's Python workers (measured in
  bench/spark.py). Plain local Spark (the `--local` fallback) gets the
  rows through the driver instead.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from log.batch import RawBatch, scan_buffer
from log.columnar import arrow_batches
from log.errors import CorruptLogError, LogError
from log.reader import decode_batch
from log.segment import OFFSET_DIGITS
from spark_bridge.rows import LogRow, arrow_schema, ipc_stream, record_to_row, row_model

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from ray.data import Dataset

    from spark_bridge.jobs import SummarizedLog
    from spark_bridge.reader import PrefetchedSummary

# Below the actors' per-call limit (actors.partition.export.MAX_READ_BYTES, 8 MiB).
READ_CHUNK_BYTES = 4 * 1024 * 1024
ATTEMPTS_PER_REPLICA = 3
CALL_TIMEOUT_S = 60.0

LogSources = Mapping[int, Sequence[Any]]
# call(handle, method name, *args) -> the method's answer.
ReplicaCall = Callable[..., Any]


class ReplicaReadError(LogError):
    """No replica of a partition could give its log."""


class ReplicaTask(NamedTuple):
    """One read task: the records of `partition` with offsets in [start_offset, stop_offset)."""

    partition: int
    # Actor handles, the leader first.
    replicas: tuple[Any, ...]
    start_offset: int
    # None: up to the committed end when the task runs.
    stop_offset: int | None


def ray_call(handle: Any, method: str, *args: Any) -> Any:
    """Call an actor method through Ray and wait for its answer (bounded)."""
    import ray

    return ray.get(getattr(handle, method).remote(*args), timeout=CALL_TIMEOUT_S)


def base_offset_of(name: str) -> int:
    """The base offset a segment file's name starts with (`.log` and `.swap` alike)."""
    return int(name[:OFFSET_DIGITS])


class _Replicas:
    """The replicas of one partition: ask the current one until it fails, then the next."""

    def __init__(self, partition: int, replicas: Sequence[Any], call: ReplicaCall) -> None:
        if not replicas:
            raise ReplicaReadError(f"partition {partition}: no replica holds its log")
        self.partition, self.replicas, self.call = partition, tuple(replicas), call
        self.current = 0
        self.failures = 0

    def ask(self, method: str, *args: Any) -> Any:
        return self.call(self.replicas[self.current], method, *args)

    def progressed(self) -> None:
        self.failures = 0

    def failed(self, exc: Exception) -> None:
        self.failures += 1
        if self.failures >= ATTEMPTS_PER_REPLICA * len(self.replicas):
            raise ReplicaReadError(
                f"partition {self.partition}: {self.failures} reads failed on "
                f"{len(self.replicas)} replica(s), the last with {exc!r}"
            ) from exc
        self.current = (self.current + 1) % len(self.replicas)

    def list_files(self) -> list[tuple[str, int]]:
        """The first listing a replica gives, trying each in turn."""
        while True:
            try:
                return [(str(name), int(size)) for name, size in self.ask("log_files")]
            except Exception as exc:  # any replica failure: the next one is asked
                self.failed(exc)


# ------------------------------------------------------------- planning


def plan_replica_tasks(sources: LogSources, call: ReplicaCall = ray_call) -> list[ReplicaTask]:
    """One task per listed segment of every partition, by partition and offset."""
    tasks: list[ReplicaTask] = []
    for partition in sorted(sources):
        replicas = tuple(sources[partition])
        bases = [base_offset_of(name) for name, _ in _Replicas(partition, replicas, call).list_files()]
        if not bases:
            continue
        starts, stops = [0, *bases[1:]], [*bases[1:], None]
        tasks.extend(ReplicaTask(partition, replicas, start, stop) for start, stop in zip(starts, stops))
    return tasks


# -------------------------------------------------------------- reading


def replica_raw_batches(task: ReplicaTask, call: ReplicaCall = ray_call) -> Iterator[tuple[str, RawBatch]]:
    """(file name, batch) of every batch of one task's offset range, read from its replicas.

    A replica that fails is left for the next, which goes on from the first offset not yet
    yielded: what the caller has taken is never given twice."""
    replicas = _Replicas(task.partition, task.replicas, call)
    cursor, stop = task.start_offset, task.stop_offset
    while True:
        try:
            for name, raw in _raw_batches_from(replicas, cursor, stop):
                yield name, raw
                cursor = max(cursor, raw.next_offset)
                replicas.progressed()
            return
        except Exception as exc:  # any replica failure: list again, maybe elsewhere, from `cursor`
            replicas.failed(exc)


def read_replica_task(task: ReplicaTask, call: ReplicaCall = ray_call) -> Iterator[LogRow]:
    """The rows of one task's offset range, read from its replicas (the row path)."""
    start, stop = task.start_offset, task.stop_offset
    for name, raw in replica_raw_batches(task, call):
        batch = decode_batch(name, raw)
        for offset, record in zip(batch.offsets, batch.records):
            if offset >= start and (stop is None or offset < stop):
                yield record_to_row(task.partition, offset, batch.timestamp_ms, record)


def read_replica_task_batches(task: ReplicaTask, call: ReplicaCall = ray_call) -> Iterator[pa.RecordBatch]:
    """The rows of one task's offset range as Arrow record batches (`log.columnar`)."""
    raw = replica_raw_batches(task, call)
    return arrow_batches(task.partition, raw, row_model(), task.start_offset, task.stop_offset)


def read_replica_rows(sources: LogSources, call: ReplicaCall = ray_call) -> Iterator[LogRow]:
    """Every row of the log, read in this process (small logs, tests)."""
    for task in plan_replica_tasks(sources, call):
        yield from read_replica_task(task, call)


def _raw_batches_from(replicas: _Replicas, start: int, stop: int | None) -> Iterator[tuple[str, RawBatch]]:
    """The batches ending after `start` and beginning below `stop`, from one listing."""
    files = [(name, size) for name, size in replicas.ask("log_files")]
    bases = [base_offset_of(name) for name, _ in files]
    first = max(0, bisect_right(bases, start) - 1)
    for (name, size), base in zip(files[first:], bases[first:]):
        if stop is not None and base >= stop:
            return
        for raw in _file_batches(replicas, name, size, base):
            if stop is not None and raw.base_offset >= stop:
                return
            if raw.next_offset > start:
                yield name, raw


def _file_batches(replicas: _Replicas, name: str, size: int, base: int) -> Iterator[RawBatch]:
    """The valid batches of the listed file `name`, read up to its listed `size`."""
    buf, buf_position, read_position, needed, next_offset = b"", 0, 0, 0, base
    while True:
        want = min(max(READ_CHUNK_BYTES, needed), size - read_position)
        if want > 0:
            chunk = _read(replicas, name, read_position, want)
            read_position += want
            buf = buf + chunk if buf else chunk
        result = scan_buffer(buf, 0, buf_position, next_offset, name)
        yield from result.batches
        next_offset = result.next_offset
        if result.invalid_reason is not None:
            raise CorruptLogError(name, result.position, next_offset, result.invalid_reason)
        if read_position >= size:
            return  # an incomplete batch at the listed end: the end of what is committed
        buf = buf[result.position - buf_position :]
        buf_position, needed = result.position, result.needed


def _read(replicas: _Replicas, name: str, offset: int, length: int) -> bytes:
    """Exactly `length` bytes of `name` from `offset`, in calls of at most READ_CHUNK_BYTES."""
    parts = []
    end = offset + length
    while offset < end:
        part = replicas.ask("read_log_file", name, offset, min(READ_CHUNK_BYTES, end - offset))
        if not part:
            raise LogError(f"{name}: the file ends at byte {offset}, below its listed size (compacted?)")
        parts.append(part)
        offset += len(part)
    return b"".join(parts)


# --------------------------------------------------- Ray Dataset, Spark


def replica_dataset(sources: LogSources) -> Dataset | None:
    """A Ray Dataset of every row in Arrow blocks, one read task per planned segment (None: the
    log is empty). `Dataset.to_spark` converts such blocks through pandas (RayDP's
    `_convert_by_udf`): `read_replicas_log` hands Spark Arrow stream blocks instead."""
    import ray

    tasks = plan_replica_tasks(sources)
    if not tasks:
        return None
    items = ray.data.from_items(list(range(len(tasks))), override_num_blocks=len(tasks))
    return items.map_batches(partial(_read_tasks_table, tasks), batch_size=1, batch_format="pyarrow")


def _read_tasks_table(tasks: list[ReplicaTask], batch: pa.Table) -> pa.Table:
    import pyarrow as pa

    indices = batch.column("item").to_pylist()
    batches = [part for index in indices for part in read_replica_task_batches(tasks[index])]
    # One chunk per column: RayDP converts blocks through pandas, and pyspark 3.5 with pandas 3
    # fails on a column of several chunks (StructArray.from_arrays gets a ChunkedArray).
    return pa.Table.from_batches(batches, schema=arrow_schema()).combine_chunks()


def replica_stream_blocks(sources: LogSources) -> list[Any]:
    """Object refs of every row as Arrow IPC stream bytes, one Ray task per planned segment."""
    import ray

    read = ray.remote(read_task_stream)
    return [read.remote(task) for task in plan_replica_tasks(sources)]


def read_task_stream(task: ReplicaTask) -> bytes:
    """One task's rows as an Arrow IPC stream: what RayDP's JVM reads from the object store."""
    return ipc_stream(arrow_schema(), read_replica_task_batches(task))


def read_replicas_log(spark: SparkSession, sources: LogSources) -> DataFrame:
    """A DataFrame of every record of the log, read through the replicas in `sources`.

    On RayDP the read tasks' Arrow streams go from Ray's object store to the executors'
    JVMs (RayDP's `RayDatasetRDD`): no Python worker, no pandas, no conversion but Arrow's."""
    from spark_bridge.reader import log_schema
    from spark_bridge.spark_session import raydp_session

    started = raydp_session(spark)
    if started is None:
        # Only RayDP's Spark reads Ray's object store: any other Spark gets the rows through the driver.
        return spark.createDataFrame(list(read_replica_rows(sources)), log_schema())
    return started.arrow_frame(arrow_schema(), replica_stream_blocks(sources))


# ------------------------------------------------------ summarized reads


def summary_tasks(sources: LogSources) -> list[ReplicaTask]:
    """A summarized read's tasks: each partition whole, from offset 0 to its committed end."""
    return [ReplicaTask(partition, tuple(sources[partition]), 0, None) for partition in sorted(sources)]


def prefetch_summarized_replicas(sources: LogSources, window_ms: int) -> PrefetchedSummary:
    """Start the summarized read of the service's log (`reader.prefetch_summary`): one Ray task
    reading each partition whole through its replicas and summarizing it, while Spark starts;
    `reader.read_prefetched_summary` then gives it to Spark."""
    from spark_bridge.reader import prefetch_summary

    return prefetch_summary(read_replica_task_batches, summary_tasks(sources), window_ms)


def read_summarized_replicas_here(
    spark: SparkSession, sources: LogSources, window_ms: int
) -> tuple[SummarizedLog, int]:
    """The summarized read of the service's log made in this process, for a Spark that does not
    read Ray's object store (plain local Spark): the summarized log and the records read."""
    from spark_bridge.jobs import SummarizedLog
    from spark_bridge.reader import log_schema, summarized_parts
    from spark_bridge.summary import SUMMARIZED_COLUMNS, check_window

    check_window(window_ms)
    parts, records = summarized_parts(read_replica_task_batches, summary_tasks(sources), window_ms)
    rows = [tuple(row.values()) for batches in parts for batch in batches for row in batch.to_pylist()]
    return SummarizedLog(spark.createDataFrame(rows, log_schema(SUMMARIZED_COLUMNS)), window_ms), records
