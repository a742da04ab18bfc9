"""End offsets of the consumed topics: where lag is measured to.

Owns turning what a user supplies into one DataFrame of
`topic, topic_partition, log_end_offset` (the ends now), or of
`topic, topic_partition, at_ms, log_end_offset` (the ends over time). Rules:
- Accepted: a DataFrame (`topic`, `partition` or `topic_partition`,
  `log_end_offset` or `end_offset`), a mapping {(topic, partition): end},
  a callable (topic, partition) -> end or None, or a JSON/CSV file
  (`load_end_offsets`). A partition with no end offset has a null lag.
- A history of samples: an `EndOffsetHistory` of rows (topic, partition,
  at_ms, end_offset), as the topic registry's `end_offset_history` returns
  them, or a DataFrame with an `at_ms` column. Its ends now are each
  partition's latest sample; lag over time takes, at each time, the latest
  sample at or before it (an as-of join).
- A snapshot (everything else) is a history whose one sample holds at
  every time (`ALWAYS_MS`): lag over time is then measured against it.
- A callable is asked once per distinct (topic, partition) holding a
  committed offset, on the driver: it may query a broker or a service, and
  must not run once per row inside executors.
- With nothing supplied, the highest committed offset of each partition
  stands in for its end (`end_offsets_from_commits`); callers must say so.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_bridge.rows import OFFSET_COMMIT

EndOffsetFn = Callable[[str, int], int | None]
END_COLUMNS = ("topic", "topic_partition", "log_end_offset")
HISTORY_COLUMNS = ("topic", "topic_partition", "at_ms", "log_end_offset")
HISTORY_SCHEMA = "topic string, topic_partition int, at_ms long, log_end_offset long"
# The sample time of a snapshot: before every record, so it holds at every time.
ALWAYS_MS = 0


@dataclass(frozen=True, slots=True)
class EndOffsetHistory:
    """End-offset samples, rows (topic, partition, at_ms, end_offset), as the topic registry records them."""

    rows: tuple[tuple[str, int, int, int], ...]

    @classmethod
    def of(cls, rows: Iterable[Iterable[Any]]) -> EndOffsetHistory:
        plain = []
        for row in rows:
            topic, partition, at_ms, end = row
            plain.append((str(topic), int(partition), int(at_ms), int(end)))
        return cls(tuple(plain))


EndOffsets = DataFrame | Mapping[tuple[str, int], int] | EndOffsetFn | EndOffsetHistory
_PARTITION_NAMES = ("topic_partition", "partition")
_END_NAMES = ("log_end_offset", "end_offset")


class EndOffsetsError(ValueError):
    """An end-offsets file or table that cannot be read."""


def load_end_offsets(path: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """Read end offsets from JSON or CSV (by extension).

    JSON: {"topic": {"0": 120, "1": 80}} or a list of objects with `topic`,
    `partition` and `log_end_offset` (or `end_offset`). CSV: a header row
    naming the same columns.
    """
    text = str(path)
    try:
        with open(text, newline="") as file:
            if text.lower().endswith(".csv"):
                return _from_records(list(csv.DictReader(file)), text)
            data = json.load(file)
    except (OSError, json.JSONDecodeError, csv.Error) as exc:
        raise EndOffsetsError(f"cannot read end offsets from {text}: {exc}") from exc
    if isinstance(data, dict):
        try:
            return {(topic, int(p)): int(end) for topic, ends in data.items() for p, end in ends.items()}
        except (AttributeError, TypeError, ValueError) as exc:
            raise EndOffsetsError(f"{text}: expected {{topic: {{partition: end}}}}: {exc}") from exc
    if isinstance(data, list):
        return _from_records(data, text)
    raise EndOffsetsError(f"{text}: expected a JSON object or array")


def _from_records(records: list[Any], source: str) -> dict[tuple[str, int], int]:
    ends = {}
    for number, record in enumerate(records, 1):
        try:
            partition = next(record[n] for n in _PARTITION_NAMES if record.get(n) not in (None, ""))
            end = next(record[n] for n in _END_NAMES if record.get(n) not in (None, ""))
            ends[(str(record["topic"]), int(partition))] = int(end)
        except (AttributeError, KeyError, StopIteration, TypeError, ValueError) as exc:
            raise EndOffsetsError(
                f"{source}: entry {number} needs topic, partition and log_end_offset: {record!r}"
            ) from exc
    return ends


def is_history(end_offsets: EndOffsets) -> bool:
    """Whether `end_offsets` holds samples over time rather than one snapshot."""
    if isinstance(end_offsets, DataFrame):
        return "at_ms" in end_offsets.columns
    return isinstance(end_offsets, EndOffsetHistory)


def history_frame(spark: SparkSession, end_offsets: EndOffsets, committed: DataFrame) -> DataFrame:
    """`end_offsets` as samples over time, HISTORY_COLUMNS; a snapshot is one sample at ALWAYS_MS."""
    if isinstance(end_offsets, EndOffsetHistory):
        return spark.createDataFrame(list(end_offsets.rows), HISTORY_SCHEMA)
    if isinstance(end_offsets, DataFrame) and is_history(end_offsets):
        return _normalize(end_offsets, with_time=True)
    snapshot = end_offsets_frame(spark, end_offsets, committed)
    return snapshot.select("topic", "topic_partition", F.lit(ALWAYS_MS).cast("long").alias("at_ms"),
                           "log_end_offset")


def latest_samples(history: DataFrame) -> DataFrame:
    """Each partition's newest sample of a HISTORY_COLUMNS frame, as END_COLUMNS."""
    newest = F.max(F.struct("at_ms", "log_end_offset"))
    per_partition = history.groupBy("topic", "topic_partition").agg(newest.alias("_newest"))
    end = F.col("_newest.log_end_offset").alias("log_end_offset")
    return per_partition.select("topic", "topic_partition", end)


