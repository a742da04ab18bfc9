"""Which partition a group's records belong to, once groups have moved: one rule for every job.

A repartition (coordinator/handoff.py, docs/capacity.md) hands a group g from partition p to
partition t: t writes copies of g's records (its classic metadata or KIP-848 records, its
committed offsets with their original commit timestamps: "the admit"), then p writes its
switch record, and from then on only t writes g's records. p's log keeps g's older records
(growing), or p is retired and its log is no longer read (shrinking). So a moved group's
records may be in two logs, and its last state before the move in both.

The rule: a group's records belong to the partition that owned it when they were written.
The admit ends with a marker in t's own log (`handoff.ADMIT_KIND`, data "version;count"):
the `count` records before it are the copies, written while t did not own g yet. Both
marker and copies are in t's own log, so nothing needs an order between two logs (their
offsets are unrelated, their batch times come from two clocks). Two uses:
- History (commit rates, rebalance histories): the copies are dropped (`_copy`), so each
  commit and generation counts once, when it happened, in the partition that owned it.
- Current state (committed offsets, lag, expired groups): a key's newest record is the
  newest by (`_era`, offset), `_era` being the version of the latest admit at or before
  the record in its partition (0 before any). A group's next owner admitted it in a later
  repartition than the one that gave it to the previous owner, so its records there come
  after every record of the previous owner's, whichever partition numbers they have. The
  copies stay: they equal the state the source ended with, and after a shrink, whose
  source logs are retired, they are that state.
`annotate` adds both columns to a log DataFrame from its markers: a few rows per
repartition, collected to the driver and turned into one expression, so no row of the log
comes to the driver and no join is made (the log is scanned once more for them unless the
caller cached it, as the commands do). A summarized read applies the rule in its
per-partition task (`split_admitted`): the copies are no commits there, but each moved
key's state before the target's first record of it, so the source's last state plus the
target's changes is the group's lag over time; they are kept as records for the current
state. A log without markers gets `_copy` false and `_era` 0: every row as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa

from spark_bridge.rows import SERVICE_STATE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ERA = "_era"
COPY = "_copy"


class Admit(NamedTuple):
    """One admit: its marker's place, the repartition's version, the records before it."""

    partition: int
    offset: int
    version: int
    count: int


def parse_admit(partition: int, offset: int, data: bytes | None) -> Admit:
    version, count = (data or b"0;0").decode("ascii").split(";")
    return Admit(partition, offset, int(version), int(count))


def admits(log_df: DataFrame) -> list[Admit]:
    """The admits the log's markers record (a few rows: collected)."""
    from pyspark.sql import functions as F

    from coordinator.handoff import ADMIT_KIND

    is_marker = (F.col("record_type") == SERVICE_STATE) & (F.col("state_kind") == ADMIT_KIND) & ~F.col(
        "tombstone"
    )
    rows = log_df.where(is_marker).select("partition", "offset", "state_data").collect()
    return [parse_admit(int(row[0]), int(row[1]), row[2]) for row in rows]


def annotate(log_df: DataFrame) -> DataFrame:
    """`log_df` with `_copy` (an admitted copy) and `_era` (module rule)."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    found = admits(log_df)
    partition, offset = F.col("partition"), F.col("offset")
    copy: Column = F.lit(False)
    era: Column = F.lit(0)
    # Latest first: within a partition a later admit is of the same or a later repartition.
    for admit in sorted(found, key=lambda a: (a.partition, a.offset)):
        start = admit.offset - admit.count
        here = partition == admit.partition
        copy = copy | (here & (offset >= start) & (offset < admit.offset))
        era = F.when(here & (offset >= start), F.lit(admit.version)).otherwise(era)
    is_copy = F.coalesce(copy & (F.col("record_type") != SERVICE_STATE), F.lit(False))
    return log_df.withColumn(COPY, is_copy).withColumn(ERA, F.coalesce(era, F.lit(0)))


def split_admitted(table: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """One whole partition's rows (`table`, `rows.arrow_schema()`) less its admitted copies,
    and the copies, in offset order (None: none)."""
    import numpy as np
    import pyarrow.compute as pc

    from coordinator.handoff import ADMIT_KIND  # here: the executors' workers load it only to use it

    is_marker = pc.fill_null(pc.and_(
        pc.equal(table["record_type"], SERVICE_STATE), pc.equal(table["state_kind"], ADMIT_KIND)
    ), False)
    markers = table.filter(is_marker)
    if not len(markers):
        return table, None
    offsets = table["offset"].to_numpy()
    copy = np.zeros(len(table), dtype=bool)
    for offset, data in zip(markers["offset"].to_pylist(), markers["state_data"].to_pylist()):
        admit = parse_admit(0, offset, data)
        copy |= (offsets >= offset - admit.count) & (offsets < offset)
    copy &= ~is_marker.to_numpy(zero_copy_only=False)
    copies = table.filter(pa.array(copy))
    return table.filter(pa.array(~copy)), copies.take(pc.sort_indices(copies["offset"]))
