"""The table of `raygroups status`, from the controller's status rows: pure, no Ray.

One row per offsets partition. `whole` (the `--json` output) keeps node ids,
lists and lags as they are; the printed table shows each node id by its first
`NODE_ID_CHARS` characters (as git shows short hashes) and joins lists with
commas, no blank, as Kafka's tools print replica lists, so that each cell is
one awk field. No value is cut: a failure is printed whole.
The replication columns (leader node, replicas, ISR, high watermark,
each follower's lag, health) appear when any partition has more than one
replica: with replication factor 1 the table is the one it always was.
REQ/S is the leader's requests per second over its last few seconds;
`raygroups capacity` (`capacity_table`) shows it against the rate
docs/capacity.md plans a partition at, so a hot partition stands out.
DISK-FAILED names each replica whose disk failed, with the error, since
when and the next retry (`actors.partition.recovery`); it heals by itself.
KAFKA is the leader's Kafka listener (host:port, `gateway.direct`), or why it
has none (no free port in its node's range, no plugin installed).

Health, as Kafka's `--unavailable-partitions` / `--under-replicated-partitions`
name it: OFFLINE (no leader: the partition serves nothing), HELD (offline
after a full restart found its history ambiguous, until an operator's unclean
election; FAILURE says why), UNDER-REPLICATED
(an ISR smaller than the replicas), ok. `failing` lists the partitions that
make the command exit 1: offline ones and leaders that refuse to serve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from actors.core.capacity import load_share, planned_rate

BASE_COLUMNS = [
    "PARTITION", "EPOCH", "STATE", "NODE", "GROUPS", "MEMBERS", "REQ/S", "LOG-END", "LOAD-MS", "REFUSED",
    "FAILURE", "DISK-FAILED", "KAFKA",
]
REPLICATED_COLUMNS = [
    "PARTITION", "EPOCH", "STATE", "LEADER-NODE", "REPLICAS", "ISR", "HWM", "LOG-END", "FOLLOWER-LAG",
    "HEALTH", "GROUPS", "MEMBERS", "REQ/S", "LOAD-MS", "REFUSED", "FAILURE", "DISK-FAILED", "KAFKA",
]
CAPACITY_COLUMNS = ["PARTITION", "NODE", "REPLICAS", "GROUPS", "MEMBERS", "REQ/S", "PLANNED", "LOAD"]
# A Ray node id has 56 hex characters; 8 tell a cluster's nodes apart.
NODE_ID_CHARS = 8
OFFLINE, HELD, UNDER_REPLICATED, HEALTHY = "OFFLINE", "HELD", "UNDER-REPLICATED", "ok"


def is_replicated(rows: Sequence[Mapping[str, Any]]) -> bool:
    return any(len(row.get("replicas") or ()) > 1 for row in rows)


def status_table(rows: Sequence[Mapping[str, Any]], whole: bool) -> tuple[list[str], list[list[Any]]]:
    """The columns and cells of the status table (module docstring)."""
    if is_replicated(rows):
        return REPLICATED_COLUMNS, [_replicated_cells(row, whole) for row in rows]
    return BASE_COLUMNS, [_base_cells(row, whole) for row in rows]


def health(row: Mapping[str, Any]) -> str:
    if row.get("held"):
        return HELD
    if row.get("offline"):
        return OFFLINE
    return UNDER_REPLICATED if row.get("under_replicated") else HEALTHY


def failing(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Any]]:
    """The offline partitions and the refusing ones: either makes `status` exit 1."""
    offline = [row.get("partition") for row in rows if row.get("offline")]
    refused = [row.get("partition") for row in rows if row.get("refused")]
    return offline, refused


def under_replicated(rows: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [row.get("partition") for row in rows if health(row) == UNDER_REPLICATED]


def node_text(node_id: str | None, whole: bool) -> str | None:
    if node_id is None or whole:
        return node_id
    return node_id[:NODE_ID_CHARS]


def nodes_text(node_ids: Sequence[str] | None, whole: bool) -> Any:
    if node_ids is None:
        return None
    if whole:
        return list(node_ids)
    return ",".join(node_id[:NODE_ID_CHARS] for node_id in node_ids)


def lag_text(followers: Mapping[str, Mapping[str, Any]] | None, whole: bool) -> Any:
    """Each follower's lag behind the leader's log end, in records (`?`: not heard from yet)."""
    if followers is None:
        return None
    lags = {replica: view.get("lag") for replica, view in followers.items()}
    if whole:
        return lags
    return ",".join(f"{node[:NODE_ID_CHARS]}:{'?' if lag is None else lag}" for node, lag in lags.items())


def _base_cells(row: Mapping[str, Any], whole: bool) -> list[Any]:
    return [
        row.get("partition"),
        row.get("epoch"),
        row.get("state"),
        node_text(row.get("node_id"), whole),
        row.get("groups"),
        row.get("members"),
        row.get("requests_per_s"),
        row.get("durable_end"),
        *_tail_cells(row, whole),
    ]


def _replicated_cells(row: Mapping[str, Any], whole: bool) -> list[Any]:
    return [
        row.get("partition"),
        row.get("epoch"),
        row.get("state"),
        node_text(row.get("leader_node") or row.get("node_id"), whole),
        nodes_text(row.get("replicas"), whole),
        nodes_text(row.get("isr"), whole),
        row.get("high_watermark"),
        row.get("durable_end"),
        lag_text(row.get("followers"), whole),
        health(row),
        row.get("groups"),
        row.get("members"),
        row.get("requests_per_s"),
        *_tail_cells(row, whole),
    ]


def disks_text(disks: Mapping[str, Mapping[str, Any]] | None, whole: bool) -> Any:
    """The replicas whose disk failed: which error, since when, the next retry (UTC)."""
    if whole or not disks:
        return disks or None
    return "; ".join(
        f"{node[:NODE_ID_CHARS]}: {disk.get('last_error') or disk.get('error')} "
        f"(since {_utc(disk.get('since_ms'))}, next retry {_utc(disk.get('next_retry_ms'))})"
        for node, disk in disks.items()
    )


def _utc(ms: Any) -> str:
    if type(ms) is not int:
        return "?"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3] + "Z"


def _tail_cells(row: Mapping[str, Any], whole: bool) -> list[Any]:
    refused = "yes" if row.get("refused") else "no"
    return [
        row.get("load_ms"), refused, row.get("failure"), disks_text(row.get("disks"), whole),
        kafka_text(row.get("kafka"), whole),
    ]


def kafka_text(listener: Mapping[str, Any] | None, whole: bool) -> Any:
    """The leader's Kafka listener (gateway.direct): host:port, or why it has none."""
    if whole or not listener:
        return listener or None
    if "error" in listener:
        return f"none: {listener['error']}"
    return f"{listener['host']}:{listener['port']}"


def capacity_table(rows: Sequence[Mapping[str, Any]], whole: bool) -> tuple[list[str], list[list[Any]]]:
    """`raygroups capacity`: each partition's request rate against its planned rate. LOAD is a
    fraction with `whole` (the `--json` output), else a percentage; past 1 (100%) is hot."""
    cells = []
    for row in rows:
        share = load_share(row)
        if share is not None:
            share = round(share, 4) if whole else f"{share:.0%}"
        cells.append([
            row.get("partition"),
            node_text(row.get("leader_node") or row.get("node_id"), whole),
            len(row.get("replicas") or ()) or None,
            row.get("groups"),
            row.get("members"),
            row.get("requests_per_s"),
            planned_rate(row),
            share,
        ])
    return CAPACITY_COLUMNS, cells


def hot(rows: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The partitions whose leader serves more than its planned rate."""
    return [row.get("partition") for row in rows if (load_share(row) or 0.0) > 1.0]
