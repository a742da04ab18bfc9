"""Benchmark of replication (issue 13): `python -m bench.replication [--quick]`.

A simulated cluster on this machine (`ray.cluster_utils.Cluster`: a head
and worker nodes of one CPU each, each node with its own directory standing
for its disk; they share the host's two cores and disk). Prints, each
against a baseline taken in the same run:
- commit throughput and p50/p99 latency at replication factor 3 (min ISR 2)
  against factor 1, on 3 nodes: the same async committers (one group each,
  1-partition commits, coalesced client) against two services started side
  by side, their rounds alternating so a drifting host slows both alike
  (target: factor 3 >= 0.5 of factor 1's throughput);
- the cost of read confirmation (issue 24: a leader answers a read only once
  its ISR followers answered a push sent after it): OffsetFetch throughput
  and p50/p99 latency at factor 3 with `confirm_reads` against the same
  service without it, side by side and alternating as above, with 64 async
  readers; and the p50 of one reader alone, where no read shares a round;
- failover, on 4 nodes (a 4th so that a spare node can take the lost
  replica): partition 0 holds `--groups` groups, its leader is moved to a
  worker without the controller, and that node crashes with its disk (its
  actor processes SIGKILLed, then its Ray daemons, then its directory
  deleted) while one group commits without pause. Figure: from the node's
  processes being dead to the first commit acknowledged after
  (target: < 1 s); then the same with `--more-groups` (10x the state), as a
  ratio to the first (target: it does not grow);
- catch-up: the controller re-creates the lost replica on the spare node
  (`replica_reassign_delay_s`) and it fills from empty. Figure: records/s
  from the leader's first answer from it to its log end reaching the
  leader's, against the leader load rate: replaying the same log from its
  directory into a Shard (`log.load_into`, no snapshot), timed in this
  process.
Every Ray process is gone afterwards (ray.shutdown, cluster.shutdown).
Stdout holds the figures table only (bench/table.py: plain text at full width
when piped): progress goes to stderr, and what Ray reports to the driver
(the crashed nodes' raylets dying, with their logs' tails) to a log file
named on stderr at the end (bench/driver_log.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import ray
from ray.cluster_utils import Cluster

import actors
from actors.core.settings import CONTROLLER_NAME, ServiceSettings
from actors.demo.sim_cluster import FAST_NODE_FAILURE, simulated_cluster, status_rows, wait_for
from bench.driver_log import log_file
from bench.table import Row, print_table, progress
from coordinator import CoordinatorConfig, Errors, Shard
from log import load_into, replica_dir

NAMESPACE = "raygroups-bench-replication"
PARTITION = 0  # the partition the failover and catch-up figures use
POLL_S = 0.01


# ------------------------------------------------------------------ cluster


def service_settings(
    data_dir: str, namespace: str, replication_factor: int, partitions: int
) -> ServiceSettings:
    """Product defaults but for the replication factor and no standbys (the
    replicated plane has none; the factor-1 service runs without, alike)."""
    return ServiceSettings(
        data_dir=os.path.join(data_dir, namespace),
        num_partitions=partitions,
        namespace=namespace,
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
        replication_factor=replication_factor,
        min_insync_replicas=min(2, replication_factor),
        standby_actors=0,
    )


def serving(client: actors.Client) -> bool:
    """Every partition led and ACTIVE, with every replica in the ISR (factor 1: no replica list)."""
    return all(
        r.get("state") == "ACTIVE" and ("replicas" not in r or sorted(r["isr"]) == sorted(r["replicas"]))
        for r in status_rows(client).values()
    )


def groups_on(client: actors.Client, partition: int, start: int, count: int, prefix: str) -> list[str]:
    """`count` group ids of `partition`, the next ones after the first `start`."""
    names: list[str] = []
    i = 0
    while len(names) < start + count:
        name = f"{prefix}-{i}"
        if client.partition_for(name) == partition:
            names.append(name)
        i += 1
    return names[start:]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --------------------------------------------------------------- throughput


@dataclass
class Pooled:
    """Commits and their latencies, pooled over the rounds of one service."""

    commits: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.commits / self.seconds


async def commit_round(client: actors.Client, groups: list[str], per_group: int, into: Pooled) -> None:
    """Each group commits `per_group` times, one after the other, all groups at once."""

    async def committer(group: str) -> None:
        for i in range(per_group):
            started = time.perf_counter()
            response = await client.commit_offsets_async(group, {("t", 0): i})
            into.latencies_ms.append((time.perf_counter() - started) * 1000)
            if response.errors() != {("t", 0): Errors.NONE}:
                raise RuntimeError(f"{group}: commit refused: {response}")

    started = time.perf_counter()
    await asyncio.gather(*map(committer, groups))
    into.seconds += time.perf_counter() - started
    into.commits += per_group * len(groups)


async def alternate(clients: dict[int, actors.Client], args: argparse.Namespace) -> dict[int, Pooled]:
    groups = [f"tp-{w}" for w in range(args.committers)]
    per_group = max(1, args.calls // args.rounds // args.committers)
    pooled = {rf: Pooled() for rf in clients}
    for client in clients.values():
        await commit_round(client, groups, 4, Pooled())  # warm up: the groups exist
    for _ in range(args.rounds):
        for rf, client in clients.items():
            await commit_round(client, groups, per_group, pooled[rf])
    return pooled


def bench_throughput(cluster: Cluster, data_dir: str, args: argparse.Namespace) -> list[Row]:
    clients = {}
    for rf in (1, 3):
        settings = service_settings(data_dir, f"{NAMESPACE}-rf{rf}", rf, args.partitions)
        clients[rf] = actors.start(settings=settings, address=cluster.address)
    for client in clients.values():
        wait_for("both services serving", lambda client=client: serving(client))  # type: ignore[misc]
    try:
        pooled = asyncio.run(alternate(clients, args))
    finally:
        for rf in clients:
            actors.stop(f"{NAMESPACE}-rf{rf}")
    one, three = pooled[1], pooled[3]
    callers = f"{args.committers} async committers, {args.partitions} partitions, 3 nodes"
    rows = [
        Row("commits, replication factor 1", one.rate, "commits/s", 1.0, f"baseline; {callers}"),
        Row("commits, replication factor 3 (min ISR 2)", three.rate, "commits/s", three.rate / one.rate,
            "target >= 0.50"),
    ]
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        base = percentile(one.latencies_ms, q)
        rows.append(Row(f"commit latency {name}, factor 1", base, "ms", 1.0, "baseline"))
        value = percentile(three.latencies_ms, q)
        rows.append(Row(f"commit latency {name}, factor 3", value, "ms", value / base, "x factor 1"))
    return rows


# -------------------------------------------------------------------- reads

# Service name -> its confirm_reads setting; the first is the baseline.
READ_SERVICES = {"unconfirmed": False, "confirmed": True}


async def fetch_round(client: actors.Client, groups: list[str], per_group: int, into: Pooled) -> None:
    """Each group's offset is fetched `per_group` times, one after the other, all groups at once."""

    async def reader(group: str) -> None:
        for _ in range(per_group):
            started = time.perf_counter()
            response = await client.fetch_offsets_async(group, [("t", 0)])
            into.latencies_ms.append((time.perf_counter() - started) * 1000)
            if response.error is not Errors.NONE or response.offsets() != {("t", 0): 1}:
                raise RuntimeError(f"{group}: fetch refused: {response}")

    started = time.perf_counter()
    await asyncio.gather(*map(reader, groups))
    into.seconds += time.perf_counter() - started
    into.commits += per_group * len(groups)


