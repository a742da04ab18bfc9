"""The replicated demo, `raygroups demo --replicated`: a node and its disk lost while consumers commit.

On a simulated cluster of four nodes on this machine (`sim_cluster`: a head
and three workers, each with its own directory as its local disk) it starts
the service with replication factor 3 and min ISR 2, runs one consumer group
per offsets partition (`GroupMember`s in this process, on the head node, that
consume and commit several times a second), shows the status rows, removes
the worker that leads the most partitions (never the head, never the
controller's node) and deletes its disk, then shows the new leaders, how long
each affected partition went without a successful commit, checks that every
acknowledged commit is still there, and shows the status again (the lost
node's partitions are under-replicated until `replica_reassign_delay_s`).

Rules: nothing acknowledged may be lost, and the exit status says so (1 when
a commit is missing); everything it started is stopped on the way out, an
error included (`sim_cluster`).
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.cluster_utils import Cluster
from rich.console import Console

import actors
from actors.cli import tables
from actors.cli.status_table import NODE_ID_CHARS, health, under_replicated
from actors.client.retry import CoordinatorUnavailableError
from actors.core.settings import ServiceSettings
from actors.demo.embedded import DemoGroup, demo_member
from actors.demo.sim_cluster import (
    FAST_NODE_FAILURE,
    fully_replicated,
    node_disk,
    quick_failover_settings,
    remove_with_disk,
    simulated_cluster,
    wait_for,
    worker_node,
)
from actors.demo.sim_cluster import status_rows as rows
from actors.member.api import CommitFailedError
from coordinator import CoordinatorConfig
from coordinator.records import OffsetCommitKey, OffsetCommitValue
from log import LogReader, replica_dir

console = Console()
NAMESPACE = "raygroups-demo-replicated"
WORKERS = 3
PARTITIONS = 4
# One group per offsets partition (Kafka's hash of these names lands on 0, 1, 2 and 3).
GROUPS = (
    DemoGroup("search", "clicks", 4, 2, "range", 40),
    DemoGroup("orders-app", "orders", 4, 2, "range", 40),
    DemoGroup("shipping", "orders", 4, 2, "roundrobin", 40),
    DemoGroup("billing", "payments", 4, 2, "cooperative-sticky", 40),
)
COMMIT_INTERVAL_S = 0.1


def demo_settings(data_dir: str) -> ServiceSettings:
    # No compaction while the demo runs: the check finds every commit's record in the log.
    return quick_failover_settings(data_dir, NAMESPACE, PARTITIONS, compaction_interval_s=3_600.0)


@dataclass(frozen=True)
class Ack:
    """One acknowledged commit: when, and the offsets it committed."""

    at: float
    offsets: dict[tuple[str, int], int]


class CommittingConsumer:
    """A `GroupMember` in this process that consumes its partitions and commits
    every `COMMIT_INTERVAL_S`, remembering what was acknowledged and when."""

    def __init__(self, group: DemoGroup, name: str) -> None:
        self.group_id = group.group_id
        self.acks: list[Ack] = []
        self.error: Exception | None = None
        self._positions: dict[Any, int] = {}
        self.member = demo_member(actors.connect(namespace=NAMESPACE, timeout_s=20.0), group, name)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._consume, daemon=True)
        self._thread.start()

    def _consume(self) -> None:
        try:
            while not self._stop.wait(COMMIT_INTERVAL_S):
                try:
                    self._step()
                except (CommitFailedError, CoordinatorUnavailableError, ray.exceptions.RayError):
                    continue  # a rebalance, or no coordinator for 20 s: the next round tries again
        except Exception as exc:  # a consumer must not stop silently: the demo fails on it
            self.error = exc

    def _step(self) -> None:
        owned = self.member.poll()
        # A partition that comes back after a rebalance resumes from the committed offset.
        self._positions = {tp: pos for tp, pos in self._positions.items() if tp in owned}
        if not owned:
            return
        new = owned - self._positions.keys()
        for tp, committed in (self.member.committed(new) if new else {}).items():
            self._positions[tp] = max(committed.offset, 0) if committed is not None else 0
        for tp in owned:
            self._positions[tp] += random.randint(1, 20)
        self.member.commit({tp: self._positions[tp] for tp in owned})
        offsets = {(tp.topic, tp.partition): self._positions[tp] for tp in owned}
        self.acks.append(Ack(time.monotonic(), offsets))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.member.close()


@dataclass(frozen=True)
class Removal:
    """A node removed with its disk: the partitions it led, the rows before, and the window watched."""

    victim: str
    led: list[int]
    before: dict[int, dict[str, Any]]
    removed: float
    ended: float


# Written into the demo's data directory: a later run may empty it.
DEMO_MARKER = ".raygroups-demo"


def run_replicated_demo(data_dir: str, seconds: float = 8.0) -> int:
    """Run the demo in `data_dir` (emptied first, kept afterwards); 0 when nothing was lost.

    Only a directory an earlier demo made (its marker file) or an empty one
    is emptied: a data directory given by mistake is refused, not wiped."""
    marker = os.path.join(data_dir, DEMO_MARKER)
    if os.path.isdir(data_dir) and os.listdir(data_dir) and not os.path.exists(marker):
        raise ValueError(f"{data_dir} is not empty and no demo made it: give an empty or new directory")
    shutil.rmtree(data_dir, ignore_errors=True)
    os.makedirs(data_dir)
    open(marker, "w").close()
    with simulated_cluster(
        WORKERS, NAMESPACE, "raygroups-demo-", data_dir, FAST_NODE_FAILURE
    ) as (cluster, path):
        try:
            return _run(cluster, path, seconds)
        finally:
            actors.stop(NAMESPACE)


def _run(cluster: Cluster, data_dir: str, seconds: float) -> int:
    console.rule("raygroups demo: replication")
    client = actors.start(
        settings=demo_settings(data_dir), namespace=NAMESPACE, address=cluster.address,
        ray_credentials=False,  # a demo's consumers connect without a credential (docs/security.md)
        coordinator_config=CoordinatorConfig(group_initial_rebalance_delay_ms=500),
    )
    placed = {client.partition_for(g.group_id) for g in GROUPS}
    assert placed == set(range(PARTITIONS)), f"the demo wants a group on every partition: {placed}"
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    stats: dict[str, Any] = ray.get(client.controller.stats.remote(), timeout=60)
    nodes = NodeNames(cluster, stats["node_id"])
    nodes.print_legend(cluster.address, data_dir)
    consumers = [CommittingConsumer(g, f"{g.group_id}-c{i}") for g in GROUPS for i in range(g.consumers)]
    try:
        wait_for("the groups stable", lambda: all(
            d.state == "Stable" for d in client.describe_groups([g.group_id for g in GROUPS])
        ))
        console.print(f"{len(GROUPS)} groups, one per offsets partition: {len(consumers)} consumers "
                      f"committing every {COMMIT_INTERVAL_S} s; replication factor 3, min ISR 2")
        removal = remove_busiest_node(client, cluster, data_dir, nodes, seconds)
    finally:
        for consumer in consumers:
            consumer.close()
    stopped = [c for c in consumers if c.error is not None]
    if stopped:
        raise RuntimeError(f"a consumer of {stopped[0].group_id} stopped") from stopped[0].error
    print_elections(client, removal, consumers, nodes)
    lost = print_losses(client, data_dir, consumers)
    wait_for("the lost node out of every ISR", lambda: all(
        removal.victim not in r["isr"] for r in rows(client).values()
    ))
    after = rows(client)
    print_status("offsets partitions after the loss", after, nodes)
    console.print(f"under-replicated partitions: {under_replicated(list(after.values()))}; the lost node's "
                  "replicas move to a live node after replica_reassign_delay_s (300 s by default)")
    return 1 if lost else 0


def remove_busiest_node(
    client: actors.Client, cluster: Cluster, data_dir: str, nodes: NodeNames, seconds: float
) -> Removal:
    """Remove the busiest worker with its disk `seconds / 2` into the load, and
    watch for `seconds / 2` more once its partitions have new leaders."""
    victim = choose_victim(client, cluster, nodes)
    before = rows(client)
    print_status("offsets partitions", before, nodes)
    led = sorted(p for p, r in before.items() if r["leader_node"] == victim)
    time.sleep(seconds / 2)
    console.print(f"[bold red]removing node {nodes(victim)}[/], leader of partitions {led}, "
                  f"and deleting its disk {node_disk(data_dir, victim)}")
    removed = time.monotonic()
    remove_with_disk(cluster, worker_node(cluster, victim), data_dir)
    wait_for("new leaders", lambda: all(rows(client)[p].get("leader_node") not in (None, victim)
                                         for p in led))
    time.sleep(seconds / 2)
    return Removal(victim, led, before, removed, time.monotonic())


def choose_victim(client: actors.Client, cluster: Cluster, nodes: NodeNames) -> str:
    """The worker without the controller that leads the most partitions. If those
    workers lead none, one is made a leader first, as an operator would."""
    candidates = [w.node_id for w in cluster.worker_nodes if w.node_id != nodes.controller]
    now = rows(client)
    leads = {n: sum(1 for r in now.values() if r["leader_node"] == n) for n in candidates}
    victim: str = max(candidates, key=lambda n: leads[n])
    if leads[victim] == 0:
        partition = next(p for p, r in now.items() if victim in r["isr"])
        client.reassign(partition, victim)
        wait_for("the moved leader", lambda: rows(client)[partition].get("leader_node") == victim)
        console.print(f"moved the leadership of partition {partition} to {nodes(victim)}")
    return victim


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest time within [start, end] without one of `times`."""
    marks = [start, *sorted(t for t in times if start < t < end), end]
    return max(b - a for a, b in zip(marks, marks[1:]))


