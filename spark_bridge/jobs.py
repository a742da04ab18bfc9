"""Offset analytics: functions from the log DataFrame to result DataFrames.

Owns the meaning of every analytics table. Each job takes the DataFrame of
`reader.read_offsets_log` (columns of `rows.COLUMNS`) and returns a lazy
DataFrame, so user Spark code can filter, join or save it further. Rules:
- Replay semantics, as `log.loader` applies them: per key (group, topic,
  partition for offsets; group for metadata) the record with the highest
  offset wins and a tombstone deletes the key. A key lives in one offsets
  partition (groups are routed by id), so its offsets order its records.
  A compacted log gives the same answers as the full one, except for
  history jobs (rates, rebalances) over records compaction removed.
- Time buckets are `window_ms` wide, aligned to the epoch, by batch
  (append) time: `window_start_ms = ts - ts % window_ms`.
- Times are milliseconds since the epoch; the jobs never read the clock
  (`idle_groups` takes `now_ms`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_bridge.end_offsets import EndOffsets, end_offsets_frame, end_offsets_from_commits
from spark_bridge.rows import GROUP_METADATA, OFFSET_COMMIT

OFFSET_KEY = ("group_id", "topic", "topic_partition")
DEFAULT_WINDOW_MS = 60_000


def _offset_records(log_df: DataFrame) -> DataFrame:
    return log_df.where(F.col("record_type") == OFFSET_COMMIT)


def _group_records(log_df: DataFrame) -> DataFrame:
    return log_df.where(F.col("record_type") == GROUP_METADATA)


def _latest(records: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """The newest record of each key, tombstones included."""
    newest_first = Window.partitionBy(*key).orderBy(F.col("offset").desc())
    ranked = records.withColumn("_rank", F.row_number().over(newest_first))
    return ranked.where(F.col("_rank") == 1).drop("_rank")


def _window_start(timestamp: Column, window_ms: int) -> Column:
    if window_ms < 1:
        raise ValueError(f"window_ms must be >= 1, got {window_ms}")
    return (timestamp - F.pmod(timestamp, F.lit(window_ms))).cast("long")


def committed_offsets(log_df: DataFrame) -> DataFrame:
    """The compacted view: the live committed offset of every group, topic and partition."""
    latest = _latest(_offset_records(log_df), OFFSET_KEY).where(~F.col("tombstone"))
    return latest.select(
        *OFFSET_KEY, "committed_offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp",
        F.col("partition").alias("log_partition"), F.col("offset").alias("log_offset"),
    )


def _ends(log_df: DataFrame, end_offsets: EndOffsets | None) -> DataFrame:
    if end_offsets is None:
        return end_offsets_from_commits(log_df)
    return end_offsets_frame(log_df.sparkSession, end_offsets, _offset_records(log_df))


def consumer_lag(log_df: DataFrame, end_offsets: EndOffsets | None = None) -> DataFrame:
    """Lag of every live committed offset: log end minus committed offset.

    `end_offsets`: a DataFrame, a mapping or a callable (see `end_offsets`);
    None uses the highest committed offset of each partition. A partition
    without an end offset has a null end and lag.
    """
    committed = committed_offsets(log_df)
    joined = committed.join(_ends(log_df, end_offsets), ["topic", "topic_partition"], "left")
    return joined.select(
        *OFFSET_KEY,
        F.col("committed_offset").alias("current_offset"),
        "log_end_offset",
        (F.col("log_end_offset") - F.col("committed_offset")).alias("lag"),
        "commit_timestamp",
    )


def lag_over_time(
    log_df: DataFrame, end_offsets: EndOffsets | None = None, window_ms: int = DEFAULT_WINDOW_MS
) -> DataFrame:
    """Total lag of each group at the end of every window in which it committed.

    Measured against today's end offsets (they are one snapshot): the lag
    at time t is sum(end - offset committed as of t) over the group's live
    partitions that have an end offset, i.e. how far behind today's end the
    group was then. Built from per-commit changes, so its cost is the
    number of commits, not windows times partitions.
    """
    commits = _offset_records(log_df).join(_ends(log_df, end_offsets), ["topic", "topic_partition"])
    contribution = F.when(F.col("tombstone"), F.lit(0)).otherwise(
        F.col("log_end_offset") - F.col("committed_offset")
    )
    by_key = Window.partitionBy(*OFFSET_KEY).orderBy("offset")
    changes = commits.withColumn("_contribution", contribution).withColumn(
        "_change", F.col("_contribution") - F.coalesce(F.lag("_contribution").over(by_key), F.lit(0))
    )
    per_window = changes.groupBy(
        "group_id", _window_start(F.col("batch_timestamp"), window_ms).alias("window_start_ms")
    ).agg(F.sum("_change").alias("_change"))
    so_far = Window.partitionBy("group_id").orderBy("window_start_ms").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    return per_window.select(
        "group_id", "window_start_ms", F.sum("_change").over(so_far).cast("long").alias("lag")
    )


def commit_rate(log_df: DataFrame, window_ms: int = DEFAULT_WINDOW_MS) -> DataFrame:
    """Offset commits (one per partition committed) per group and time window."""
    commits = _offset_records(log_df).where(~F.col("tombstone"))
    start = _window_start(F.col("batch_timestamp"), window_ms)
    counted = commits.groupBy("group_id", start.alias("window_start_ms")).agg(
        F.count(F.lit(1)).alias("offset_commits"),
        F.countDistinct("topic", "topic_partition").alias("partitions"),
    )
    return counted.select(
        "group_id", "window_start_ms", (F.col("window_start_ms") + window_ms).alias("window_end_ms"),
        "offset_commits", "partitions",
        (F.col("offset_commits") / F.lit(window_ms / 1000.0)).alias("commits_per_second"),
    )


def rebalance_history(log_df: DataFrame) -> DataFrame:
    """Every generation change of every group, with member counts and the time since the previous one."""
    metadata = _group_records(log_df).where(~F.col("tombstone"))
    in_order = Window.partitionBy("group_id").orderBy("offset")
    changed = metadata.withColumn("_before", F.lag("generation").over(in_order)).where(
        F.col("_before").isNull() | (F.col("_before") != F.col("generation"))
    )
    return changed.select(
        "group_id",
        "generation",
        F.lag("generation").over(in_order).alias("previous_generation"),
        F.col("batch_timestamp").alias("timestamp_ms"),
        (F.col("batch_timestamp") - F.lag("batch_timestamp").over(in_order)).alias(
            "ms_since_previous_generation"
        ),
        "member_count",
        F.lag("member_count").over(in_order).alias("previous_member_count"),
        "protocol_type", "protocol", "leader",
        F.col("partition").alias("log_partition"), F.col("offset").alias("log_offset"),
    )


def idle_groups(log_df: DataFrame, now_ms: int, idle_threshold_ms: int) -> DataFrame:
    """Groups with live offsets whose last commit is at least `idle_threshold_ms` before `now_ms`."""
    per_group = committed_offsets(log_df).groupBy("group_id").agg(
        F.max("commit_timestamp").alias("last_commit_ms"), F.count(F.lit(1)).alias("live_offsets")
    )
    idle = per_group.withColumn("idle_ms", F.lit(now_ms) - F.col("last_commit_ms"))
    return idle.where(F.col("idle_ms") >= idle_threshold_ms).select(
        "group_id", "last_commit_ms", "idle_ms", "live_offsets"
    )


def expired_groups(log_df: DataFrame) -> DataFrame:
    """Groups deleted by a group tombstone, or whose every offset was removed by tombstones."""
    groups = _latest(_group_records(log_df), ("group_id",)).select(
        "group_id",
        F.col("tombstone").alias("group_deleted"),
        F.when(F.col("tombstone"), F.col("batch_timestamp")).alias("_group_removed_ms"),
    )
    offsets = _latest(_offset_records(log_df), OFFSET_KEY).groupBy("group_id").agg(
        F.sum(F.col("tombstone").cast("int")).alias("offsets_removed"),
        F.sum((~F.col("tombstone")).cast("int")).alias("live_offsets"),
        F.max(F.when(F.col("tombstone"), F.col("batch_timestamp"))).alias("_offsets_removed_ms"),
    )
    joined = groups.join(offsets, "group_id", "full_outer").select(
        "group_id",
        F.coalesce("group_deleted", F.lit(False)).alias("group_deleted"),
        F.coalesce("offsets_removed", F.lit(0)).cast("long").alias("offsets_removed"),
        F.coalesce("live_offsets", F.lit(0)).cast("long").alias("live_offsets"),
        F.greatest("_group_removed_ms", "_offsets_removed_ms").alias("removed_at_ms"),
    )
    all_offsets_gone = (F.col("offsets_removed") > 0) & (F.col("live_offsets") == 0)
    return joined.where(F.col("group_deleted") | all_offsets_gone)