async def alternate_reads(
    clients: dict[str, actors.Client], args: argparse.Namespace
) -> tuple[dict[str, Pooled], dict[str, Pooled]]:
    """(64 readers, one reader) per service, rounds alternating between the services."""
    groups = [f"rd-{w}" for w in range(args.committers)]
    per_group = max(1, args.calls // args.rounds // args.committers)
    many = {name: Pooled() for name in clients}
    alone = {name: Pooled() for name in clients}
    for client in clients.values():
        await commit_round(client, groups, 2, Pooled())  # offsets 0, then 1: what the reads expect
        await fetch_round(client, groups, 2, Pooled())  # warm up
    for _ in range(args.rounds):
        for name, client in clients.items():
            await fetch_round(client, groups, per_group, many[name])
            await fetch_round(client, groups[:1], per_group, alone[name])
    return many, alone


def bench_reads(cluster: Cluster, data_dir: str, args: argparse.Namespace) -> list[Row]:
    clients = {}
    for name, confirm in READ_SERVICES.items():
        namespace = f"{NAMESPACE}-reads-{name}"
        settings = replace(service_settings(data_dir, namespace, 3, args.partitions), confirm_reads=confirm)
        clients[name] = actors.start(settings=settings, address=cluster.address)
    for client in clients.values():
        wait_for("both services serving", lambda client=client: serving(client))  # type: ignore[misc]
    try:
        many, alone = asyncio.run(alternate_reads(clients, args))
    finally:
        for name in clients:
            actors.stop(f"{NAMESPACE}-reads-{name}")
    base, checked = many["unconfirmed"], many["confirmed"]
    readers = f"{args.committers} async readers, factor 3 (min ISR 2), {args.partitions} partitions, 3 nodes"
    rows = [
        Row("OffsetFetch/s, reads unconfirmed", base.rate, "fetches/s", 1.0, f"baseline; {readers}"),
        Row("OffsetFetch/s, reads confirmed", checked.rate, "fetches/s", checked.rate / base.rate,
            "confirm_reads (the default)"),
    ]
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        value, reference = percentile(checked.latencies_ms, q), percentile(base.latencies_ms, q)
        rows.append(Row(f"OffsetFetch latency {name}, unconfirmed", reference, "ms", 1.0, "baseline"))
        rows.append(
            Row(f"OffsetFetch latency {name}, confirmed", value, "ms", value / reference, "x unconfirmed")
        )
    value = percentile(alone["confirmed"].latencies_ms, 0.5)
    reference = percentile(alone["unconfirmed"].latencies_ms, 0.5)
    rows.append(Row("OffsetFetch latency p50, one reader, unconfirmed", reference, "ms", 1.0, "baseline"))
    rows.append(Row("OffsetFetch latency p50, one reader, confirmed", value, "ms", value / reference,
                    f"adds {value - reference:.2f} ms: one push round trip"))
    return rows


# ----------------------------------------------------------------- failover


class Committer:
    """One group committing without pause on a thread of its own (its event
    loop goes on while this thread removes a node); remembers when each
    commit was acknowledged."""

    def __init__(self, namespace: str, group: str) -> None:
        self.client = actors.connect(namespace=namespace, timeout_s=30.0)
        self.group = group
        self.acked: list[float] = []
        self.sent: list[float] = []  # when each acknowledged commit was sent, beside `acked`
        self.errors = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self._run(),), daemon=True)

    async def _run(self) -> None:
        offset = 0
        while not self.stop.is_set():
            offset += 1
            sent = time.monotonic()
            try:
                response = await self.client.commit_offsets_async(self.group, {("t", 0): offset})
            except Exception:  # unavailable past the client's deadline: counted, tried again
                self.errors += 1
                continue
            if response.errors() == {("t", 0): Errors.NONE}:
                self.acked.append(time.monotonic())
                self.sent.append(sent)
            else:
                self.errors += 1
            await asyncio.sleep(0.002)

    def __enter__(self) -> Committer:
        self.thread.start()
        wait_for("the committer's first commits", lambda: len(self.acked) >= 20)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)

    def first_after(self, t: float) -> float:
        return next(a for a in self.acked if a > t)

    def first_sent_after(self, t: float) -> float:
        """When the first commit sent after `t` was acknowledged (an acknowledgement after
        `t` may answer a commit sent before it)."""
        return next(a for a, s in zip(self.acked, self.sent, strict=True) if s > t)

    def longest_gap(self, start: float, end: float) -> float:
        times = [start, *(a for a in self.acked if start < a < end), end]
        return max(b - a for a, b in zip(times, times[1:]))