def print_losses(client: actors.Client, data_dir: str, consumers: Sequence[CommittingConsumer]) -> int:
    """Every acknowledged commit must be in the log of its partition's leader now, and
    each group partition must serve its last acknowledged offset: returns how many are not."""
    leaders = {p: r["leader_node"] for p, r in rows(client).items()}
    logged = {p: commits_in_log(replica_dir(data_dir, node, p)) for p, node in leaders.items()}
    served = {g.group_id: client.fetch_offsets(g.group_id).offsets() for g in GROUPS}
    problems = missing_from_logs(logged, client.partition_for, consumers) + not_served(served, consumers)
    for problem in problems:
        console.print(f"[bold red]LOST[/] {problem}")
    total = sum(len(c.acks) for c in consumers)
    console.print(f"[bold]{total} commits acknowledged, {len(problems)} lost[/]: each one is in the log of "
                  "its partition's leader, and every group partition serves its last acknowledged offset")
    return len(problems)


def missing_from_logs(
    logged: Mapping[int, set[tuple[str, str, int, int]]],
    partition_of: Callable[[str], int],
    consumers: Sequence[CommittingConsumer],
) -> list[str]:
    """The acknowledged commits with an offset missing from their partition's log (`commits_in_log`)."""
    problems = []
    for c in consumers:
        partition = partition_of(c.group_id)
        for ack in c.acks:
            gone = {tp: o for tp, o in ack.offsets.items() if (c.group_id, *tp, o) not in logged[partition]}
            if gone:
                problems.append(f"{c.group_id} {gone}: not in the log of partition {partition}'s leader")
    return problems