def end_offsets_frame(spark: SparkSession, end_offsets: EndOffsets, committed: DataFrame) -> DataFrame:
    """`end_offsets` as a DataFrame of END_COLUMNS; `committed` names the partitions a callable is asked."""
    if is_history(end_offsets):
        return latest_samples(history_frame(spark, end_offsets, committed))
    if isinstance(end_offsets, DataFrame):
        return _normalize(end_offsets)
    rows: list[tuple[str, int, int | None]]
    if isinstance(end_offsets, Mapping):
        rows = [(topic, partition, end) for (topic, partition), end in end_offsets.items()]
    elif callable(end_offsets):
        keys = committed.select("topic", "topic_partition").distinct().collect()
        rows = [(topic, partition, end_offsets(topic, partition)) for topic, partition in keys]
    else:
        raise TypeError(f"end offsets must be a DataFrame, a mapping or a callable, not {type(end_offsets)}")
    return spark.createDataFrame(rows, "topic string, topic_partition int, log_end_offset long")


def _normalize(frame: DataFrame, with_time: bool = False) -> DataFrame:
    columns = set(frame.columns)
    partition = next((name for name in _PARTITION_NAMES if name in columns), None)
    end = next((name for name in _END_NAMES if name in columns), None)
    if "topic" not in columns or partition is None or end is None:
        wanted = "topic, partition and log_end_offset columns"
        raise EndOffsetsError(f"end offsets need {wanted}, got {frame.columns}")
    time = [F.col("at_ms").cast("long").alias("at_ms")] if with_time else []
    return frame.select(
        F.col("topic").cast("string"),
        F.col(partition).cast("int").alias("topic_partition"),
        *time,
        F.col(end).cast("long").alias("log_end_offset"),
    )


def end_offsets_from_commits(log_df: DataFrame) -> DataFrame:
    """The highest offset ever committed to each partition, standing in for its end."""
    commits = log_df.where((F.col("record_type") == OFFSET_COMMIT) & ~F.col("tombstone"))
    return commits.groupBy("topic", "topic_partition").agg(F.max("committed_offset").alias("log_end_offset"))
