"""Benchmark of one big offsets partition (issue 46, "Scale of one partition"):
`python -m bench.scale [--groups N1,N2,...] [--offsets K] [--rf R] [--quick]`.

A simulated cluster on this machine (`ray.cluster_utils.Cluster`: a head and R-1 workers
of one CPU each, sharing the host's two cores and disk), a service of one offsets
partition at replication factor R (min ISR 2, or 1 at R 1), filled with groups of
offsets only, each with K committed offsets (one K-partition commit per group, many in
flight through one coalesced client: the client batches them by its in-flight window),
to N1 groups, then N2, and so on. At each size, each against a baseline measured in the
same run:
- memory: each replica's USS and RSS against an empty replica's of its role (measured
  before the fill), per group and per committed offset; its process's longest full
  garbage collection since it started, with their count and its state's freezes
  (`actors.partition.gc_freeze`);
- failover: the leader's actor killed (`ray.kill`) while one group of the partition
  commits without pause; from the kill to the first acknowledged commit sent after it
  (target < 1 s, flat in the state's size: the ratio is to the first size's), to the
  leader's process gone and to the new epoch in the controller's metadata; then the time
  until the replacement replica is caught up in the ISR.
At the last size:
- the split: `repartition` 1 -> 2 while `--committers` of the filled groups commit
  without pause; its total time, the longest time the moving groups were frozen with the
  step it spent it in (the controller's timings; a partition of `--precopy-min-groups`
  groups or more is pre-copied, frozen only for the last delta: docs/design-precopy.md),
  per committing group its stall (the longest one of its commits took in the
  repartition's window) over the groups that moved and those that stayed, against the
  same over an equally long window before;
- lost: every committer's committed offset afterwards is its last acknowledged one, and
  a random sample of the filled groups (`--sample`) still has its K offsets (0 lost).
Stdout holds the figures table only; progress goes to stderr. Memory: a replica holds
about 1.1 KiB per group plus about 0.5 KiB per further offset (docs/capacity.md), times
R replicas, plus the new partition's half after the split: check `free` before a big N.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import random
import threading
import time
from typing import Any

import psutil  # type: ignore[import-untyped]
import ray

import actors
from actors.controller.cluster_view import PARTITION_ACTOR_PREFIX
from actors.core.settings import CONTROLLER_NAME
from actors.demo.sim_cluster import quick_failover_settings, simulated_cluster, status_rows, wait_for
from bench.repartition import GroupCommits, quantile, run_load
from bench.replication import Committer, routing_epoch
from bench.table import Row, print_table, progress
from coordinator import Errors
from coordinator.routing import partition_for

NAMESPACE = "raygroups-bench-scale"
IN_FLIGHT = 1_000  # fill commits in flight at once (the coalescer batches them)
MIB = 2**20


def group_name(i: int) -> str:
    return f"scale-{i}"


def committed_offsets(offsets: int) -> dict[tuple[str, int], int]:
    return {("t", p): 1_000 + p for p in range(offsets)}


async def fill(client: actors.Client, first: int, end: int, offsets: int) -> None:
    """Groups `first`..`end`-1 commit `offsets` partitions once each; IN_FLIGHT at a time."""
    commit = committed_offsets(offsets)
    in_flight = asyncio.Semaphore(IN_FLIGHT)
    done = 0

    async def one(i: int) -> None:
        nonlocal done
        async with in_flight:
            response = await client.commit_offsets_async(group_name(i), commit)
        if any(e is not Errors.NONE for e in response.errors().values()):
            raise RuntimeError(f"{group_name(i)}: fill commit refused: {response}")
        done += 1
        if done % 100_000 == 0:
            progress(f"  {done:,} groups filled")

    await asyncio.gather(*map(one, range(first, end)))


def replicas(partition: int) -> dict[str, dict[str, Any]]:
    """Every live replica actor of `partition`: its `info()` by actor name."""
    found: dict[str, dict[str, Any]] = {}
    for name in ray.util.list_named_actors():
        if name.startswith(PARTITION_ACTOR_PREFIX):
            try:
                info: Any = ray.get(ray.get_actor(name).info.remote(), timeout=30)
            except (ray.exceptions.RayError, ValueError):
                continue
            if info.get("partition") == partition and info.get("role") in ("leader", "follower"):
                found[name] = info
    return found


def memory(pid: int) -> tuple[int, int]:
    """(RSS, USS) of a process of this host."""
    info = psutil.Process(pid).memory_full_info()
    return int(info.rss), int(info.uss)


def caught_up(client: actors.Client, partition: int, rf: int) -> bool:
    """`partition` led and ACTIVE with `rf` replicas, all in the ISR at the leader's log end."""
    row = status_rows(client).get(partition, {})
    if row.get("state") != "ACTIVE" or len(row.get("replicas") or ()) != rf:
        return False
    followers = row.get("followers") or {}
    return sorted(row["isr"]) == sorted(row["replicas"]) and all(f["lag"] == 0 for f in followers.values())


