"""Saturation of one offsets partition by members' heartbeats: `python -m bench.saturation`.

`--hosts` host processes (Ray actors) hold the members, each member alone in
its group, every group on one offsets partition; each member heartbeats every
`--interval-ms`, its first beat spread at random over the first interval. The
sweep goes over `--members` (1,000 to 4,000 by default: 2,000 to 8,000
heartbeats/s offered at 500 ms); each level's members are formed afresh
(JoinGroup, SyncGroup) and then run `--seconds` each way, on the same
partition actor:
- one Ray call per request (`Client(coalesce=False)`);
- coalesced (the default client: an in-flight window per leader and process);
- the coalesced no-op baseline: the same heartbeats through a coalescer of the
  partition actor's `noop` / `noop_batch` (the call path, nothing handled).
Members are coroutines on each host's event loop (`AsyncGroupMember`'s way),
or with `--threaded` a thread each (`GroupMember`'s way: the process's
sender), the no-op baseline staying coroutines. Per level and way: the
heartbeats/s answered against those offered, the Ray calls/s into the actor
(counted by the hosts), the actor's CPU per heartbeat (its process's CPU time,
psutil), the members' round trip p50 / p99, and session expirations (answers
other than NONE: must be 0). Targets at saturation: coalesced >= 3x one call,
>= 0.5 of the no-op. The hosts share this machine's cores with the actor.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import psutil  # type: ignore[import-untyped]
import ray

from actors.client.client import Client
from actors.client.coalesce import Coalescer
from bench.actors import SUB
from bench.embedded import embedded_service
from bench.table import print_figures, progress
from coordinator import CoordinatorConfig, Errors
from coordinator.messages import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest

SESSION_MS = 45_000  # Kafka's session.timeout.ms default
WAYS = ("one call", "coalesced", "no-op")


class CountingLeader:
    """A leader handle that records the name of each Ray call made through it (from any
    thread: a list's append is atomic)."""

    def __init__(self, leader: Any) -> None:
        self._leader = leader
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._leader, name)
        calls = self.calls

        class Counted:
            @staticmethod
            def remote(*args: Any) -> Any:
                calls.append(name)
                return method.remote(*args)

        return Counted


def counting(client: Client, partition: int) -> CountingLeader:
    """`client`'s handle of `partition`'s leader, replaced by one that counts its calls."""
    leader = CountingLeader(client.leader(partition))
    client._leaders = list(client._leaders)
    client._leaders[partition] = leader
    return leader


@ray.remote(num_cpus=0)
class Host:
    """Members in one process: formed, then heartbeating one way for a run."""

    def __init__(self, controller: Any, partition: int) -> None:
        self.controller, self.partition = controller, partition
        self.members: list[tuple[str, int, str]] = []  # (group, generation, member id)

    async def form(self, groups: list[str]) -> None:
        client = Client(self.controller)

        async def one(group: str) -> tuple[str, int, str]:
            request = JoinGroupRequest(group, SESSION_MS, rebalance_timeout_ms=SESSION_MS,
                                       protocol_type="consumer", protocols=(("range", SUB),))
            answer = await client.join_group_async(request)
            if answer.error is Errors.MEMBER_ID_REQUIRED:
                request = JoinGroupRequest(group, SESSION_MS, rebalance_timeout_ms=SESSION_MS,
                                           protocol_type="consumer", protocols=(("range", SUB),),
                                           member_id=answer.member_id)
                answer = await client.join_group_async(request)
            await client.sync_group_async(SyncGroupRequest(
                group, answer.generation_id, answer.member_id, assignments=((answer.member_id, b""),)))
            return group, answer.generation_id, answer.member_id

        self.members = list(await asyncio.gather(*(one(g) for g in groups)))

    async def run(self, way: str, interval_s: float, seconds: float, threaded: bool) -> dict[str, Any]:
        """Every member heartbeats every `interval_s` for `seconds`: round trips, errors, calls."""
        client = Client(self.controller, coalesce=way != "one call")
        leader = counting(client, self.partition)
        trips: list[float] = []
        errors = [0]
        deadline = time.perf_counter() + seconds
        if way == "no-op":
            coalescer = Coalescer(leader, asyncio.get_running_loop(), "noop", "noop_batch")
            send: Any = coalescer.submit
        else:
            send = client.send_async
        if threaded and way != "no-op":
            await asyncio.to_thread(self._threads, client, interval_s, deadline, trips, errors)
        else:
            await asyncio.gather(*(
                self._member(send, m, interval_s, deadline, trips, errors) for m in self.members
            ))
        return {"trips": trips, "errors": errors[0], "calls": len(leader.calls)}

    @staticmethod
    async def _member(
        send: Any, member: tuple[str, int, str], interval_s: float, deadline: float,
        trips: list[float], errors: list[int],
    ) -> None:
        request = HeartbeatRequest(*member)
        next_at = time.perf_counter() + random.uniform(0, interval_s)
        while True:
            now = time.perf_counter()
            if next_at > now:
                await asyncio.sleep(next_at - now)
            if time.perf_counter() >= deadline:
                return
            started = time.perf_counter()
            answer = await send(request)
            trips.append(time.perf_counter() - started)
            if answer is not None and answer.error is not Errors.NONE:
                errors[0] += 1
            next_at = max(next_at + interval_s, time.perf_counter())

    def _threads(
        self, client: Client, interval_s: float, deadline: float, trips: list[float], errors: list[int]
    ) -> None:
        def member(group: str, generation: int, member_id: str) -> None:
            next_at = time.perf_counter() + random.uniform(0, interval_s)
            while True:
                now = time.perf_counter()
                if next_at > now:
                    time.sleep(next_at - now)
                if time.perf_counter() >= deadline:
                    return
                started = time.perf_counter()
                answer = client.heartbeat(group, generation, member_id)
                trips.append(time.perf_counter() - started)  # list.append is atomic
                if answer.error is not Errors.NONE:
                    errors[0] += 1
                next_at = max(next_at + interval_s, time.perf_counter())

        pool = [threading.Thread(target=member, args=m) for m in self.members]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()