async def fill(client: actors.Client, groups: list[str], partitions_per_group: int) -> None:
    """Each group commits `partitions_per_group` partitions once; many commits in flight."""
    in_flight = asyncio.Semaphore(500)
    offsets = {("t", p): 1 for p in range(partitions_per_group)}

    async def commit(group: str) -> None:
        async with in_flight:
            response = await client.commit_offsets_async(group, offsets)
            if any(e is not Errors.NONE for e in response.errors().values()):
                raise RuntimeError(f"{group}: seed commit refused: {response}")

    await asyncio.gather(*map(commit, groups))


def leader_on_removable_worker(client: actors.Client, cluster: Cluster, namespace: str) -> str:
    """Move partition 0's leadership, if needed, to a worker without the controller; its node id."""
    controller = ray.get_actor(CONTROLLER_NAME, namespace=namespace)
    stats: Any = ray.get(controller.stats.remote())
    controller_node = stats["node_id"]
    removable = {w.node_id for w in cluster.worker_nodes} - {controller_node}
    row = status_rows(client)[PARTITION]
    if row["leader_node"] not in removable:
        client.reassign(PARTITION, next(n for n in row["isr"] if n in removable))
        wait_for("the moved leader serving", lambda: serving(client))
    return str(status_rows(client)[PARTITION]["leader_node"])