def memory_rows(empty: dict[str, int], groups: int, offsets: int) -> list[Row]:
    """Each replica's memory now against an empty replica's of its role (`empty`: USS by role)."""
    rows = []
    for info in sorted(replicas(0).values(), key=lambda info: info["role"]):
        rss, uss = memory(info["pid"])
        base = empty[info["role"]]
        rows.append(Row(f"  {info['role']} on node {info['node_id'][:8]}: USS", uss / MIB, "MiB", uss / base,
                        f"{(uss - base) / groups / 1024:.2f} KiB per group, "
                        f"{(uss - base) / (groups * offsets):.0f} B per offset; RSS {rss / MIB:,.0f} MiB; "
                        f"ratio: x an empty {info['role']}'s USS ({base / MIB:.0f} MiB)"))
        gc = info.get("gc") or {}
        rows.append(Row(f"  {info['role']} on node {info['node_id'][:8]}: longest full collection",
                        gc.get("longest_ms", 0.0), "ms", None,
                        f"CPU {gc.get('longest_cpu_ms', 0.0)} ms; "
                        f"{gc.get('full_collections', 0)} full collections, "
                        f"{gc.get('freezes', 0)} freezes (longest {gc.get('longest_freeze_ms', 0.0)} ms, "
                        f"CPU {gc.get('longest_freeze_cpu_ms', 0.0)} ms) since its start"))
    return rows


def failover(client: actors.Client, rf: int, groups: int, base_ms: float | None) -> tuple[list[Row], float]:
    """Kill partition 0's leader actor while a group of it commits; time to the next ack."""
    controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
    client.refresh()
    leader = client.leader(0)
    pid = ray.get(leader.info.remote())["pid"]
    with Committer(NAMESPACE, "scale-live") as committer:
        epoch = routing_epoch(controller)
        killed = time.monotonic()
        ray.kill(leader, no_restart=True)
        wait_for("the leader's process gone", lambda: not psutil.pid_exists(pid), 60, poll_s=0.005)
        dead = time.monotonic() - killed
        wait_for("an election", lambda: routing_epoch(controller) > epoch, 120, poll_s=0.01)
        elected = time.monotonic() - killed
        wait_for("a commit sent after the kill acknowledged",
                 lambda: bool(committer.sent) and committer.sent[-1] > killed, 120)
        served = committer.first_sent_after(killed) - killed
        gap = committer.longest_gap(killed - 1.0, committer.acked[-1])
    progress(f"failover: first commit {served:.3f} s after the kill; waiting for {rf} replicas again")
    started = time.monotonic()
    wait_for("the partition fully replicated again", lambda: caught_up(client, 0, rf), 1_800, poll_s=0.5)
    served_ms = served * 1000
    return [
        Row(f"failover at {groups:,} groups: kill to first acknowledged commit", served_ms, "ms",
            None if base_ms is None else served_ms / base_ms,
            "target < 1 s; a commit sent after the kill"
            + ("" if base_ms is None else "; ratio: x the first size")),
        Row("  kill to the leader's process gone", dead * 1000, "ms", dead / served),
        Row("  kill to the new epoch (controller metadata)", elected * 1000, "ms", elected / served),
        Row("  longest commit gap around it", gap * 1000, "ms", gap / served),
        Row("  the lost replica back in the ISR, caught up", time.monotonic() - started, "s", None,
            "after the first commit"),
    ], served_ms


