"""Benchmark of backup and restore (issue 48): `python -m bench.backup [--records N]`.

A simulated cluster on this machine (`ray.cluster_utils.Cluster`: a head and 2
workers of one CPU each, sharing the host's two cores and disk). A log of
`--records` records (bench.spark's: 10,000 groups, 8 partitions, written
offline) is served by a single-copy service; 8 async committers (one group
each, 1-partition commits) commit without pause. Prints:
- the commit rate during `raygroups backup` (run as the operator would: the
  command in a process of its own) against the rate in the 5 s just before
  and just after it (same committers, same run; target >= 0.8), and the backup's time (the
  command's, Ray's connection included) and throughput;
- the restore's time: `raygroups restore` onto the 3 nodes at replication
  factor 3 (verification, writing 3 replicas of every file, the service's
  start and recovery) until every partition is led and its ISR full, against
  the source service's start on the same log (factor 1: a third of the replicas).
Every Ray process is gone afterwards. Stdout holds the figures only; progress
goes to stderr, Ray's messages to the driver to a log file (bench/driver_log.py).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import actors
from actors.backup.restore import restore
from actors.backup.take import DEFAULT_MB_PER_S
from actors.demo.sim_cluster import fully_replicated, simulated_cluster, wait_for
from bench.driver_log import log_file
from bench.spark import PARTITIONS, write_log
from bench.table import Row, print_table, progress
from coordinator import Errors
from log.backup_manifest import read_manifest, verify_backup

NAMESPACE = "raygroups-bench-backup"
RESTORED = "raygroups-bench-restored"
COMMITTERS = 8
BEFORE_S = 5.0


@dataclass
class Committers:
    """Async committers in a thread of their own: when each acknowledged commit came back."""

    acked: list[float] = field(default_factory=list)
    errors: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self, client: actors.Client) -> threading.Thread:
        async def commit(group: str) -> None:
            offset = 0
            while not self.stop.is_set():
                offset += 1
                try:
                    response = await client.commit_offsets_async(group, {("t", 0): offset})
                    ok = response.errors() == {("t", 0): Errors.NONE}
                except Exception:  # a commit that fails counts as one, the load goes on
                    ok = False
                if ok:
                    self.acked.append(time.time())
                else:
                    self.errors += 1

        async def main() -> None:
            await asyncio.gather(*(commit(f"bench-backup-{i}") for i in range(COMMITTERS)))

        thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        thread.start()
        return thread

    def rate(self, start: float, end: float) -> float:
        return sum(start <= t < end for t in self.acked) / (end - start)


def loaded(client: actors.Client) -> bool:
    return all(row.get("state") == "ACTIVE" for row in client.status())


def run(records: int, mb_per_s: float) -> list[Row]:
    with simulated_cluster(2, NAMESPACE, "raygroups-bench-backup-") as (cluster, path):
        address = cluster.address
        source, backup, target = (os.path.join(path, name) for name in ("source", "backup", "restored"))
        started = time.monotonic()
        progress(f"writing a log of {records:,} records")
        write_log(source, records, 10_000)
        progress(f"written in {time.monotonic() - started:.1f} s; starting the service on it")
        start_s = time.monotonic()
        client = actors.start(source, num_partitions=PARTITIONS, namespace=NAMESPACE, replication_factor=1)
        wait_for("every partition loaded", lambda: loaded(client), 600.0)
        start_s = time.monotonic() - start_s
        load = Committers()
        thread = load.start(actors.connect(namespace=NAMESPACE, timeout_s=30.0))
        wait_for("commits flowing", lambda: len(load.acked) > 100, 60)
        before_start = time.time()
        time.sleep(BEFORE_S)
        backup_start = time.time()
        # The operator's command, in a process of its own as it would be.
        command = [
            "-m", "actors.cli.main", "backup", backup, "--address", address, "--namespace", NAMESPACE,
            "--max-mb-per-s", str(mb_per_s),
        ]
        subprocess.run([sys.executable, *command], check=True, stdout=subprocess.DEVNULL)
        backup_end = time.time()
        time.sleep(BEFORE_S)
        after_end = time.time()
        manifest = read_manifest(backup)
        copy_start, copy_end = manifest.cut_ms / 1000, manifest.created_ms / 1000
        load.stop.set()
        thread.join(timeout=30)
        actors.stop(NAMESPACE)
        # The baseline: the windows just before and just after, so a drifting host weighs on both.
        before = (load.rate(before_start, backup_start) + load.rate(backup_end, after_end)) / 2
        during = load.rate(backup_start, backup_end)
        copying = load.rate(copy_start, copy_end)
        backup_s = backup_end - backup_start
        progress(f"backup: {backup_s:.1f} s; restoring")
        verify_s = _timed(lambda: verify_backup(backup))
        restore_start = time.monotonic()
        _, restored = restore(backup, target, namespace=RESTORED, replication_factor=3)
        started_s = time.monotonic() - restore_start
        wait_for("the restored service fully replicated", lambda: fully_replicated(restored), 600)
        restore_s = time.monotonic() - restore_start
        progress(f"restore: {restore_s:.1f} s, of which {started_s:.1f} s until actors.start returned")
        actors.stop(RESTORED)
        shutil.rmtree(source, ignore_errors=True)
        cut, size = manifest.records_end, manifest.total_bytes
    return [
        Row(
            "commits during the backup", during, "commits/s", during / before,
            f"target >= 0.8; ratio: x the {BEFORE_S:g} s before and after ({before:,.0f} commits/s), "
            f"{COMMITTERS} async committers, "
            f"{load.errors} errors",
        ),
        Row(
            "  from the cut to the manifest", copying, "commits/s", copying / before,
            f"target >= 0.8; {copy_end - copy_start:.1f} s: the command without its start and Ray connection",
        ),
        Row(
            "backup of the log", backup_s, "s", None,
            f"{cut:,} offsets, {size / 1e6:,.0f} MB: {cut / backup_s:,.0f} records/s, "
            f"{size / 1e6 / backup_s:,.0f} MB/s; --max-mb-per-s {mb_per_s:g}",
        ),
        Row(
            "restore at replication factor 3", restore_s, "s", restore_s / start_s,
            f"ratio: x the source service's start on the log ({start_s:.1f} s, factor 1); until every "
            f"partition is led, ISR full; verification alone {verify_s:.1f} s",
        ),
    ]


def _timed(fn: Callable[[], Any]) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--max-mb-per-s", type=float, default=DEFAULT_MB_PER_S, help="0: no limit")
    args = parser.parse_args()
    with log_file("bench-backup"):
        rows = run(args.records, args.max_mb_per_s)
    title = f"backup and restore, {args.records:,} records, simulated 3-node cluster, {os.cpu_count()} cores"
    print_table(f"{title}, {datetime.date.today()}", rows, "ratio")


if __name__ == "__main__":
    main()
