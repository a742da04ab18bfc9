"""Which partition a group's records belong to, once groups have moved: one rule for every job.

A repartition (coordinator/handoff.py, docs/capacity.md) hands a group g from partition p to
a new partition t: t writes copies of g's records (its classic metadata or KIP-848 records,
its committed offsets with their original commit timestamps: "the admit"), then p writes its
switch record, and from then on only t writes g's records. p's log keeps g's older records,
so a moved group's records are in two logs, and its last state before the move is in both.

The rule: a group's records belong to the partition that owned the group when they were
written. Applied to the log, it drops exactly the admitted copies, and nothing else:
- p owned g until its switch and never writes g after it: every record of g in p's log is
  p's own, and stays (the group's history before the move, and the newest state of every
  key t never rewrote).
- t is a new partition: it owns nothing until its source switches, after its admits are
  durable. Each admit ends with a marker (`handoff.ADMIT_KIND`, a service state entry in
  t's own log), so every group record of t's log before t's last marker is a copy (an
  abandoned attempt's too), and every record after it is t's own.
So the records of a group that stay are the history of one group without a repartition:
commit rates and rebalance histories count each commit and generation once, at the time
it happened; and a key's newest record is its newest by (partition, offset), because the
partitions that own a group in turn are ever higher-numbered (growing N to kN sends p's
groups to p + jN), which is the order `jobs._latest` and the rebalance history use.

Why a marker rather than the switch record: the switch is in p's log, and no order relates
p's offsets to t's; their batch times come from two clocks. The marker is in t's own log,
so the rule needs nothing but each partition's own records: exact, and cheap.
- `owned_table` applies it to one whole partition's rows in Arrow, where a summarized read
  already holds them (`reader.summarized_batches`): no extra read. A summary sums each
  partition's changes of a group's lag, so the copies are not thrown away there: they
  are each moved key's state before the target's first record of it (`split_admitted`),
  and the source's last state plus the target's changes from it is the group's lag.
- `owned_records` applies it to a log DataFrame: the markers (a few rows per partition)
  are found by a small aggregate and broadcast to every task, so the log is scanned once
  more for them unless the caller cached it (as the CLI does). No row comes to the driver.
A log that never saw a repartition has no marker, and both return every row.
Shrinking the count (not built) would make a partition a target after it owned groups of
its own; this rule would then need the marker to name the admitted groups.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_bridge.rows import SERVICE_STATE

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

_ADMITTED_BEFORE = "_admitted_before"


def owned_records(log_df: DataFrame) -> DataFrame:
    """The rows of `log_df` (columns of `rows.COLUMNS`) less the admitted copies (module rule)."""
    from pyspark.sql import functions as F

    from coordinator.handoff import ADMIT_KIND

    is_marker = (F.col("record_type") == SERVICE_STATE) & (F.col("state_kind") == ADMIT_KIND)
    markers = log_df.where(is_marker).groupBy("partition").agg(F.max("offset").alias(_ADMITTED_BEFORE))
    joined = log_df.join(F.broadcast(markers), "partition", "left")
    copy = F.col("group_id").isNotNull() & (F.col("record_type") != SERVICE_STATE) & (
        F.col("offset") < F.col(_ADMITTED_BEFORE)
    )
    return joined.where(~F.coalesce(copy, F.lit(False))).select(*log_df.columns)


def owned_table(table: pa.Table) -> pa.Table:
    """The rows of one whole partition's `table` (its every record, `rows.arrow_schema()`) less
    the admitted copies (module rule)."""
    return split_admitted(table)[0]


def split_admitted(table: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """`owned_table(table)`, and the admitted copies it drops, in offset order (None: none).

    A summarized read gives the copies to `summary.summarize` as the moved keys' state before
    this partition's first record of them: the state their source's rows end with."""
    import pyarrow.compute as pc

    from coordinator.handoff import ADMIT_KIND  # here: the executors' workers load it only to use it

    is_service = pc.equal(table["record_type"], SERVICE_STATE)
    is_marker = pc.and_(is_service, pc.equal(table["state_kind"], ADMIT_KIND))
    last_marker = pc.max(pc.filter(table["offset"], pc.fill_null(is_marker, False))).as_py()
    if last_marker is None:
        return table, None
    copy = pc.fill_null(pc.and_(pc.invert(is_service), pc.less(table["offset"], last_marker)), False)
    copies = table.filter(copy)
    return table.filter(pc.invert(copy)), copies.take(pc.sort_indices(copies["offset"]))
