"""Lag as Spark columns: the column form of the one definition of lag in `coordinator/lag.py`.

Every Spark job that measures lag builds it here, so Spark's `raygroups lag`,
its lag over time and the coordinator's live lag mean the same thing:
`lag_column(end, committed)` is `coordinator.lag.lag_messages` (end minus
committed, never below 0; null, unknown, without an end), and an end "as of"
a window is `coordinator.lag.end_as_of` (the partition's latest sample at or
before it: `jobs._as_of`). tests/spark/test_live_agrees.py holds the column
to the Python definition case by case, and the live figures to Spark's row
for row. (The summarized log's lag over time sums the same lag by its changes;
there every end is a highest commit, never below a committed offset, so the
clamp never applies: `jobs._lag_over_time_of_summary`.)
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def lag_column(end: Column, committed: Column) -> Column:
    """`coordinator.lag.lag_messages` as a column: max(end - committed, 0), null without an end."""
    return F.when(end.isNotNull(), F.greatest(end - committed, F.lit(0)))