def routing_epoch(controller: Any) -> int:
    """Partition 0's leader epoch in the controller's committed metadata."""
    routing: Any = ray.get(controller.routing.remote())
    return int(routing[2][PARTITION])


def led_elsewhere(client: actors.Client, node: str) -> bool:
    row = status_rows(client)[PARTITION]
    return row.get("state") == "ACTIVE" and row.get("leader_node") not in (None, node)


def caught_up(client: actors.Client) -> bool:
    """Partition 0 serving with every replica in the ISR and at the leader's log end."""
    row = status_rows(client)[PARTITION]
    followers = row.get("followers") or {}
    return serving(client) and all(f["lag"] == 0 for f in followers.values())


@dataclass
class Failover:
    groups: int
    records: int
    elected_s: float
    served_again_s: float
    longest_gap_s: float
    move_gap_s: float
    catch_up: CatchUp
    load_rate: float


@dataclass
class CatchUp:
    """The new replica as its leader saw it: (seconds, its log end) per observation."""

    started: float
    seen: list[tuple[float, int]] = field(default_factory=list)
    in_isr: float = 0.0

    @property
    def rate(self) -> float:
        """Records/s between its first and its caught-up answer (nan if seen only once)."""
        (t0, end0), (t1, end1) = self.seen[0], self.seen[-1]
        return (end1 - end0) / (t1 - t0) if t1 > t0 else float("nan")

    @property
    def total_s(self) -> float:
        return self.in_isr - self.started


def watch_catch_up(leader: Any, before: set[str], timeout_s: float = 300.0) -> tuple[str, CatchUp]:
    """Poll the leader until a follower not in `before` (the replicas before
    the loss, the lost one included) appears: the moved replica; then until
    it catches up to the leader's log end and is in the ISR."""
    deadline = time.monotonic() + timeout_s
    new: str | None = None
    catch_up = CatchUp(0.0)
    while time.monotonic() < deadline:
        probe = ray.get(leader.probe.remote())
        now = time.monotonic()
        followers = probe.get("followers") or {}
        if new is None:
            new = next((n for n in followers if n not in before), None)
            catch_up.started = now
        if new is not None and new in followers:
            end = followers[new]["log_end"]
            behind = catch_up.seen and catch_up.seen[-1][1] >= (probe.get("log_end") or 0)
            if end is not None and not behind:
                catch_up.seen.append((now, end))
            if new in (probe.get("isr") or ()) and catch_up.seen:
                catch_up.in_isr = now
                return new, catch_up
        time.sleep(POLL_S)
    raise TimeoutError(f"the moved replica ({new}) did not catch up in {timeout_s} s")


