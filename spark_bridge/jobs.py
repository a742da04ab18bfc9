"""Offset analytics: functions from the log DataFrame to result DataFrames.

Owns the meaning of every analytics table. Each job takes the DataFrame of
`reader.read_offsets_log` (columns of `rows.COLUMNS`) and returns a lazy
DataFrame, so user Spark code can filter, join or save it further. Rules:
- A group's records belong to the partition that owned it when they were
  written (`spark_bridge.ownership`, which marks the rows `_copy` and `_era`):
  history jobs (rates, rebalances) skip the admitted copies, so a group moved
  by a repartition counts once, as if it had never moved.
- Replay semantics, as `log.loader` applies them: per key (group, topic,
  partition for offsets; group for metadata) the newest record by
  (`_era`, offset) wins and a tombstone deletes the key.
  A compacted log gives the same answers as the full one, except for
  history jobs (rates, rebalances) over records compaction removed.
- A group's history is in log order, (`_era`, partition, offset). The rebalance history reads both
  group types (classic GroupMetadata; KIP-848's ConsumerGroupMetadata,
  member metadata and target assignment metadata) as one history per group
  id, since a group converts between the types online; `group_type` tells
  its rows apart (`protocol_type` is "consumer" for both kinds).
- Time buckets are `window_ms` wide, aligned to the epoch, by batch
  (append) time: `window_start_ms = ts - ts % window_ms`.
- Lag has one definition, shared with the coordinator's live lag
  (`coordinator/lag.py`; its column form `spark_bridge.lag_columns`): end
  minus committed, never below 0, unknown (null) without an end. Lag over
  time is as of each window's end: the offset committed by then against the
  partition's end offset sampled by then (`end_offsets` histories); a
  snapshot of end offsets holds at every time.
- Times are milliseconds since the epoch; the jobs never read the clock
  (`idle_groups` takes `now_ms`).
- Every job also takes a `SummarizedLog` (`spark_bridge.summary`: a read that
  turned each partition's commits into per-group, per-window rows) and gives
  the same table: `commit_rate` and `lag_over_time` read its summary rows,
  for its own window size and, for lag, against the highest commits only;
  the other jobs read the records it kept.
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from spark_bridge.end_offsets import (
    ALWAYS_MS,
    EndOffsets,
    end_offsets_frame,
    end_offsets_from_commits,
    history_frame,
    is_history,
)
from spark_bridge.lag_columns import lag_column
from spark_bridge.ownership import COPY, ERA, annotate
from spark_bridge.rows import (
    CLASSIC_GROUP_TYPE,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TYPE,
    CONSUMER_MEMBER_METADATA,
    CONSUMER_TARGET_ASSIGNMENT_METADATA,
    GROUP_METADATA,
    OFFSET_COMMIT,
)
from spark_bridge.summary import LIVE_ROW, WINDOW_ROW, check_window

OFFSET_KEY = ("group_id", "topic", "topic_partition")
DEFAULT_WINDOW_MS = 60_000


class SummarizedLog(NamedTuple):
    """A summarized read of the log (`reader.read_summarized_log`) and its window size."""

    frame: DataFrame
    window_ms: int


LogInput = DataFrame | SummarizedLog


def _frame(log: LogInput) -> DataFrame:
    """The rows a job reads, with `ownership`'s columns."""
    return annotate(log.frame if isinstance(log, SummarizedLog) else log)


def _history(log_df: DataFrame) -> DataFrame:
    """The rows a history job reads: no admitted copies."""
    return log_df.where(~F.col(COPY))


def _summary_for(log: SummarizedLog, window_ms: int) -> DataFrame:
    if window_ms != log.window_ms:
        raise ValueError(
            f"the log was summarized by windows of {log.window_ms} ms, not {window_ms}: "
            "read it again with that window, or read every record"
        )
    return log.frame


def _offset_records(log_df: DataFrame) -> DataFrame:
    return log_df.where(F.col("record_type") == OFFSET_COMMIT)


