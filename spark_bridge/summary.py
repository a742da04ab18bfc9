"""Summarized reads: each read task turns a partition's offset commits into what the
report's tables need, so Spark never holds a row per commit.

Owns the rows of a summarized read (`summarize`, `SUMMARY_COLUMNS`). The
tables (`spark_bridge.jobs`) read offset commits only as:
- the newest record of each key (group, topic, partition) by offset
  (committed offsets, lag, idle and expired groups);
- the first and last batch time (the data's span, the windows' grid);
- the highest offset committed to each topic partition (the end offsets
  standing in when none are given);
- per group and time window (`window_ms`, epoch-aligned): its commits (not
  tombstones), the partitions they went to (commit rate), and how its lag
  changes (lag over time, measured against those highest commits).
A task reads a whole offsets partition, so it holds every record of its
groups. It keeps, of the offset commits, each key's newest by offset, the
partition's oldest and newest by time, and each topic partition's highest
live commit; every other record (group metadata, KIP-848's records: about
1% of a log) whole. To these it adds two kinds of summary rows, whose
`batch_timestamp` is null (so the span and grid read only records):
- WINDOW_ROW per group and window with offset records: `commits`,
  `partitions` (distinct topic partitions committed), and
  `committed_change`: the change over the window of the sum of the group's
  live committed offsets, each key as of its newest record by (time,
  offset) in the window;
- LIVE_ROW per key and window where the key starts or stops being live (its
  newest record is a commit, not a tombstone): `live_change` +1 or -1.
With every key's end offset at least its commits (true of the highest
commit), a group's lag at the end of a window is the sum over its windows so
far of `end x live_change` minus `committed_change`: the same as the lag of
each key as of each window (`jobs.lag_over_time`), at a cost of groups times
windows rather than commits. The differential tests compare every table.

Pure Arrow and numpy, no Spark: it runs in the executors' Python workers."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from spark_bridge.rows import COLUMNS, OFFSET_COMMIT, arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

WINDOW_ROW = "window_summary"
LIVE_ROW = "live_change"
# Added to the rows' COLUMNS; null on records.
SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("window_start_ms", "long"),
    ("commits", "long"),
    ("partitions", "int"),
    ("committed_change", "long"),
    ("live_change", "int"),
)
SUMMARIZED_COLUMNS = COLUMNS + SUMMARY_COLUMNS


def check_window(window_ms: int) -> None:
    """A time window: an int of at least 1 ms, else ValueError."""
    if type(window_ms) is not int or window_ms < 1:
        raise ValueError(f"window_ms must be >= 1 (an int of milliseconds), got {window_ms!r}")


def summarize(table: pa.Table, window_ms: int, baseline: pa.Table | None = None) -> pa.Table:
    """The summarized rows (module rules) of `table`, every record of one offsets partition:
    the records kept, in the table's order, then the summary rows.

    `baseline`: records (in offset order) that are no rows of their own but each key's state
    before `table`'s first record of it: a moved group's admitted copies
    (`spark_bridge.ownership`), so the key's changes here start from the state its source
    holds, and the source's and this partition's changes sum to the group's. They are
    kept as records too (after `table`'s), for the current state."""
    import pyarrow as pa
    import pyarrow.compute as pc

    check_window(window_ms)
    schema = arrow_schema(SUMMARIZED_COLUMNS)
    is_commit = pc.equal(table["record_type"], OFFSET_COMMIT).to_numpy(zero_copy_only=False)
    commit_rows = np.flatnonzero(is_commit)
    kept = np.flatnonzero(~is_commit)
    parts = []
    if len(commit_rows):
        before = None
        if baseline is not None:
            before = baseline.filter(pc.equal(baseline["record_type"], OFFSET_COMMIT))
        commits = _Commits(table, commit_rows, window_ms, before)
        kept = np.union1d(kept, commits.rows[commits.kept_records()])  # the table's order
        parts = [commits.window_rows(schema), commits.live_rows(schema)]
    records = table.take(kept)
    if baseline is not None:
        records = pa.concat_tables([records, baseline.cast(records.schema)])
    nulls = [pa.nulls(len(records), schema.field(name).type) for name, _ in SUMMARY_COLUMNS]
    records = pa.Table.from_arrays([*records.columns, *nulls], schema=schema)
    return pa.concat_tables([records, *parts])


_READ = ("batch_timestamp", "tombstone", "committed_offset", "group_id", "topic", "topic_partition")


class _Commits:
    """A partition's offset commits (rows `rows` of its table) sorted by key, window and time
    into runs: one run per key and window, its last row the newest by (time, offset).
    Indices below are into `rows`, in offset order."""

    def __init__(
        self, table: pa.Table, rows: np.ndarray, window_ms: int, baseline: pa.Table | None = None
    ) -> None:
        # In offset order: a later row is a later record (the decoder may put them otherwise).
        offsets = _ints(table["offset"])[rows]
        reordered = bool(np.any(offsets[1:] < offsets[:-1]))
        if reordered:
            rows = rows[np.argsort(offsets, kind="stable")]
        self.table, self.rows = table, rows
        commits = table.select(list(_READ))
        if reordered or len(rows) < len(table):
            commits = commits.take(rows)
        count = len(rows)
        if baseline is not None and len(baseline):  # coded with the commits: one key, one code
            import pyarrow as pa

            commits = pa.concat_tables([commits, baseline.select(list(_READ)).cast(commits.schema)])
        self.ts = _ints(commits["batch_timestamp"])
        self.live = ~commits["tombstone"].to_numpy(zero_copy_only=False)
        self.committed = _ints(commits["committed_offset"].fill_null(0))
        self.group = _codes(commits["group_id"])
        topic_partition = _ints(commits["topic_partition"])
        self.partition_key = _pair_codes(_codes(commits["topic"]), topic_partition - topic_partition.min())
        self.key = _pair_codes(self.group, self.partition_key)
        self._split_baseline(count)
        ts = self.ts
        self.window = ts - ts % window_ms  # Spark's pmod for a positive divisor
        key_window = _pair_codes(self.key, (self.window - self.window.min()) // window_ms)
        # Stable sorts keep log (offset) order among equals: by time within each key and window.
        if np.all(ts[1:] >= ts[:-1]):
            order = np.argsort(key_window, kind="stable")
        else:
            order = np.lexsort((ts, key_window))
        self.order = order
        self.starts = _run_starts(key_window[order])
        self.newest = order[np.r_[self.starts[1:], len(order)] - 1]

    def _split_baseline(self, count: int) -> None:
        """Keep the first `count` rows (the commits); the rest, the baseline, become each key's
        state before its first commit here (`base_live`, `base_value` by key code)."""
        key = self.key
        self.base_live = np.zeros(int(key.max(initial=0)) + 1, dtype=bool)
        self.base_value = np.zeros(len(self.base_live), dtype=np.int64)
        if len(key) > count:
            base_keys = key[count:][::-1]  # the newest of each key first
            keys, first = np.unique(base_keys, return_index=True)
            self.base_live[keys] = self.live[count:][::-1][first]
            self.base_value[keys] = np.where(self.base_live[keys], self.committed[count:][::-1][first], 0)
        for name in ("ts", "live", "committed", "group", "partition_key", "key"):
            setattr(self, name, getattr(self, name)[:count])

    def kept_records(self) -> np.ndarray:
        """Rows kept whole: each key's newest by offset, the oldest and newest by time, each
        topic partition's highest live commit."""
        order, key = self.order, self.key
        key_starts = _run_starts(key[order])
        newest_by_offset = np.maximum.reduceat(order, key_starts)  # a later row has a higher offset
        best = np.full(int(self.partition_key.max()) + 1, np.iinfo(np.int64).min)
        live = np.flatnonzero(self.live)
        np.maximum.at(best, self.partition_key[live], self.committed[live])
        top = live[self.committed[live] == best[self.partition_key[live]]]
        ts = self.ts
        oldest, newest = np.flatnonzero(ts == ts.min())[0], np.flatnonzero(ts == ts.max())[-1]
        return np.unique(np.concatenate([newest_by_offset, top, [oldest, newest]]))

    @cached_property
    def states(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per run (key and window): live and committed value at its end, and before it."""
        newest = self.newest
        live = self.live[newest]
        value = np.where(live, self.committed[newest], 0)
        keys = self.key[newest]
        same_key = np.r_[False, keys[1:] == keys[:-1]]
        live_before = np.where(same_key, np.r_[False, live[:-1]], self.base_live[keys])
        value_before = np.where(same_key, np.r_[0, value[:-1]], self.base_value[keys])
        return live, value, live_before, value_before

    def _source(self, indices: np.ndarray, columns: tuple[str, ...]) -> pa.Table:
        return self.table.select(list(columns)).take(self.rows[indices])

    def window_rows(self, schema: pa.Schema) -> pa.Table:
        _, value, _, value_before = self.states
        runs_live = np.add.reduceat(self.live[self.order].astype(np.int64), self.starts)
        newest = self.newest
        group, window = self.group[newest], self.window[newest]
        order = np.lexsort((window, group))
        starts = _run_starts(group[order], window[order])
        first = order[starts]
        return _summary_rows(schema, WINDOW_ROW, self._source(newest[first], ("group_id",)), {
            "window_start_ms": window[first],
            "commits": np.add.reduceat(runs_live[order], starts),
            "partitions": np.add.reduceat((runs_live[order] > 0).astype(np.int32), starts),
            "committed_change": np.add.reduceat((value - value_before)[order], starts),
        })

    def live_rows(self, schema: pa.Schema) -> pa.Table:
        live, _, live_before, _ = self.states
        changed = np.flatnonzero(live != live_before)
        key_columns = ("group_id", "topic", "topic_partition")
        return _summary_rows(schema, LIVE_ROW, self._source(self.newest[changed], key_columns), {
            "window_start_ms": self.window[self.newest[changed]],
            "live_change": np.where(live[changed], 1, -1).astype(np.int32),
        })


def _summary_rows(schema: pa.Schema, kind: str, source: pa.Table, values: dict[str, np.ndarray]) -> pa.Table:
    """Summary rows of `kind`: the columns of `source`, `values`, the rest null."""
    import pyarrow as pa

    n = len(source)
    columns = []
    for field in schema:
        if field.name == "record_type":
            columns.append(pa.repeat(pa.scalar(kind, field.type), n))
        elif field.name in source.column_names:
            columns.append(source[field.name].combine_chunks())
        elif field.name in values:
            columns.append(pa.array(values[field.name], field.type))
        else:
            columns.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _ints(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)


def _codes(column: pa.ChunkedArray) -> np.ndarray:
    """Each string's index among the column's distinct values."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column.combine_chunks())
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def _pair_codes(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """A code per distinct (first, second) pair of non-negative codes, in the order of
    (first, second); made dense when it could otherwise overflow a later pairing."""
    span = int(second.max(initial=0)) + 1
    combined = first * span + second
    if (int(first.max(initial=0)) + 1) * span < 1 << 31:
        return combined
    return np.unique(combined, return_inverse=True)[1].astype(np.int64)


def _run_starts(*columns: np.ndarray) -> np.ndarray:
    """Where each run of equal values (in every column at once) starts, in sorted columns."""
    changed = np.zeros(len(columns[0]), dtype=bool)
    changed[0] = True
    for column in columns:
        changed[1:] |= column[1:] != column[:-1]
    return np.flatnonzero(changed)