def leader_load_rate(directory: str, runs: int = 3) -> float:
    """Records/s replaying the log in `directory` into a new Shard, best of `runs`."""
    best = 0.0
    for _ in range(runs):
        started = time.perf_counter()
        stats = load_into(Shard(), directory, use_snapshot=False)
        best = max(best, stats.records / (time.perf_counter() - started))
    return best


def crash(cluster: Cluster, node: Any, data_dir: str) -> None:
    """The node is lost with its disk. Its actor processes are SIGKILLed first:
    `remove_node` kills the node's Ray daemons, and a worker outlives its
    raylet for a moment, during which an old leader could still answer."""
    for info in ray._private.state.actors().values():
        if info["State"] == "ALIVE" and info["Address"]["NodeID"] == node.node_id:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(info["Pid"]), signal.SIGKILL)
    cluster.remove_node(node, allow_graceful=False)
    shutil.rmtree(os.path.join(data_dir, "nodes", node.node_id), ignore_errors=True)


def failover_round(
    cluster: Cluster, client: actors.Client, settings: ServiceSettings, groups: list[str], ppg: int
) -> Failover:
    """Fill, remove partition 0's leader node with its disk, watch the lost replica come back."""
    asyncio.run(fill(client, groups, ppg))
    wait_for("partition 0 fully replicated", lambda: caught_up(client))
    victim = leader_on_removable_worker(client, cluster, settings.namespace)
    row = status_rows(client)[PARTITION]
    total_groups, records, before = row["groups"], row["log_end"], set(row["replicas"])
    node = next(w for w in cluster.worker_nodes if w.node_id == victim)
    controller = ray.get_actor(CONTROLLER_NAME, namespace=settings.namespace)
    live_group = groups_on(client, PARTITION, 0, 1, "fo-live")[0]
    with Committer(settings.namespace, live_group) as committer:
        epoch = routing_epoch(controller)
        started = time.monotonic()
        crash(cluster, node, settings.data_dir)
        dead = time.monotonic()
        wait_for("an election", lambda: routing_epoch(controller) > epoch, poll_s=POLL_S)
        elected = time.monotonic() - dead
        wait_for("a commit after the loss", lambda: bool(committer.acked) and committer.acked[-1] > dead)
        wait_for("a new leader", lambda: led_elsewhere(client, victim))
        client.refresh()
        new, catch_up = watch_catch_up(client.leader(PARTITION), before)
    served_again = committer.first_after(dead) - dead
    gap = committer.longest_gap(started, catch_up.started)
    move_gap = committer.longest_gap(catch_up.started, catch_up.in_isr)
    load_rate = leader_load_rate(replica_dir(settings.data_dir, new, PARTITION))
    return Failover(total_groups, records, elected, served_again, gap, move_gap, catch_up, load_rate)


def bench_failover(cluster: Cluster, data_dir: str, args: argparse.Namespace) -> list[Failover]:
    """One service, partition 0 filled to `args.groups` then `args.more_groups` groups, a failover at each."""
    settings = service_settings(data_dir, f"{NAMESPACE}-fo", 3, args.partitions)
    settings = replace(settings, replica_reassign_delay_s=args.reassign_delay)
    client = actors.start(settings=settings, address=cluster.address)
    runs: list[Failover] = []
    try:
        wait_for("the service serving", lambda: serving(client))
        filled = 0
        for count in (args.groups, args.more_groups):
            if len(cluster.worker_nodes) < 3:  # a spare node for the lost replica
                cluster.add_node(num_cpus=1)
                cluster.wait_for_nodes()
            groups = groups_on(client, PARTITION, filled, count - filled, "fo")
            runs.append(failover_round(cluster, client, settings, groups, args.partitions_per_group))
            filled = count
            progress(f"failover with {runs[-1].groups:,} groups done")
    finally:
        actors.stop(settings.namespace)
    return runs