def split(
    client: actors.Client, committers: int, groups: int, baseline_s: float
) -> tuple[list[Row], list[GroupCommits]]:
    """Repartition 1 -> 2 while `committers` of the filled groups commit; figures, and the loads."""
    loads = [GroupCommits(group_name(i)) for i in random.Random(1).sample(range(groups), committers)]
    for load in loads:
        load.acked = 1_000  # the fill's offset of partition 0; the committers go on from it
    stop = threading.Event()
    thread = run_load(loads, stop, NAMESPACE)
    wait_for("every committer committed", lambda: all(load.acked > 1_000 for load in loads), 300)
    base_start = time.perf_counter()
    time.sleep(baseline_s)
    base_end = time.perf_counter()
    progress("repartition 1 -> 2")
    started = time.perf_counter()
    timings = client.repartition(2, timeout_s=3_600)
    ended = time.perf_counter()
    time.sleep(1.0)  # commits started in the window finish
    stop.set()
    thread.join(timeout=60)
    moved = [load for load in loads if partition_for(load.group, 2) == 1]
    stayed = [load for load in loads if partition_for(load.group, 2) == 0]
    base = [load.stall(base_start, base_end) for load in loads]
    base_p99 = quantile(base, 0.99)
    moved_stall = [load.stall(started, ended) for load in moved]
    stayed_stall = [load.stall(started, ended) for load in stayed]
    def took(*names: str) -> str:
        return ", ".join(f"{step} {timings.get(step + '_s', 0.0):.2f}" for step in names)

    if "copy_rounds" in timings:  # pre-copied (docs/design-precopy.md): frozen for the last delta only
        copied = f"{timings['copy_s']:.2f} s copying in {timings['copy_rounds']:.0f} rounds"
        steps = f"pre-copied: {copied}, {took('delta', 'switch', 'routing')}"
    else:
        steps = took("export", "admit", "switch", "routing")
    rows = [
        Row("split 1 -> 2: total time", ended - started, "s", None,
            f"{timings.get('partitions_ready_s', 0.0):.1f} s starting partition 1, "
            f"{timings.get('handoffs_s', 0.0):.1f} s of handoff"),
        Row("  moving groups frozen", timings.get("frozen_s", 0.0), "s", None, steps),
        Row("  moved committers' stall p50", quantile(moved_stall, 0.5), "s",
            quantile(moved_stall, 0.5) / base_p99, f"{len(moved)} groups; ratio: x the baseline p99"),
        Row("  moved committers' stall p99", quantile(moved_stall, 0.99), "s",
            quantile(moved_stall, 0.99) / base_p99),
        Row("  staying committers' stall p99", quantile(stayed_stall, 0.99), "s",
            quantile(stayed_stall, 0.99) / base_p99, f"{len(stayed)} groups"),
        Row("  baseline stall p99", base_p99, "s", 1.0, f"the {baseline_s:.0f} s before the split"),
    ]
    return rows, loads