def not_served(
    served: Mapping[str, Mapping[tuple[str, int], int]], consumers: Sequence[CommittingConsumer]
) -> list[str]:
    """The group partitions whose served offset is below the last one acknowledged
    (above it is fine: a commit that timed out may still have been applied)."""
    last: dict[tuple[str, tuple[str, int]], int] = {}
    for c in consumers:
        for ack in c.acks:
            for tp, offset in ack.offsets.items():
                last[(c.group_id, tp)] = max(offset, last.get((c.group_id, tp), -1))
    return [
        f"{group} {tp}: acknowledged {offset}, served {served[group].get(tp)}"
        for (group, tp), offset in sorted(last.items())
        if served[group].get(tp, -1) < offset
    ]


def commits_in_log(directory: str) -> set[tuple[str, str, int, int]]:
    """(group, topic, partition, offset) of every offset commit record in a replica's log."""
    return {
        (record.key.group_id, record.key.topic, record.key.partition, record.value.offset)
        for _, record in LogReader(directory).records()
        if isinstance(record.key, OffsetCommitKey) and isinstance(record.value, OffsetCommitValue)
    }


# ------------------------------------------------------------------ display


class NodeNames:
    """Short names for the simulated nodes (head, n1, n2, n3), so that a status row fits a terminal."""

    def __init__(self, cluster: Cluster, controller: str) -> None:
        self.controller = controller
        self.head = ray.get_runtime_context().get_node_id()  # the driver's node
        workers = {w.node_id: f"n{i}" for i, w in enumerate(cluster.worker_nodes, 1)}
        self.names = {self.head: "head", **workers}

    def __call__(self, node_id: str | None) -> str:
        return "-" if node_id is None else self.names.get(node_id, node_id[:NODE_ID_CHARS])

    def join(self, node_ids: list[str]) -> str:
        return " ".join(self(n) for n in node_ids)

    def print_legend(self, address: str, data_dir: str) -> None:
        console.print(f"simulated cluster at {address}, each node's disk in {data_dir}/nodes/<node id>:")
        for node_id, name in self.names.items():
            roles = [r for r, here in (("head node, runs the consumers", node_id == self.head),
                                       ("runs the controller", node_id == self.controller)) if here]
            what = f"  ({', '.join(roles)})" if roles else ""
            console.print(f"  {name:>4}  {node_id[:NODE_ID_CHARS]}{what}")