def _group_records(log_df: DataFrame) -> DataFrame:
    """The group records of both types: classic GroupMetadata and ConsumerGroupMetadata."""
    return log_df.where(F.col("record_type").isin(GROUP_METADATA, CONSUMER_GROUP_METADATA))


def _latest(records: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """The newest record of each key, tombstones included."""
    newest_first = Window.partitionBy(*key).orderBy(F.col(ERA).desc(), F.col("offset").desc())
    ranked = records.withColumn("_rank", F.row_number().over(newest_first))
    return ranked.where(F.col("_rank") == 1).drop("_rank")


def _window_start(timestamp: Column, window_ms: int) -> Column:
    check_window(window_ms)
    return (timestamp - F.pmod(timestamp, F.lit(window_ms))).cast("long")


def committed_offsets(log: LogInput) -> DataFrame:
    """The compacted view: the live committed offset of every group, topic and partition."""
    return _committed(_frame(log))


def _committed(log_df: DataFrame) -> DataFrame:
    latest = _latest(_offset_records(log_df), OFFSET_KEY).where(~F.col("tombstone"))
    return latest.select(
        *OFFSET_KEY, "committed_offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp",
        F.col("partition").alias("log_partition"), F.col("offset").alias("log_offset"),
    )


def _ends(log_df: DataFrame, end_offsets: EndOffsets | None) -> DataFrame:
    if end_offsets is None:
        return end_offsets_from_commits(log_df)
    return end_offsets_frame(log_df.sparkSession, end_offsets, _offset_records(log_df))


def consumer_lag(log: LogInput, end_offsets: EndOffsets | None = None) -> DataFrame:
    """Lag of every live committed offset: log end minus committed offset, never below 0
    (a commit past the end is lag 0), as the live lag measures it (`lag_column`).

    `end_offsets`: a DataFrame, a mapping or a callable (see `end_offsets`);
    None uses the highest committed offset of each partition. A partition
    without an end offset has a null end and lag.
    """
    log_df = _frame(log)
    committed = _committed(log_df)
    joined = committed.join(_ends(log_df, end_offsets), ["topic", "topic_partition"], "left")
    return joined.select(
        *OFFSET_KEY,
        F.col("committed_offset").alias("current_offset"),
        "log_end_offset",
        lag_column(F.col("log_end_offset"), F.col("committed_offset")).alias("lag"),
        "commit_timestamp",
    )


def _end_history(log_df: DataFrame, end_offsets: EndOffsets | None) -> DataFrame:
    if end_offsets is None:
        ends = end_offsets_from_commits(log_df)
        return ends.select("topic", "topic_partition", F.lit(ALWAYS_MS).cast("long").alias("at_ms"),
                           "log_end_offset")
    return history_frame(log_df.sparkSession, end_offsets, _offset_records(log_df))


def data_span(log: LogInput, end_offsets: EndOffsets | None = None) -> tuple[int, int] | None:
    """(first, last) time of the analytics' data: from the first record of the log to the last
    record or end-offset sample, whichever is later. None for an empty log."""
    log_df = _frame(log)
    first, last = log_df.agg(F.min("batch_timestamp"), F.max("batch_timestamp")).first() or (None, None)
    if first is None or last is None:
        return None
    if end_offsets is not None and is_history(end_offsets):
        (sampled,) = _end_history(log_df, end_offsets).agg(F.max("at_ms")).first() or (None,)
        last = last if sampled is None else max(last, sampled)
    return int(first), int(last)


def _window_grid(log_df: DataFrame, history: DataFrame, window_ms: int) -> DataFrame:
    """One row per window, `window_start_ms`, from the first offset commit's window to the last
    record's or end-offset sample's."""
    first = _offset_records(log_df).agg(F.min("batch_timestamp").alias("t"))
    last_record = log_df.agg(F.max("batch_timestamp").alias("t"))
    last_sample = history.agg(F.max("at_ms").alias("t"))
    bounds = first.select(_window_start(F.col("t"), window_ms).alias("_first")).crossJoin(
        last_record.unionByName(last_sample).agg(F.max("t").alias("t")).select(
            _window_start(F.col("t"), window_ms).alias("_last")
        )
    )
    starts = F.sequence(F.col("_first"), F.greatest("_first", "_last"), F.lit(window_ms).cast("long"))
    return bounds.where(F.col("_first").isNotNull()).select(F.explode(starts).alias("window_start_ms"))


def _newest_per_window(
    records: DataFrame, key: tuple[str, ...], at: Column, values: tuple[str, ...],
    grid: DataFrame, window_ms: int,
) -> DataFrame:
    """Per key and window where it has records: the newest (by `at`, then by `_order`) as the
    struct `_newest` of `values`. A record before the grid counts in its first window."""
    first_window = grid.agg(F.min("window_start_ms").alias("_grid_first"))
    placed = records.crossJoin(first_window).withColumn(
        "window_start_ms", F.greatest(_window_start(at, window_ms), F.col("_grid_first"))
    )
    return placed.groupBy(*key, "window_start_ms").agg(
        F.max(F.struct(at.alias("_at"), F.col("_order"), *values)).alias("_newest")
    )


def _as_of(
    records: DataFrame, key: tuple[str, ...], at: Column, values: tuple[str, ...],
    grid: DataFrame, window_ms: int,
) -> DataFrame:
    """Per key and window of `grid` from the key's first record on: the newest record (by `at`,
    then by `_order`) at or before the window's end, as the struct `_asof` of `values`.

    The newest record of each window, then a forward fill over the windows: the cost is keys
    times windows, never records times windows. A record before the grid counts in its first window.
    """
    newest = _newest_per_window(records, key, at, values, grid, window_ms)
    starts = newest.groupBy(*key).agg(F.min("window_start_ms").alias("_from"))
    cells = starts.crossJoin(grid).where(F.col("window_start_ms") >= F.col("_from")).drop("_from")
    so_far = Window.partitionBy(*key).orderBy("window_start_ms").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    filled = cells.join(newest, [*key, "window_start_ms"], "left")
    newest_so_far = F.last("_newest", ignorenulls=True).over(so_far)
    return filled.select(*key, "window_start_ms", newest_so_far.alias("_asof"))


def lag_over_time(
    log: LogInput, end_offsets: EndOffsets | None = None, window_ms: int = DEFAULT_WINDOW_MS
) -> DataFrame:
    """Total lag of each group at the end of every window, from its first commit to the data's end.

    Per (group, topic, partition) and window: the end offset as of the
    window's end (the partition's latest sample at or before it) minus the
    offset committed as of then, never below 0 (an end sampled before the
    commit is no lag: the consumer is caught up, as Burrow reads it). A
    group's lag sums its live partitions that have an end by then; windows
    where it has none have no row. With a snapshot (a mapping, a file, or
    nothing: the highest commit), the snapshot is the end at every time.
    """
    if isinstance(log, SummarizedLog):
        if end_offsets is not None:
            raise ValueError("a summarized log measures lag against its highest commits only: "
                             "read every record to measure it against end offsets")
        summary = _summary_for(log, window_ms)
        grid = _window_grid(summary, _end_history(summary, None), window_ms)
        return _lag_over_time_of_summary(summary, grid, window_ms)
    log_df = log
    history = _end_history(log_df, end_offsets)
    grid = _window_grid(log_df, history, window_ms)
    if end_offsets is None or not is_history(end_offsets):
        return _lag_over_time_of_snapshot(log_df, history, grid, window_ms)
    commits = _offset_records(log_df).withColumn("_order", F.col("offset"))
    committed = _as_of(commits, OFFSET_KEY, F.col("batch_timestamp"), ("committed_offset", "tombstone"),
                       grid, window_ms)
    samples = history.withColumn("_order", F.col("log_end_offset"))
    ends = _as_of(samples, ("topic", "topic_partition"), F.col("at_ms"), ("log_end_offset",), grid, window_ms)
    joined = committed.join(ends.withColumnRenamed("_asof", "_end"), ["topic", "topic_partition",
                                                                        "window_start_ms"])
    live = joined.where(~F.col("_asof.tombstone") & F.col("_end").isNotNull())
    lag = lag_column(F.col("_end.log_end_offset"), F.col("_asof.committed_offset"))
    return live.groupBy("group_id", "window_start_ms").agg(F.sum(lag).cast("long").alias("lag"))


def _lag_over_time_of_snapshot(
    log_df: DataFrame, snapshot: DataFrame, grid: DataFrame, window_ms: int
) -> DataFrame:
    """`lag_over_time` where every partition's end is one value at all times: the same rows,
    at a cost of records plus groups times windows rather than keys times windows.

    A key's lag, max(end - committed, 0), and whether it counts (live, with an end) change
    only in the windows where its newest record changes: each such window gives the change
    of both from the key's window before, a group's changes are summed per window, and a
    running sum over the group's windows from its first commit gives its lag, in the
    windows where at least one of its keys counts."""
    commits = _offset_records(log_df).withColumn("_order", F.col("offset"))
    newest = _newest_per_window(
        commits, OFFSET_KEY, F.col("batch_timestamp"), ("committed_offset", "tombstone"), grid, window_ms
    )
    ends = snapshot.select("topic", "topic_partition", "log_end_offset")
    counts = ~F.col("_newest.tombstone") & F.col("log_end_offset").isNotNull()
    states = newest.join(ends, ["topic", "topic_partition"], "left").select(
        *OFFSET_KEY, "window_start_ms",
        F.when(counts, lag_column(F.col("log_end_offset"), F.col("_newest.committed_offset")))
        .otherwise(F.lit(0)).cast("long").alias("_lag"),
        F.when(counts, F.lit(1)).otherwise(F.lit(0)).alias("_counts"),
    )
    in_key = Window.partitionBy(*OFFSET_KEY).orderBy("window_start_ms")
    changes = states.select(
        "group_id", "window_start_ms",
        (F.col("_lag") - F.coalesce(F.lag("_lag").over(in_key), F.lit(0))).alias("_dlag"),
        (F.col("_counts") - F.coalesce(F.lag("_counts").over(in_key), F.lit(0))).alias("_dcounts"),
    ).groupBy("group_id", "window_start_ms").agg(
        F.sum("_dlag").alias("_dlag"), F.sum("_dcounts").alias("_dcounts")
    )
    return _running_lag(changes, grid, window_ms)


def _lag_over_time_of_summary(summary: DataFrame, grid: DataFrame, window_ms: int) -> DataFrame:
    """`lag_over_time` of a summarized log against its highest commits (`spark_bridge.summary`):
    a group's lag changes in a window by the ends of the keys that started or stopped being
    live, less its `committed_change`. This is `lag_column`'s sum by its changes: no committed
    offset is above its partition's highest commit, so no key's lag is clamped."""
    ends = end_offsets_from_commits(summary)
    lives = summary.where(F.col("record_type") == LIVE_ROW).join(ends, ["topic", "topic_partition"], "left")
    ends_change = lives.groupBy("group_id", "window_start_ms").agg(
        F.sum(F.col("live_change") * F.coalesce("log_end_offset", F.lit(0))).alias("_dend"),
        F.sum("live_change").alias("_dcounts"),
    )
    windows = summary.where(F.col("record_type") == WINDOW_ROW)
    changes = windows.join(ends_change, ["group_id", "window_start_ms"], "left").select(
        "group_id", "window_start_ms",
        (F.coalesce("_dend", F.lit(0)) - F.col("committed_change")).alias("_dlag"),
        F.coalesce("_dcounts", F.lit(0)).alias("_dcounts"),
    )
    return _running_lag(changes, grid, window_ms)


def _running_lag(changes: DataFrame, grid: DataFrame, window_ms: int) -> DataFrame:
    """Each group's lag from its `_dlag` and `_dcounts` changes per window (at most one row per
    group and window): their running sums from the group's first change, held over the grid's
    windows up to its next change (or the grid's last window), in the windows where some key
    counts. The cost is the changes plus the rows given: no grid of groups times windows is
    built, joined or sorted."""
    in_group = Window.partitionBy("group_id").orderBy("window_start_ms")
    so_far = in_group.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    running = changes.select(
        "group_id", "window_start_ms",
        F.sum(F.coalesce("_dlag", F.lit(0))).over(so_far).cast("long").alias("lag"),
        F.sum(F.coalesce("_dcounts", F.lit(0))).over(so_far).alias("_counted"),
        F.lead("window_start_ms").over(in_group).alias("_next"),
    )
    last = grid.agg(F.max("window_start_ms").alias("_last"))
    held = running.crossJoin(last).where(
        (F.col("_counted") > 0) & (F.col("window_start_ms") <= F.col("_last"))
    )
    step = F.lit(window_ms).cast("long")
    until = F.least(F.coalesce(F.col("_next") - step, F.col("_last")), F.col("_last"))
    windows = F.explode(F.sequence(F.col("window_start_ms"), until, step))
    return held.select("group_id", windows.alias("window_start_ms"), "lag")


def commit_rate(log: LogInput, window_ms: int = DEFAULT_WINDOW_MS) -> DataFrame:
    """Offset commits (one per partition committed) per group and time window."""
    if isinstance(log, SummarizedLog):
        windows = _summary_for(log, window_ms).where(
            (F.col("record_type") == WINDOW_ROW) & (F.col("commits") > 0)
        )
        counted = windows.select(
            "group_id", "window_start_ms", F.col("commits").alias("offset_commits"),
            F.col("partitions").cast("long").alias("partitions"),
        )
    else:
        commits = _offset_records(_history(_frame(log))).where(~F.col("tombstone"))
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


def _in_log_order(*key: str) -> WindowSpec:
    return Window.partitionBy(*key).orderBy(ERA, "partition", "offset")


def _group_epoch_records(log_df: DataFrame) -> DataFrame:
    """Both types' group records (tombstones too), with `group_type` and `_starts`: True on each
    record that starts a row of the rebalance history.

    A value starts a row when the group's previous value (of either type) had another type or
    generation, or none came before; a consumer group's epoch also when it follows that group's
    deletion (its ConsumerGroupMetadata tombstone: the group was created again).
    """
    records = _group_records(log_df).withColumn(
        "group_type",
        F.when(F.col("record_type") == GROUP_METADATA, F.lit(CLASSIC_GROUP_TYPE)).otherwise(
            F.lit(CONSUMER_GROUP_TYPE)
        ),
    )
    in_order = _in_log_order("group_id")
    before = in_order.rowsBetween(Window.unboundedPreceding, -1)
    value = F.when(~F.col("tombstone"), F.struct("group_type", "generation"))
    previous = F.last(value, ignorenulls=True).over(before)
    consumer_deleted = F.col("tombstone") & (F.col("record_type") == CONSUMER_GROUP_METADATA)
    deleted_before = F.lag(consumer_deleted).over(in_order)
    recreated = (F.col("group_type") == CONSUMER_GROUP_TYPE) & F.coalesce(deleted_before, F.lit(False))
    changed = (
        previous.isNull() | (previous["group_type"] != F.col("group_type"))
        | (previous["generation"] != F.col("generation")) | recreated
    )
    return records.withColumn("_starts", ~F.col("tombstone") & changed)


def _member_changes(log_df: DataFrame) -> DataFrame:
    """Consumer group member metadata records, `_delta` +1 where a member starts to exist (its first
    record, or the first after its tombstone), -1 on its tombstone, 0 when a live member is rewritten."""
    members = log_df.where(F.col("record_type") == CONSUMER_MEMBER_METADATA)
    per_member = _in_log_order("group_id", "member_id")
    was_live = F.coalesce(F.lag(~F.col("tombstone")).over(per_member), F.lit(False))
    delta = F.when(~F.col("tombstone") & ~was_live, 1).when(F.col("tombstone") & was_live, -1).otherwise(0)
    return members.withColumn("_delta", delta)


def rebalance_history(log: LogInput) -> DataFrame:
    """Every generation change of every group, classic and consumer, in log order, with member
    counts, the time since the previous one and (consumer groups) the target assignment epoch.

    Classic groups (GroupMetadata): a row per new generation, `member_count` from the record.
    Consumer groups (KIP-848, ConsumerGroupMetadata): a row per new group epoch (`generation`),
    `member_count` the members whose metadata record exists and is not tombstoned at that log
    position, `assignment_epoch` the newest target assignment epoch written up to the group's next
    row (equal to the epoch once the coordinator computed its target; lower when the group moved on
    first; None if the log holds none). A group converted between the types (online upgrade or
    downgrade) has one history: the conversion is a row of its own (`group_type` changes, the
    generation usually carries over), and `previous_*` columns refer to the previous row of
    either type.
    """
    log_df = _history(_frame(log))
    events = _group_epoch_records(log_df).unionByName(_member_changes(log_df), allowMissingColumns=True)
    is_target = F.col("record_type") == CONSUMER_TARGET_ASSIGNMENT_METADATA
    targets = log_df.where(is_target & ~F.col("tombstone"))
    events = events.unionByName(targets, allowMissingColumns=True)
    so_far = _in_log_order("group_id").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    events = events.withColumn("_live", F.sum(F.coalesce("_delta", F.lit(0))).over(so_far)).withColumn(
        "_row", F.sum(F.coalesce("_starts", F.lit(False)).cast("int")).over(so_far)
    )
    whole_row = _in_log_order("group_id", "_row").rowsBetween(
        Window.unboundedPreceding, Window.unboundedFollowing
    )
    events = events.withColumn("_target", F.last("assignment_epoch", ignorenulls=True).over(whole_row))
    starts = events.where(F.coalesce("_starts", F.lit(False)))
    in_order = _in_log_order("group_id")
    target_so_far = F.last("_target", ignorenulls=True).over(so_far)
    is_consumer = F.col("group_type") == CONSUMER_GROUP_TYPE
    starts = starts.withColumn(
        "member_count", F.when(is_consumer, F.col("_live")).otherwise(F.col("member_count")).cast("int")
    ).withColumn("assignment_epoch", F.when(is_consumer, target_so_far).cast("int"))
    return starts.select(
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
        "group_type", "assignment_epoch",
    )


def idle_groups(log: LogInput, now_ms: int, idle_threshold_ms: int) -> DataFrame:
    """Groups with live offsets whose last commit is at least `idle_threshold_ms` before `now_ms`."""
    per_group = committed_offsets(log).groupBy("group_id").agg(
        F.max("commit_timestamp").alias("last_commit_ms"), F.count(F.lit(1)).alias("live_offsets")
    )
    idle = per_group.withColumn("idle_ms", F.lit(now_ms) - F.col("last_commit_ms"))
    return idle.where(F.col("idle_ms") >= idle_threshold_ms).select(
        "group_id", "last_commit_ms", "idle_ms", "live_offsets"
    )


def expired_groups(log: LogInput) -> DataFrame:
    """Groups deleted by a group tombstone, or whose every offset was removed by tombstones.

    A group's newest record of either type decides: a classic group converted to a consumer
    group (a GroupMetadata tombstone, then its consumer group records) is not deleted, a
    consumer group deleted by its ConsumerGroupMetadata tombstone is."""
    log_df = _frame(log)
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