def lost(loads: list[GroupCommits], groups: int, offsets: int, sample: int) -> list[Row]:
    """Committers' last acknowledged offsets and a sample of the filled groups, read back."""
    client = actors.connect(namespace=NAMESPACE, timeout_s=60.0)
    partitions = [("t", p) for p in range(offsets)]
    expected = committed_offsets(offsets)
    behind = sum(1 for load in loads
                 if client.fetch_offsets(load.group, [("t", 0)]).offsets().get(("t", 0), -1) < load.acked)
    committing = {load.group for load in loads}
    checked = [group_name(i) for i in random.Random(2).sample(range(groups), min(sample, groups))]
    checked = [g for g in checked if g not in committing]
    wrong = sum(1 for g in checked if client.fetch_offsets(g, partitions).offsets() != expected)
    return [
        Row("acknowledged commits lost", behind, "groups", None, f"of {len(loads)} committers"),
        Row("filled groups lost or changed", wrong, "groups", None,
            f"of {len(checked)} sampled, {offsets} offsets each"),
    ]


def measure(args: argparse.Namespace, data_dir: str) -> list[Row]:
    # Quick failover detection, but the product's probe and commit timeouts: a fill or a
    # busy shared host must not depose a leader that is only slow (it did at 2 and 3 s).
    settings = quick_failover_settings(data_dir, NAMESPACE, 1, replication_factor=args.rf,
                                       min_insync_replicas=min(2, args.rf), probe_timeout_s=5.0,
                                       commit_timeout_ms=5_000, precopy_min_groups=args.precopy_min_groups)
    client = actors.start(settings=settings, namespace=NAMESPACE)
    wait_for("partition 0 fully replicated", lambda: caught_up(client, 0, args.rf), 300)
    empty = {info["role"]: memory(info["pid"])[1] for info in replicas(0).values()}
    rows: list[Row] = []
    filled, base_ms = 0, None
    for size in args.sizes:
        progress(f"filling to {size:,} groups x {args.offsets} offsets")
        started = time.perf_counter()
        asyncio.run(fill(client, filled, size, args.offsets))
        took = time.perf_counter() - started
        rate, filled = (size - filled) / took, size
        wait_for("the followers caught up", lambda: caught_up(client, 0, args.rf), 1_800, poll_s=0.5)
        row = status_rows(client)[0]
        rows.append(Row(f"{size:,} groups x {args.offsets} offsets: fill", took, "s", None,
                        f"{rate:,.0f} groups/s; {row['log_end']:,} records in the log"))
        rows += memory_rows(empty, size, args.offsets)
        failed_over, served_ms = failover(client, args.rf, size, base_ms)
        rows += failed_over
        base_ms = served_ms if base_ms is None else base_ms
    split_rows, loads = split(client, args.committers, filled, args.baseline_s)
    rows += split_rows
    rows += lost(loads, filled, args.offsets, args.sample)
    actors.stop(NAMESPACE)
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--groups", default="10000,100000",
                        help="comma-separated sizes: the partition is filled to each in turn, a failover at "
                             "each; the split at the last")
    parser.add_argument("--offsets", type=int, default=10, help="committed offsets per group")
    parser.add_argument("--rf", type=int, default=3, help="replication factor (one node per replica)")
    parser.add_argument("--committers", type=int, default=200, help="filled groups committing in the split")
    parser.add_argument("--sample", type=int, default=2_000, help="filled groups read back after")
    parser.add_argument("--baseline-s", type=float, default=5.0)
    parser.add_argument("--precopy-min-groups", type=int, default=10_000,
                        help="pre-copy the split at this many groups or more (0: the fenced handoff)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.committers, args.sample, args.baseline_s = "500,2000", 20, 200, 1.0
    args.sizes = [int(n) for n in args.groups.split(",")]
    if args.sizes != sorted(set(args.sizes)) or args.sizes[0] < args.committers:
        parser.error("--groups: increasing sizes, the first at least --committers")
    if args.rf < 1 or args.offsets < 1:
        parser.error("--rf and --offsets must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with simulated_cluster(args.rf - 1, NAMESPACE, "raygroups-bench-scale-") as (_, data_dir):
        rows = measure(args, data_dir)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    day = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print_table(f"one partition of {args.sizes[-1]:,} groups, RF {args.rf}, {day}, load average {load}", rows,
                "ratio", 2)


if __name__ == "__main__":
    main()