def print_table(title: str, columns: list[str], cells: list[list[Any]]) -> None:
    """A caption, then the table as every CLI table prints (never a cut value)."""
    console.print(f"[bold]{title}[/]")
    tables.print_table("", columns, cells, as_json=False)


def print_status(title: str, now: dict[int, dict[str, Any]], nodes: NodeNames) -> None:
    """`raygroups status`'s replication columns, with the short node names."""
    cells = [
        [p, r.get("epoch"), nodes(r.get("leader_node")), nodes.join(r["replicas"]), nodes.join(r["isr"]),
         r.get("high_watermark"), health(r)]
        for p, r in sorted(now.items())
    ]
    print_table(title, ["PARTITION", "EPOCH", "LEADER", "REPLICAS", "ISR", "HWM", "HEALTH"], cells)


def print_elections(
    client: actors.Client, removal: Removal, consumers: Sequence[CommittingConsumer], nodes: NodeNames
) -> None:
    """The new leader of each partition the lost node led, and its longest time without a commit."""
    after = rows(client)
    cells = []
    for p in removal.led:
        times = [a.at for c in consumers if client.partition_for(c.group_id) == p for a in c.acks]
        old, new = removal.before[p], after[p]
        gap = longest_gap(times, removal.removed, removal.ended)
        cells.append([p, nodes(old["leader_node"]), nodes(new["leader_node"]),
                      f"{old['epoch']} -> {new['epoch']}", f"{gap:.2f}"])
    columns = ["PARTITION", "OLD-LEADER", "NEW-LEADER", "EPOCH", "LONGEST-GAP-S"]
    print_table("new leaders, from the ISR (longest gap: the longest time without a successful commit "
                "since the removal)", columns, cells)