def ratio(value: float, base: float) -> float | None:
    return value / base if base > 0 else None


def failover_rows(runs: list[Failover]) -> list[Row]:
    base = runs[0]
    rows = []
    for run in runs:
        state = f"{run.groups:,} groups, {run.records:,} records"
        first = run is base
        rows += [
            Row(f"failover, {state}: commits served again", run.served_again_s * 1000, "ms",
                None if first else ratio(run.served_again_s, base.served_again_s),
                "target < 1 s" + ("" if first else "; ratio: x the smaller state")),
            Row("  new leader elected (controller metadata)", run.elected_s * 1000, "ms",
                ratio(run.elected_s, base.elected_s), "from the processes dead to the epoch committed"),
            Row("  longest commit gap around the loss", run.longest_gap_s * 1000, "ms",
                None if first else ratio(run.longest_gap_s, base.longest_gap_s),
                "from the start of the node's crash (its SIGKILLs included)"),
            Row("  longest commit gap while the replica moves", run.move_gap_s * 1000, "ms",
                None if first else ratio(run.move_gap_s, base.move_gap_s),
                "the move bumps the leader epoch"),
            Row("  leader load of the same log", run.load_rate, "records/s", 1.0,
                "baseline: log.load_into a Shard, no snapshot, in this process"),
            Row("  catch-up of the new replica", run.catch_up.rate, "records/s",
                run.catch_up.rate / run.load_rate,
                f"{run.catch_up.seen[-1][1]:,} records; {run.catch_up.total_s:.2f} s from the move "
                f"to in the ISR (actor start included)"),
        ]
    return rows


# --------------------------------------------------------------------- main


def run(args: argparse.Namespace) -> list[Row]:
    with simulated_cluster(
        2, NAMESPACE, "raygroups-bench-replication-", system_config=FAST_NODE_FAILURE
    ) as (cluster, data_dir):
        progress(f"Ray's logs of this cluster: {cluster.head_node.get_logs_dir_path()}")
        if args.reads_only:
            return bench_reads(cluster, data_dir, args)
        rows = bench_throughput(cluster, data_dir, args)
        progress("throughput done")
        rows += bench_reads(cluster, data_dir, args)
        progress("reads done")
        cluster.add_node(num_cpus=1)  # the failover runs on 4 nodes: one is a spare
        cluster.wait_for_nodes()
        rows += failover_rows(bench_failover(cluster, data_dir, args))
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes")
    parser.add_argument("--reads-only", action="store_true", help="only the read confirmation figures")
    parser.add_argument("--calls", type=int, default=12_000, help="commits per service, all rounds")
    parser.add_argument("--committers", type=int, default=64, help="concurrent async committers")
    parser.add_argument("--rounds", type=int, default=6, help="alternations of the two services")
    parser.add_argument("--partitions", type=int, default=2, help="offsets partitions per service")
    parser.add_argument("--groups", type=int, default=10_000, help="groups in partition 0, first failover")
    parser.add_argument("--more-groups", type=int, default=100_000, help="groups, second failover")
    parser.add_argument("--partitions-per-group", type=int, default=10, help="committed by each group")
    parser.add_argument("--reassign-delay", type=float, default=2.0, help="replica_reassign_delay_s")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.rounds, args.groups, args.more_groups = 1_280, 2, 500, 5_000
    if not 0 < args.groups < args.more_groups:
        parser.error("--groups must be positive and below --more-groups")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    # Ray prints what the cluster reports to drivers (the crashed nodes' raylets
    # dying, with their logs' tails) on stdout: into a log file, named on stderr.
    with log_file("raygroups-bench-replication"):
        rows = run(args)
    day = datetime.date.today().isoformat()
    print_table(f"replication on a simulated cluster, {os.cpu_count()} cores, {day}", rows, "ratio", 2)


if __name__ == "__main__":
    main()
