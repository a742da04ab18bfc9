"""Summarized reads (spark_bridge/summary.py) against reading every record, through Spark.

The contract: on a generated log of three partitions holding every record
kind (commits with every field variation, offset and group tombstones, group
metadata, the seven consumer group kinds), several segments per partition,
many commits per key and window, and batch times that step back in one
partition, every table of the report is the same from the summarized read
as from every record: committed offsets, lag (against the highest commits
and against supplied ends), lag over time, commit rate, rebalance history,
idle and expired groups, the data's span. A window the summary was not made
for, or end offsets lag over time cannot be measured against from it, are
refused rather than answered wrong.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow.parquet as pq
import pytest
import ray
from pyspark.sql import DataFrame

from coordinator.records import Record
from log.codec import encode_payload
from log.errors import CorruptLogError
from log.partition import PartitionLog
from spark_bridge import cli, jobs
from spark_bridge.reader import (
    partition_dirs,
    prefetch_summarized_log,
    read_offsets_log,
    read_prefetched_summary,
    read_summarized_log,
)
from spark_bridge.replica_reader import (
    ReplicaReadError,
    prefetch_summarized_replicas,
    read_summarized_replicas_here,
)
from spark_bridge.spark_session import BridgeSession
from spark_bridge.time_windows import choose_window_ms

from tests.spark.histories import EPOCH, T0
from tests.spark.test_cli_spark import parse
from tests.spark.test_columnar_rows import SMALL_SEGMENTS, commit, random_batch, write_segment
from tests.spark.test_replica_arrow import Files

pytestmark = pytest.mark.spark
WINDOW_MS = 10_000
PARTITIONS = 3
BATCHES = 120
NOW_MS = T0 + 3_600_000


def in_partition(record: Record, partition: int) -> Record:
    """`record` of a group of `partition` only: a group lives in one offsets partition."""
    return Record(record.key._replace(group_id=f"{record.key.group_id}@{partition}"), record.value)


def write_log(data_dir: Path) -> None:
    for partition in range(PARTITIONS):
        rng = random.Random(partition)
        log = PartitionLog.open(str(data_dir / f"offsets-{partition}"), EPOCH, SMALL_SEGMENTS)
        for i in range(BATCHES):
            # About 2.5 batches per window; partition 2's clock steps back now and then.
            at_ms = T0 + i * 4_000 - (9_000 if partition == 2 and i % 13 == 5 else 0)
            log.append([in_partition(r, partition) for r in random_batch(rng, i)], EPOCH, at_ms)
        log.close()


class Logs(NamedTuple):
    every: DataFrame  # every record
    summarized: jobs.SummarizedLog
    data_dir: Path


@pytest.fixture(scope="module")
def logs(bridge_session: BridgeSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logs]:
    data_dir = tmp_path_factory.mktemp("summary")
    write_log(data_dir)
    spark = bridge_session.spark
    every = read_offsets_log(spark, data_dir).cache()
    summary = read_summarized_log(spark, data_dir, WINDOW_MS)
    summarized = jobs.SummarizedLog(summary.frame.cache(), WINDOW_MS)
    yield Logs(every, summarized, data_dir)
    every.unpersist()
    summarized.frame.unpersist()


def rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


TABLES = {
    "committed_offsets": jobs.committed_offsets,
    "lag": jobs.consumer_lag,
    "lag_over_time": lambda log: jobs.lag_over_time(log, None, WINDOW_MS),
    "commit_rate": lambda log: jobs.commit_rate(log, WINDOW_MS),
    "rebalance_history": jobs.rebalance_history,
    "idle_groups": lambda log: jobs.idle_groups(log, NOW_MS, 60_000),
    "expired_groups": jobs.expired_groups,
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_each_table_is_the_same_from_the_summary(
    table: str, logs: Logs
) -> None:
    every, summarized, _ = logs
    expected = rows(TABLES[table](every))
    assert expected, f"the generated log gives no {table} rows: it tests nothing"
    assert rows(TABLES[table](summarized)) == expected


def test_the_summary_is_smaller_and_keeps_the_span(logs: Logs) -> None:
    every, summarized, _ = logs
    assert jobs.data_span(summarized) == jobs.data_span(every)
    commits = every.where("record_type = 'offset_commit'").count()
    kept = summarized.frame.where("record_type = 'offset_commit'").count()
    assert kept < commits / 2, (kept, commits)


def test_lag_against_supplied_ends_is_the_same_from_the_summary(
    logs: Logs,
) -> None:
    every, summarized, _ = logs
    ends = {("orders", 0): 5_000, ("orders", 1): 10, ("payments", 2): 12_000}
    assert rows(jobs.consumer_lag(summarized, ends)) == rows(jobs.consumer_lag(every, ends))


def test_what_a_summary_cannot_answer_is_refused(logs: Logs) -> None:
    summarized = logs.summarized
    with pytest.raises(ValueError, match="summarized by windows of 10000 ms, not 60000"):
        jobs.commit_rate(summarized, 60_000)
    with pytest.raises(ValueError, match="summarized by windows of 10000 ms, not 20000"):
        jobs.lag_over_time(summarized, None, 20_000)
    with pytest.raises(ValueError, match="against its highest commits only"):
        jobs.lag_over_time(summarized, {("orders", 0): 5}, WINDOW_MS)


def test_a_prefetched_read_gives_the_summarized_rows(logs: Logs) -> None:
    """What the CLI does on RayDP: the same summary made by a Ray task while Spark starts,
    then read by RayDP's JVMs from Ray's object store."""
    spark = logs.summarized.frame.sparkSession
    prefetched = read_prefetched_summary(spark, prefetch_summarized_log(logs.data_dir, WINDOW_MS))

    assert prefetched.window_ms == WINDOW_MS
    assert rows(prefetched.frame) == rows(logs.summarized.frame)


@pytest.fixture
def replicas(logs: Logs) -> Iterator[dict[int, list[Any]]]:
    """Each partition of the generated log served by two replica actors (as actors/partition/export.py)."""
    serve = ray.remote(num_cpus=0)(Files)
    sources = {p: [serve.remote(d), serve.remote(d)] for p, d in partition_dirs(logs.data_dir)}
    yield sources
    for handles in sources.values():
        for handle in handles:
            ray.kill(handle)


def test_a_summarized_read_through_the_replicas_is_the_directorys(
    logs: Logs, replicas: dict[int, list[Any]]
) -> None:
    """What `raygroups lag` reads of a running service: each partition whole through its
    replicas, summarized in a Ray task (or, for a Spark that cannot read Ray's object store,
    in the driver): the summary of the same log read from its directory."""
    spark = logs.summarized.frame.sparkSession
    records = logs.every.count()

    prefetched = prefetch_summarized_replicas(replicas, WINDOW_MS)
    summarized = read_prefetched_summary(spark, prefetched)
    here, read_here = read_summarized_replicas_here(spark, replicas, WINDOW_MS)

    assert summarized.window_ms == here.window_ms == WINDOW_MS
    assert rows(summarized.frame) == rows(here.frame) == rows(logs.summarized.frame)
    assert ray.get(prefetched.records) == read_here == records


def test_a_partition_no_replica_serves_fails_the_summarized_read_on_the_driver(
    logs: Logs, replicas: dict[int, list[Any]]
) -> None:
    prefetched = prefetch_summarized_replicas({**replicas, 1: []}, WINDOW_MS)

    with pytest.raises(ReplicaReadError, match="partition 1: no replica holds its log"):
        read_prefetched_summary(logs.summarized.frame.sparkSession, prefetched)


def test_a_prefetched_read_of_a_corrupt_log_raises_its_corruption_on_the_driver(
    bridge_session: BridgeSession, tmp_path: Path
) -> None:
    directory = str(tmp_path / "offsets-0")
    good = encode_payload([commit("g", "t", 0, 1), commit("g", "t", 1, 2)])
    write_segment(directory, 0, [(0, 2, 1, good), (2, 1, 0, b"\xc1 not msgpack"), (3, 2, 1, good)])
    prefetched = prefetch_summarized_log(tmp_path, WINDOW_MS)

    with pytest.raises(CorruptLogError) as raised:
        read_prefetched_summary(bridge_session.spark, prefetched)

    assert raised.value.offset == 2 and raised.value.path.startswith(directory)


@pytest.mark.parametrize("prefetched", [False, True])
def test_the_report_of_a_data_dir_reads_it_summarized_and_writes_the_same_tables(
    logs: Logs, tmp_path: Path, capsys: pytest.CaptureFixture[str], prefetched: bool,
) -> None:
    """`raygroups report --data-dir` without end offsets: the window size chosen from the
    batch headers before the read, each table file holding the tables of every record; the
    same when the summary was prefetched while Spark started (`cli._compute` on RayDP)."""
    every, summarized, data_dir = logs
    args = parse(["report", "--data-dir", str(data_dir), "--out", str(tmp_path / "report")])
    window_ms = cli.window_or_chosen(args)
    assert window_ms == choose_window_ms(*jobs.data_span(every))
    if prefetched:
        args.prefetched = prefetch_summarized_log(data_dir, window_ms)

    counts = cli.run_report(summarized.frame.sparkSession, args, None)

    assert re.search(r"read [\d,]+ records of the offsets log in .*, summarized into [\d,]+ rows",
                     capsys.readouterr().err)
    tables = {
        "lag_over_time": jobs.lag_over_time(every, None, window_ms),
        "commit_rate": jobs.commit_rate(every, window_ms),
        "committed_offsets": jobs.committed_offsets(every),
        "rebalance_history": jobs.rebalance_history(every),
    }
    for name, frame in tables.items():
        written = pq.read_table(tmp_path / "report" / f"{name}.parquet")
        assert written.num_rows == counts[name]
        expected = (row.asDict() for row in frame.collect())
        assert sorted(map(repr, written.to_pylist())) == sorted(map(repr, expected))
