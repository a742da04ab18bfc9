"""Live lag rows for `raygroups lag --live`, `describe` and `list`: the coordinator's, no Spark.

`Client.lag` asks every partition leader for the lag its tracker keeps
(coordinator/lag.py); this module turns the answer into the rows the CLI
prints: `raygroups lag`'s rows (spark_bridge/cli.py prints them, beside
Spark's, so both commands print one table), plus `lag_ms`, each partition's
`health` and `ahead` (committed past the reported end: lag 0, flagged).

`lag --live` for every group of a large service is a million rows: it takes
the leaders' plain rows (`Client.lag_rows_async`) as they are, and its JSON is
written column by column (`LiveRows.json_partitions`), one compact object per
line, with no dict or object made per row (DESIGN section 9).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from json.encoder import encode_basestring_ascii
from typing import Any

from coordinator.lag import GroupLag, Health
from coordinator.lag_query import AHEAD, PartitionRow

LagKey = tuple[str, str, int]  # group, topic, partition
_CHUNK_ROWS = 4_096  # rows written by one `%`
_HEALTH_NAMES = [health.name for health in sorted(Health)]
# One row of `raygroups lag --live --json` (spark_bridge/cli.py `_lag_json`'s keys, in order).
_JSON_ROW = (
    '{"group":%s,"topic":%s,"partition":%s,"current_offset":%s,"log_end_offset":%s,"lag":%s,'
    '"lag_seconds":%s,"health":"%s","ahead":%s}'
)


def lag_rows(groups: Iterable[GroupLag]) -> list[dict[str, Any]]:
    """One row per committed offset, sorted by group, topic and partition."""
    return [
        {
            "group_id": group.group_id, "topic": p.topic, "topic_partition": p.partition,
            "current_offset": p.committed, "log_end_offset": p.end, "lag": p.lag, "lag_ms": p.lag_ms,
            "health": p.health.name, "ahead": p.ahead,
        }
        for group in groups
        for p in group.partitions
    ]


class LiveRows(Sequence[dict[str, Any]]):
    """The leaders' `PartitionRow`s, sorted: `lag_rows`' dicts one at a time (for a table),
    or the JSON of all of them built column by column."""

    def __init__(self, rows: list[PartitionRow]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [_as_dict(row) for row in self.rows[i]]
        return _as_dict(self.rows[i])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(_as_dict, self.rows)

    def group_ids(self) -> set[str]:
        return {row[0] for row in self.rows}

    def json_partitions(self) -> str:
        """The rows as a JSON array (`_lag_json`'s objects, live), one compact object a line."""
        if not self.rows:
            return "[]"
        # Row-major as the JSON is, each column transformed in place by a slice, one `%` per
        # chunk of rows: every loop runs in C but the nullable columns' comprehensions.
        flat = list(chain.from_iterable(self.rows))
        width = len(self.rows[0])  # group, topic, partition, committed, end, lag, lag_ms, flags, health
        topics = {topic: encode_basestring_ascii(topic) for topic in set(flat[1::width])}
        flat[0::width] = map(encode_basestring_ascii, flat[0::width])
        flat[1::width] = map(topics.__getitem__, flat[1::width])
        flat[4::width] = _nullable(flat[4::width])
        flat[5::width] = _nullable(flat[5::width])
        flat[6::width] = ["null" if ms is None else ms / 1000 for ms in flat[6::width]]
        flat[7::width] = ["true" if f & AHEAD else "false" for f in flat[7::width]]
        flat[8::width] = map(_HEALTH_NAMES.__getitem__, flat[8::width])
        flat[7::width], flat[8::width] = flat[8::width], flat[7::width]  # health, then ahead
        chunk = _CHUNK_ROWS * width
        whole = (_JSON_ROW + ",\n") * _CHUNK_ROWS
        parts = [whole % tuple(flat[i:i + chunk]) for i in range(0, len(flat) - chunk + 1, chunk)]
        rest = len(flat) % chunk // width
        if rest:
            parts.append((_JSON_ROW + ",\n") * rest % tuple(flat[-rest * width:]))
        return "[\n" + "".join(parts)[:-2] + "\n]"


def _nullable(column: list[Any]) -> list[Any]:
    """`null` for None; the rest as they are (`%s` writes an int, or a float, as JSON does)."""
    return ["null" if value is None else value for value in column]


def _as_dict(row: PartitionRow) -> dict[str, Any]:
    group_id, topic, partition, committed, end, lag, lag_ms, flags, health = row
    return {
        "group_id": group_id, "topic": topic, "topic_partition": partition, "current_offset": committed,
        "log_end_offset": end, "lag": lag, "lag_ms": lag_ms, "health": _HEALTH_NAMES[health],
        "ahead": bool(flags & AHEAD),
    }


def service_live_lag(args: argparse.Namespace) -> LiveRows:
    """`lag --live`: the running service's live lag of `args.groups` (every group when none).
    A one-shot question: the command may end its process at once when done (`exit_at_once`)."""
    from actors.client.connect import connect
    from actors.core.settings import DEFAULT_NAMESPACE

    with without_arrow():
        client = connect(args.ray_address, namespace=args.namespace or DEFAULT_NAMESPACE)
    args.exit_at_once = True
    # Every leader asked at once (the sync `Client.lag` asks them one after another).
    return LiveRows(asyncio.run(client.lag_rows_async(args.groups or None)))


@contextlib.contextmanager
def without_arrow() -> Iterator[None]:
    """Ray's first serialization context in a process imports pyarrow (and numpy) to
    register Ray Data's Arrow serializers: a quarter of a fresh `lag --live`'s time, for
    answers of plain tuples. Where pyarrow is not imported yet, it is hidden while the
    client connects (its first call makes the context), then visible again: a later Arrow
    object in this process is pickled by Arrow's own reduce, correct if larger."""
    if "pyarrow" in sys.modules:
        yield
        return
    sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import raises ModuleNotFoundError
    try:
        yield
    finally:
        if sys.modules.get("pyarrow", 0) is None:
            del sys.modules["pyarrow"]