@dataclass
class Result:
    members: int
    way: str
    offered: float
    answered: float
    calls: float
    cpu_us: float
    p50_ms: float
    p99_ms: float
    errors: int


def groups_on(client: Client, partition: int, prefix: str, n: int) -> list[str]:
    names = (f"{prefix}-{i}" for i in itertools.count())
    return list(itertools.islice((g for g in names if client.partition_for(g) == partition), n))


def measure(args: argparse.Namespace, client: Client) -> list[Result]:
    partition = 0
    leader_pid = ray.get(client.leader(partition).info.remote())["pid"]
    actor = psutil.Process(leader_pid)
    hosts = [Host.remote(client.controller, partition) for _ in range(args.hosts)]  # type: ignore[attr-defined]
    interval_s = args.interval_ms / 1000
    results = []
    for level, members in enumerate(int(m) for m in args.members.split(",")):
        groups = groups_on(client, partition, f"bench-saturation-{level}", members)
        ray.get([host.form.remote(groups[h::args.hosts]) for h, host in enumerate(hosts)])
        for way in WAYS:
            cpu = actor.cpu_times()
            started = time.perf_counter()
            runs = ray.get([host.run.remote(way, interval_s, args.seconds, args.threaded) for host in hosts])
            seconds = time.perf_counter() - started
            used = actor.cpu_times()
            trips = sorted(t for run in runs for t in run["trips"])
            answered = len(trips)
            cpu_s = (used.user + used.system) - (cpu.user + cpu.system)
            result = Result(
                members, way, members / interval_s, answered / args.seconds,
                sum(run["calls"] for run in runs) / args.seconds,
                cpu_s / max(answered, 1) * 1e6,
                trips[len(trips) // 2] * 1000 if trips else float("nan"),
                trips[int(0.99 * (len(trips) - 1))] * 1000 if trips else float("nan"),
                sum(run["errors"] for run in runs),
            )
            progress(f"{members} members, {way}: {result.answered:,.0f}/s of {result.offered:,.0f}/s "
                     f"offered, {result.calls:,.0f} calls/s, {result.cpu_us:.0f} us CPU each, "
                     f"p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, {result.errors} errors "
                     f"({seconds:.1f} s)")
            results.append(result)
    for host in hosts:
        ray.kill(host)
    return results


def rows(results: list[Result]) -> list[tuple[str, ...]]:
    by = {(r.members, r.way): r for r in results}
    out = []
    for r in results:
        one, noop = by[(r.members, "one call")], by[(r.members, "no-op")]
        out.append((
            f"{r.members:,}", r.way, f"{r.offered:,.0f}", f"{r.answered:,.0f}",
            f"{r.answered / one.answered:.2f}", f"{r.answered / noop.answered:.2f}", f"{r.calls:,.0f}",
            f"{r.cpu_us:.0f}", f"{r.p50_ms:.1f}", f"{r.p99_ms:.1f}", str(r.errors),
        ))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--members", default="1000,2000,3000,4000", help="comma-separated levels")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--interval-ms", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=8.0, help="per level and way")
    parser.add_argument("--threaded", action="store_true", help="a thread per member (GroupMember's way)")
    args = parser.parse_args(argv)
    with embedded_service(2, CoordinatorConfig(group_initial_rebalance_delay_ms=0)) as (client, _):
        results = measure(args, client)
    kind = "threads" if args.threaded else "coroutines"
    print_figures(
        f"heartbeats on one partition: members ({kind}) in {args.hosts} processes, every "
        f"{args.interval_ms} ms, {args.seconds:g} s per level and way (one machine, fsync on)",
        ("members", "way", "offered/s", "answered/s", "x one call", "x no-op", "Ray calls/s",
         "actor CPU us/beat", "p50 ms", "p99 ms", "errors"),
        rows(results),
        notes=["targets at saturation: coalesced >= 3x one call and >= 0.5 of the no-op; errors 0"],
    )


if __name__ == "__main__":
    main()
