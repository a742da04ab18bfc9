"""Benchmark of growing the offsets partition count online (issue 46):
`python -m bench.repartition [--groups G] [--from N] [--to M] [--workers W]`.

A simulated cluster on this machine (`ray.cluster_utils.Cluster`, one CPU per node, the
nodes sharing the host's cores and disk) runs a service of replication factor 3 (1 with
`--workers 1`) and N offsets partitions. One async committer per group commits without
pause (one partition each, coalesced client). After a baseline window the service grows
to M partitions while they commit. Prints, each against the baseline in the same run:
- the repartition's total time (from the call to the new routing in force);
- per group, its stall: the longest one of its commits took in the repartition's window
  (retries on NOT_COORDINATOR included), p50 and p99 over the groups that moved and over
  those that did not (target: moved p99 < 1 s; unmoved p99 unchanged within noise),
  against the same measure over an equally long baseline window before it;
- the commits' latency p99 while the new partitions start (per commit: the running
  groups' slowdown), against the baseline window's;
- the longest time a source's moving groups were frozen, and the longest each handoff step
  took (export, the targets' admits, the switch, the routing to the targets);
- commits acknowledged during it, and lost: every group's committed offset afterwards
  is its last acknowledged one (0 lost).
Stdout holds the figures table only; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from dataclasses import dataclass, field

import actors
from actors.client.retry import CoordinatorUnavailableError
from actors.demo.sim_cluster import fully_replicated, quick_failover_settings, simulated_cluster, wait_for
from bench.table import Row, print_table, progress
from coordinator.errors import Errors
from coordinator.routing import partition_for

NAMESPACE = "raygroups-bench-repartition"


@dataclass
class GroupCommits:
    group: str
    acked: int = 0
    # (started, took) of every commit, perf-counter seconds
    commits: list[tuple[float, float]] = field(default_factory=list)

    def stall(self, start: float, end: float) -> float:
        return max((took for at, took in self.commits if start <= at <= end), default=0.0)

    def latencies(self, start: float, end: float) -> list[float]:
        return [took for at, took in self.commits if start <= at <= end]


async def commit_forever(client: actors.Client, load: GroupCommits, stop: threading.Event) -> None:
    while not stop.is_set():
        offset = load.acked + 1
        started = time.perf_counter()
        try:
            response = await client.commit_offsets_async(load.group, {("t", 0): offset})
        except CoordinatorUnavailableError:  # past the client's deadline: a stall that long
            load.commits.append((started, time.perf_counter() - started))
            continue
        load.commits.append((started, time.perf_counter() - started))
        if response.errors()[("t", 0)] is Errors.NONE:
            load.acked = offset


def run_load(
    loads: list[GroupCommits], stop: threading.Event, namespace: str = NAMESPACE
) -> threading.Thread:
    client = actors.connect(namespace=namespace, timeout_s=60.0)

    async def main() -> None:
        await asyncio.gather(*(commit_forever(client, load, stop) for load in loads))

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    return thread


def committed(client: actors.Client, group: str) -> int:
    return client.fetch_offsets(group, [("t", 0)]).offsets().get(("t", 0), -1)


def quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(args: argparse.Namespace, data_dir: str) -> list[Row]:
    settings = quick_failover_settings(data_dir, NAMESPACE, args.source)
    client = actors.start(settings=settings, namespace=NAMESPACE)
    if settings.replication_factor > 1:
        wait_for("every partition fully replicated", lambda: fully_replicated(client), 300)
    loads = [GroupCommits(f"bench-group-{i}") for i in range(args.groups)]
    stop = threading.Event()
    thread = run_load(loads, stop)
    wait_for("every group committed", lambda: all(load.acked for load in loads), 300)
    progress(f"{args.groups} groups committing on {args.source} partitions; baseline {args.baseline_s} s")
    base_start = time.perf_counter()
    time.sleep(args.baseline_s)
    base_end = time.perf_counter()
    progress(f"repartition {args.source} -> {args.to}")
    started = time.perf_counter()
    timings = client.repartition(args.to)
    ended = time.perf_counter()
    handoffs = (ended - timings["handoffs_s"], ended)
    time.sleep(1.0)  # commits started in the window finish
    stop.set()
    thread.join(timeout=60)
    moved = {g.group for g in loads if partition_for(g.group, args.to) != partition_for(g.group, args.source)}
    window = (started, ended)
    stalls_moved = [load.stall(*window) for load in loads if load.group in moved]
    stalls_stay = [load.stall(*window) for load in loads if load.group not in moved]
    handoff_moved = [load.stall(*handoffs) for load in loads if load.group in moved]
    handoff_stay = [load.stall(*handoffs) for load in loads if load.group not in moved]
    base = [load.stall(base_start, base_end) for load in loads]
    # Per commit, not per group: a window's longest commit grows with its length, and
    # starting the partitions lasts many times the baseline window.
    starting = [t for load in loads for t in load.latencies(started, handoffs[0])]
    base_latency = [t for load in loads for t in load.latencies(base_start, base_end)]
    during = sum(1 for load in loads for at, _ in load.commits if started <= at <= ended)
    fetch = actors.connect(namespace=NAMESPACE, timeout_s=60.0)
    lost = sum(1 for load in loads if committed(fetch, load.group) < load.acked)
    actors.stop(NAMESPACE)
    base_p50, base_p99 = quantile(base, 0.5), quantile(base, 0.99)
    moved_p50, moved_p99, stay_p99 = (
        quantile(stalls_moved, 0.5), quantile(stalls_moved, 0.99), quantile(stalls_stay, 0.99)
    )
    per_group = statistics.fmean([len(load.commits) for load in loads])
    return [
        Row("repartition time", ended - started, "s", note=f"{args.source} -> {args.to}, {len(loads)}"),
        Row("moved groups' stall p50", moved_p50, "s", moved_p50 / base_p50, note=f"{len(moved)} groups"),
        Row("moved groups' stall p99", moved_p99, "s", moved_p99 / base_p99),
        Row("unmoved groups' stall p99", stay_p99, "s", stay_p99 / base_p99, note=f"{len(stalls_stay)}"),
        Row("commit latency p99 while they start", quantile(starting, 0.99), "s",
            quantile(starting, 0.99) / quantile(base_latency, 0.99),
            note=f"baseline {quantile(base_latency, 0.99):.3f} s, {len(starting)} commits"),
        Row("  in the handoffs alone: moved p99", quantile(handoff_moved, 0.99), "s",
            quantile(handoff_moved, 0.99) / base_p99, note=f"{timings['handoffs_s']:.2f} s of handoffs"),
        Row("  in the handoffs alone: unmoved p99", quantile(handoff_stay, 0.99), "s",
            quantile(handoff_stay, 0.99) / base_p99, note=f"after {timings['partitions_ready_s']:.2f} s "
            "starting the new partitions"),
        Row("  a source's groups frozen, longest", timings.get("frozen_s", 0.0), "s", note=", ".join(
            f"{step} {timings.get(step + '_s', 0.0):.3f}" for step in ("export", "admit", "switch", "routing")
        )),
        Row("baseline stall p99", base_p99, "s", note=f"p50 {base_p50:.3f} s, before, as long a window"),
        Row("commits during the repartition", during, "", note=f"{per_group:.0f} per group in the run"),
        Row("acknowledged commits lost", lost, "groups"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, default=2_000)
    parser.add_argument("--from", dest="source", type=int, default=4)
    parser.add_argument("--to", type=int, default=16)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--baseline-s", type=float, default=5.0)
    args = parser.parse_args()
    with simulated_cluster(args.workers, NAMESPACE, "raygroups-bench-repartition-") as (_, data_dir):
        rows = measure(args, data_dir)
    print_table("growing the offsets partition count under load", rows, "vs baseline")


if __name__ == "__main__":
    main()
