"""Live lag rows for `raygroups lag --live`, `describe` and `list`: the coordinator's, no Spark.

`Client.lag` asks every partition leader for the lag its tracker keeps
(coordinator/lag.py); this module turns the answer into the rows the CLI
prints: `raygroups lag`'s rows (spark_bridge/cli.py prints them, beside
Spark's, so both commands print one table), plus `lag_ms`, each partition's
`health` and `ahead` (committed past the reported end: lag 0, flagged).

`lag --live` for every group of a large service is a million rows: its table
takes the leaders' plain rows (`Client.lag_rows_async`) as they are, with no
dict made per row until printed, and its JSON is written by the leaders
themselves, each its own groups' rows at once (`Client.lag_json_async`,
coordinator/lag_json.py), one compact object per line; the client only puts the
groups in order (`LiveJson`), with no object made per row (DESIGN section 9).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from coordinator.lag import GroupLag, Health
from coordinator.lag_query import AHEAD, PartitionRow

LagKey = tuple[str, str, int]  # group, topic, partition
_HEALTH_NAMES = [health.name for health in sorted(Health)]


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
    """The leaders' `PartitionRow`s, sorted: `lag_rows`' dicts one at a time (for a table)."""

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


class LiveJson(Sequence[dict[str, Any]]):
    """`lag --live --json`'s rows as the leaders wrote them: per group, sorted, its id and
    its rows' text (`Client.lag_json_async`). Written as they are; as dicts (`LiveRows`'
    dicts), read back from the text, for a caller that wants them."""

    def __init__(self, texts: list[tuple[str, str]]) -> None:
        self.texts = texts

    def __len__(self) -> int:
        return sum(text.count("\n") for _, text in self.texts)

    def __getitem__(self, i: Any) -> Any:
        return list(self)[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for _, text in self.texts:
            for line in text.splitlines():
                yield _from_json(json.loads(line.rstrip(",")))

    def group_ids(self) -> set[str]:
        return {group_id for group_id, _ in self.texts}

    def json_partitions(self) -> str:
        """The rows as a JSON array, one compact object a line (as `raygroups lag --json`)."""
        if not self.texts:
            return "[]"
        pieces = [text for _, text in self.texts]
        pieces[-1] = pieces[-1][:-2]  # the last row's ",\n"
        return "".join(["[\n", *pieces, "\n]"])


def _from_json(row: dict[str, Any]) -> dict[str, Any]:
    seconds = row["lag_seconds"]
    return {
        "group_id": row["group"], "topic": row["topic"], "topic_partition": row["partition"],
        "current_offset": row["current_offset"], "log_end_offset": row["log_end_offset"], "lag": row["lag"],
        "lag_ms": None if seconds is None else round(seconds * 1000), "health": row["health"],
        "ahead": row["ahead"],
    }


def _as_dict(row: PartitionRow) -> dict[str, Any]:
    group_id, topic, partition, committed, end, lag, lag_ms, flags, health = row
    return {
        "group_id": group_id, "topic": topic, "topic_partition": partition, "current_offset": committed,
        "log_end_offset": end, "lag": lag, "lag_ms": lag_ms, "health": _HEALTH_NAMES[health],
        "ahead": bool(flags & AHEAD),
    }


def service_live_lag(args: argparse.Namespace) -> LiveRows | LiveJson:
    """`lag --live`: the running service's live lag of `args.groups` (every group when none).
    A one-shot question: the command may end its process at once when done (`exit_at_once`)."""
    from actors.client.connect import connect
    from actors.core.settings import DEFAULT_NAMESPACE

    with without_arrow():
        client = connect(args.ray_address, namespace=args.namespace or DEFAULT_NAMESPACE)
    args.exit_at_once = True
    # Every leader asked at once (the sync `Client.lag` asks them one after another).
    if getattr(args, "json", False):
        return LiveJson(asyncio.run(client.lag_json_async(args.groups or None)))
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
