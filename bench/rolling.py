"""Benchmark of a rolling restart under commits (issue 48):
`python -m bench.rolling [--workers W] [--partitions P] [--groups-per-partition G]`.

A simulated cluster on this machine (`ray.cluster_utils.Cluster`: a head and W workers,
one CPU each, sharing the host's cores and disk; 4 nodes by default) runs a replicated
service (RF 3, min ISR 2, P offsets partitions). G threaded members per partition commit
without pause (one thread each, a plain `Client`). After a baseline window,
`Client.rolling_restart` restarts every replica one node at a time, then the controller
and the topic registry, with a new setting. Prints, against the baseline in the same run:
- the roll's total time;
- per partition, the longest time its groups went without an acknowledged commit in the
  roll's window (target < 1 s: only the leadership moves), the worst and the median
  partition, against the same measure over an equally long window before the roll;
- commits acknowledged during the roll, and lost (every group's committed offset
  afterwards must be its last acknowledged one: 0).
Stdout holds the figures table only; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from dataclasses import dataclass, field

import actors
from actors.demo.sim_cluster import fully_replicated, quick_failover_settings, simulated_cluster, wait_for
from bench.driver_log import log_file
from bench.table import Row, print_table, progress
from coordinator.errors import Errors

NAMESPACE = "raygroups-bench-rolling"


@dataclass
class Member:
    group: str
    partition: int
    acked: int = 0
    acked_at: list[float] = field(default_factory=list)  # perf-counter seconds of each ack

    def longest_gap(self, start: float, end: float) -> float:
        times = [start, *(t for t in self.acked_at if start < t < end), end]
        return max(b - a for a, b in zip(times, times[1:]))


def commit_forever(client: actors.Client, member: Member, stop: threading.Event) -> None:
    while not stop.is_set():
        offset = member.acked + 1
        try:
            errors = client.commit_offsets(member.group, {("t", 0): offset}).errors()
        except Exception:  # a deadline passed mid-move: counted as a gap, tried again
            continue
        if errors[("t", 0)] is Errors.NONE:
            member.acked = offset
            member.acked_at.append(time.perf_counter())


def members_for(client: actors.Client, partitions: int, per_partition: int) -> list[Member]:
    found: dict[int, list[Member]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(m) < per_partition for m in found.values()):
        group = f"bench-roll-{i}"
        p = client.partition_for(group)
        if len(found[p]) < per_partition:
            found[p].append(Member(group, p))
        i += 1
    return [m for ms in found.values() for m in ms]


def per_partition(members: list[Member], start: float, end: float) -> dict[int, float]:
    gaps: dict[int, float] = {}
    for m in members:
        gaps[m.partition] = max(gaps.get(m.partition, 0.0), m.longest_gap(start, end))
    return gaps


def measure(args: argparse.Namespace, data_dir: str) -> list[Row]:
    settings = quick_failover_settings(data_dir, NAMESPACE, args.partitions)
    client = actors.start(settings=settings, namespace=NAMESPACE)
    wait_for("every partition fully replicated", lambda: fully_replicated(client), 300)
    members = members_for(client, args.partitions, args.groups_per_partition)
    stop = threading.Event()
    committer = actors.connect(namespace=NAMESPACE, timeout_s=30.0)
    threads = [
        threading.Thread(target=commit_forever, args=(committer, m, stop), daemon=True) for m in members
    ]
    for thread in threads:
        thread.start()
    wait_for("every group committed", lambda: all(m.acked for m in members), 300)
    progress(f"{len(members)} members committing on {args.partitions} partitions; "
             f"baseline {args.baseline_s} s")
    base_start = time.perf_counter()
    time.sleep(args.baseline_s)
    base_end = time.perf_counter()
    progress("rolling restart")
    started = time.perf_counter()
    status = client.rolling_restart(settings={"commit_timeout_ms": settings.commit_timeout_ms + 1})
    ended = time.perf_counter()
    time.sleep(1.0)  # commits started in the window finish
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    if status["phase"] != "done":
        raise SystemExit(f"the rolling restart did not finish: {status}")
    gaps = per_partition(members, started, ended)
    base_gaps = per_partition(members, base_start, min(base_end, base_start + (ended - started)))
    during = sum(1 for m in members for t in m.acked_at if started <= t <= ended)
    before = sum(1 for m in members for t in m.acked_at if base_start <= t <= base_end)
    fetch = actors.connect(namespace=NAMESPACE, timeout_s=60.0)
    lost = sum(
        1 for m in members if fetch.fetch_offsets(m.group, [("t", 0)]).offsets().get(("t", 0), -1) < m.acked
    )
    actors.stop(NAMESPACE)
    worst, median = max(gaps.values()), statistics.median(gaps.values())
    base_worst = max(base_gaps.values())
    rate, base_rate = during / (ended - started), before / (base_end - base_start)
    worst_partition = max(gaps, key=gaps.__getitem__)
    return [
        Row("rolling restart time", ended - started, "s",
            note=f"{len(status['nodes'])} nodes, then the controller and the registry"),
        Row("longest commit gap, worst partition", worst, "s", worst / base_worst,
            note=f"partition {worst_partition}; target < 1 s"),
        Row("longest commit gap, median partition", median, "s", median / base_worst),
        Row("baseline longest commit gap", base_worst, "s", note="before the roll, worst partition"),
        Row("commits/s during the roll", rate, "/s", rate / base_rate, note=f"baseline {base_rate:.0f}/s"),
        Row("acknowledged commits lost", lost, "groups", note=f"of {len(members)}"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--groups-per-partition", type=int, default=2)
    parser.add_argument("--baseline-s", type=float, default=5.0)
    args = parser.parse_args()
    # Ray tells the driver of each restarted actor's process on stdout: into a log file.
    with log_file("raygroups-bench-rolling"):
        with simulated_cluster(args.workers, NAMESPACE, "raygroups-bench-rolling-") as (_, data_dir):
            rows = measure(args, data_dir)
    print_table("rolling restart under commits", rows, "vs baseline")


if __name__ == "__main__":
    main()
