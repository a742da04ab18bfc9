"""Disk faults on replicated offsets partitions (issues 21 and 24): a replica whose
disk fills or goes read-only steps aside and comes back by itself.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster), as root on Linux:
`python -m tests.ray.disk_fault_scenario [CASE ...] [--root DIR]`
(every case when none is named, in this order, on one simulated cluster).

A named simulated cluster of 5 nodes (head + 4 workers), every node's
directory a small ext4 of the rig (tests/ray/disks.py); the service is
started afresh for each case on wiped disks: one partition, replication
factor 3, min ISR 2 (`quick_failover_settings`), two groups committing without
pause, every commit n to a key of its own, every acknowledged one remembered.
Cases:
- `follower-full`: a follower's disk full for 4 s, then freed. It leaves the
  ISR; while it is out its probe and the status row show its disk failure
  (tests/ray/disk_support.py); it rejoins the ISR by itself within
  `REJOIN_S` of the heal; the groups commit throughout (the longest gap is
  printed: a figure that grows with the machine's load, not a check); no
  acknowledged commit lost.
- `follower-full-idle`: `follower-full` with the commits stopped before the
  heal: nothing written wakes the replica, it rejoins the ISR by itself all the
  same (issue 45: a failed replica is retried on its own).
- `leader-full`: the leader's disk full for 4 s: another replica leads, the
  commits go on (the longest gap printed), nothing acknowledged is lost, and
  the old leader rejoins the ISR after the heal.
- `follower-read-only`: `follower-full` with the disk made read-only (ext4's
  errors=remount-ro) and then mounted writable again.
- `two-followers`: one follower's disk fills, then the other's goes
  read-only while the first is still broken: below min ISR commits are
  refused with a retriable error and none is acknowledged, a read of
  committed offsets is answered within its deadline; as soon as one disk
  heals commits are served again; after both heal the ISR is full.
- `moved`: a follower's disk stays full past the move delay: the controller
  moves the replica to another live node (the ISR is full again without it)
  while the commits go on.
Prints `case NAME: passed ...` or `case NAME: FAILED ...` for each and exits
non-zero if one failed. Every disk is healed and unmounted at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import ray
from ray.cluster_utils import Cluster
from ray.experimental.internal_kv import _internal_kv_del

import actors
from actors.client.retry import CoordinatorUnavailableError
from actors.controller.ray_store import KV_NAMESPACE, metadata_key
from actors.demo.sim_cluster import fully_replicated, quick_failover_settings
from actors.demo.sim_cluster import status_rows as rows
from coordinator import Errors
from coordinator.errors import RETRIABLE_COORDINATOR_ERRORS

from tests.ray.disk_support import Checks, cluster_with_disks, disk_failure_missing, inject, stop_service
from tests.ray.disks import NodeDisks
from tests.ray.fault_scenario import longest_gap
from tests.ray.replicated_fault_scenario import TOPIC, KeyedLoad, lost_commits, start_keyed_load
from tests.ray.replication_scenario import NAMESPACE, all_pushed_over_links, caught_up, groups_on

WORKERS = 4
PARTITIONS = 1
HOLD_S = 4.0
# After a heal, the replica is back in the ISR within this.
REJOIN_S = 20.0
# The setting that moves a replica whose disk stays broken (issue 21).
MOVE_DELAY_SETTING = "disk_failure_move_delay_s"
MOVE_DELAY_S = 5.0
# Retriable answers to a commit refused below min ISR.
REFUSALS = RETRIABLE_COORDINATOR_ERRORS | {Errors.NOT_ENOUGH_REPLICAS, Errors.REQUEST_TIMED_OUT}


def fresh_service(cluster: Cluster, disks: NodeDisks, **overrides: object) -> actors.Client:
    """A new service (no metadata of the previous case's) on wiped, healthy disks, fully replicated."""
    stop_service(NAMESPACE)
    for name in disks.names():
        disks.wipe(name)
    _internal_kv_del(metadata_key(NAMESPACE, disks.data_dir), namespace=KV_NAMESPACE)
    settings = quick_failover_settings(disks.data_dir, NAMESPACE, PARTITIONS, **overrides)
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    wait = Checks("start")
    wait.wait("every partition fully replicated", lambda: fully_replicated(client), 60)
    wait.wait("the pushes over the replication links", lambda: all_pushed_over_links(client), 30)
    if wait.failures:
        print(f"  status: {client.status()}", flush=True)
    wait.done()
    return client


class Load:
    """The case's committing groups (partition 0), stopped and checked by `finish`."""

    def __init__(self, client: actors.Client) -> None:
        self.loads, self._stop, self._thread = start_keyed_load(groups_on(client, 0))
        self.started = time.monotonic()

    def acked(self) -> list[int]:
        return [load.acked for load in self.loads]

    def advanced_since(self, before: list[int]) -> bool:
        return all(load.acked > b for load, b in zip(self.loads, before, strict=True))

    def total(self) -> int:
        return sum(len(load.acked_all) for load in self.loads)

    def finish(self, checks: Checks, gap_from: float | None) -> str:
        """Stop; check no loss; a summary, with the longest gap since `gap_from` (a figure:
        DESIGN 7, tests assert no wall time)."""
        self._stop.set()
        self._thread.join(timeout=30)
        summary = f"{self.total()} commits acknowledged"
        if gap_from is not None:
            gap, group = longest_gap(self.loads, gap_from, time.monotonic())
            summary += f", longest gap {gap:.1f} s ({group})"
        try:
            lost = lost_commits(self.loads)
        except (CoordinatorUnavailableError, ray.exceptions.RayError) as exc:
            checks.check(False, f"the final read of the committed offsets failed: {exc!r:.200}")
            return summary + ", none read back"
        checks.check(not lost, f"acknowledged commits lost: { {g: n[:10] for g, n in lost.items()} }")
        return summary + f", {sum(map(len, lost.values()))} lost"


def roles(client: actors.Client) -> tuple[str, list[str]]:
    """Partition 0's leader and its followers (sorted)."""
    row = rows(client)[0]
    return row["leader_node"], sorted(n for n in row["replicas"] if n != row["leader_node"])


def in_isr(client: actors.Client, node: str) -> bool:
    return node in rows(client)[0]["isr"]


def in_sync(client: actors.Client, node: str) -> bool:
    """`node` leads partition 0, or follows it in the ISR with no lag."""
    return rows(client)[0].get("leader_node") == node or caught_up(client, node)


def show_disk_failure(checks: Checks, client: actors.Client, disks: NodeDisks, node: str) -> None:
    """While `node`'s disk is broken: its probe and the status row say so."""
    last: list[str | None] = [None]

    def shown() -> bool:
        last[0] = disk_failure_missing(client, disks.data_dir, 0, node)
        return last[0] is None

    if checks.wait(f"{node}'s disk failure shown", shown, timeout_s=5) is None:
        checks.failures[-1] += f" ({last[0]})"


def hold_until(started: float, seconds: float) -> None:
    time.sleep(max(0.0, started + seconds - time.monotonic()))


# ------------------------------------------------------------------ cases


def one_replica_fault(
    cluster: Cluster, disks: NodeDisks, fault: str, leader: bool, checks: Checks, idle: bool = False
) -> str:
    """`idle`: the commits stop before the heal, so nothing written wakes the replica."""
    client = fresh_service(cluster, disks)
    old_leader, followers = roles(client)
    victim = old_leader if leader else followers[0]
    load = Load(client)
    time.sleep(2.0)
    started = time.monotonic()
    try:
        inject(disks, victim, fault)
        print(f"  {fault} disk on {victim} ({'leader' if leader else 'follower'})", flush=True)
        if leader:
            new_leader = lambda: rows(client)[0].get("leader_node") not in (None, victim)  # noqa: E731
            checks.wait("another leader", new_leader, 10)
            before = load.acked()
            checks.wait("commits under the new leader", lambda: load.advanced_since(before), 10)
        checks.wait(f"{victim} out of the ISR", lambda: not in_isr(client, victim), 10)
        if not leader:
            before = load.acked()
            checks.wait(f"commits with {victim}'s disk broken", lambda: load.advanced_since(before), 10)
        show_disk_failure(checks, client, disks, victim)
        hold_until(started, HOLD_S)
        summary = load.finish(checks, started) if idle else ""
    finally:
        disks.heal(victim)
    rejoined = checks.wait(f"{victim} back in the ISR by itself after the heal",
                           lambda: in_sync(client, victim), REJOIN_S)
    checks.wait(f"{victim}'s disk failure cleared", lambda: disk_failure_missing(
        client, disks.data_dir, 0, victim) is not None, 10)
    if not idle:
        time.sleep(1.0)
        summary = load.finish(checks, started)
    where = "rejoined" if rejoined is None else f"rejoined {rejoined:.1f} s after the heal"
    return f"{victim} {where}{' with no commit after it' if idle else ''}; {summary}"


def follower_full(cluster: Cluster, disks: NodeDisks, checks: Checks) -> str:
    return one_replica_fault(cluster, disks, "full", leader=False, checks=checks)


def follower_full_idle(cluster: Cluster, disks: NodeDisks, checks: Checks) -> str:
    return one_replica_fault(cluster, disks, "full", leader=False, checks=checks, idle=True)


def leader_full(cluster: Cluster, disks: NodeDisks, checks: Checks) -> str:
    return one_replica_fault(cluster, disks, "full", leader=True, checks=checks)


def follower_read_only(cluster: Cluster, disks: NodeDisks, checks: Checks) -> str:
    return one_replica_fault(cluster, disks, "read-only", leader=False, checks=checks)


def refused_retriably(group: str) -> str | None:
    """None when a commit that gives up after 2 s is refused with a retriable error
    (the committers' client retries for 20 s); else what it got."""
    impatient = actors.connect(namespace=NAMESPACE, timeout_s=2.0)
    try:
        response = impatient.commit_offsets(group, {(TOPIC, 1): 1})
    except CoordinatorUnavailableError:
        return None
    except ray.exceptions.RayError as exc:
        return f"a Ray error: {exc!r:.200}"
    errors = set(response.errors().values())
    return None if errors <= REFUSALS else f"answered {errors}"


def committed_reads_answered(loads: list[KeyedLoad], deadline_s: float = 5.0) -> str | None:
    """None when each group's committed offsets are read within the deadline, every
    acknowledged commit among them (issue 24: reads below min ISR never hang)."""
    reader = actors.connect(namespace=NAMESPACE, timeout_s=deadline_s)
    for load in loads:
        acked = list(load.acked_all)
        started = time.monotonic()
        try:
            offsets = reader.fetch_offsets(load.group).offsets()
        except (CoordinatorUnavailableError, ray.exceptions.RayError) as exc:
            return f"{load.group}: no answer within {time.monotonic() - started:.1f} s ({exc!r:.120})"
        missing = [n for n in acked if offsets.get((TOPIC, n)) != n]
        if missing:
            return f"{load.group}: the read lacks acknowledged commits {missing[:5]}"
    return None


def two_followers(cluster: Cluster, disks: NodeDisks, checks: Checks) -> str:
    client = fresh_service(cluster, disks)
    leader, (first, second) = roles(client)
    load = Load(client)
    time.sleep(2.0)
    broken = []
    summary = ""
    try:
        inject(disks, first, "full")
        broken.append(first)
        checks.wait(f"{first} out of the ISR", lambda: not in_isr(client, first), 10)
        before = load.acked()
        checks.wait("commits with one follower's disk broken", lambda: load.advanced_since(before), 10)
        inject(disks, second, "read-only")
        broken.append(second)
        # A commit sent from now on has no follower to acknowledge it; one sent before
        # may still be answered (its answer on its way), whenever that arrives.
        sent_before = [one.attempted for one in load.loads]
        checks.wait("the ISR down to the leader", lambda: rows(client)[0]["isr"] == [leader], 10)
        window = time.monotonic()
        extra = groups_on(client, 0, 3)[-1]
        refusal = refused_retriably(extra)
        checks.check(refusal is None, f"a commit below min ISR was not refused retriably: {refusal}")
        unanswered = committed_reads_answered(load.loads)
        checks.check(unanswered is None, f"a read below min ISR: {unanswered}")
        time.sleep(max(0.0, window + 3.0 - time.monotonic()))  # commits go on being sent meanwhile
        refused_from = load.acked()
        checks.check(all(acked <= sent for acked, sent in zip(refused_from, sent_before, strict=True)),
                     f"a commit was acknowledged below min ISR: {refused_from} > {sent_before}")
        disks.heal(first)
        broken.remove(first)
        served = checks.wait("commits again once one disk healed",
                             lambda: load.advanced_since(refused_from), REJOIN_S)
        checks.wait(f"{first} back in the ISR", lambda: in_isr(client, first), REJOIN_S)
        disks.heal(second)
        broken.remove(second)
        full = checks.wait("the full ISR after both heals", lambda: fully_replicated(client), REJOIN_S)
        summary = (f"served again {served if served is None else round(served, 1)} s after the first heal, "
                   f"full ISR {full if full is None else round(full, 1)} s after the second; ")
    finally:
        for node in broken:
            disks.heal(node)
    return summary + load.finish(checks, None)


def moved(cluster: Cluster, disks: NodeDisks, checks: Checks) -> str:
    client = fresh_service(cluster, disks, **{MOVE_DELAY_SETTING: MOVE_DELAY_S})
    _, followers = roles(client)
    victim = followers[0]
    before = sorted(rows(client)[0]["replicas"])
    load = Load(client)
    time.sleep(2.0)
    started = time.monotonic()
    try:
        inject(disks, victim, "full")

        def moved_away() -> bool:
            row = rows(client)[0]
            return victim not in row["replicas"] and len(row["replicas"]) == 3 and fully_replicated(client)

        took = checks.wait(f"{victim}'s replica moved to another node, fully replicated",
                           moved_away, MOVE_DELAY_S + 25)
    finally:
        disks.heal(victim)
    after = sorted(rows(client)[0]["replicas"])
    summary = load.finish(checks, started)
    return f"replicas {before} -> {after} ({took if took is None else round(took, 1)} s); {summary}"


CASES: dict[str, Callable[[Cluster, NodeDisks, Checks], str]] = {
    "follower-full": follower_full,
    "follower-full-idle": follower_full_idle,
    "leader-full": leader_full,
    "follower-read-only": follower_read_only,
    "two-followers": two_followers,
    "moved": moved,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)} (all when none)")
    parser.add_argument("--root", default=None, help="the rig's directory (a new temporary one if not given)")
    args = parser.parse_args()
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {list(CASES)}")
    failed = []
    with cluster_with_disks(WORKERS, NAMESPACE, root=args.root) as (cluster, disks):
        for case in args.cases or list(CASES):
            checks = Checks(case)
            started = time.monotonic()
            print(f"case {case}: starting", flush=True)
            try:
                summary = CASES[case](cluster, disks, checks)
                checks.done()
            except Exception as exc:  # noqa: BLE001 - report the case and go on with the next
                failed.append(case)
                earlier = "" if str(exc).startswith(f"{case}: ") else " | ".join(checks.failures)
                print(f"case {case}: FAILED after {time.monotonic() - started:.0f} s: {exc!r:.600}"
                      + (f" (and: {earlier})" if earlier else ""), flush=True)
                continue
            print(f"case {case}: passed in {time.monotonic() - started:.0f} s: {summary}", flush=True)
    print(f"{len(failed)} of {len(args.cases or CASES)} disk-fault cases failed: {failed}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
