"""Benchmark of the coordinator on Ray: `python -m bench.actors`.

Starts an embedded local Ray cluster and the service (fsync on, initial
rebalance delay 0) in a temporary directory and prints, for the async
client both with one Ray call per request and coalesced (its default; see
actors/client/coalesce.py):
- OffsetCommit calls/s, 1 and 100 partitions per call, with many concurrent
  callers, as a ratio to a no-op method of the partition actor called the
  same way: the same request, built and sent the same way, to the same
  actor (target: >= 0.70);
- rebalance latency of a Stable group of 10, 100 and 1,000 members that all
  rejoin: from the last member's JoinGroup to every member's SyncGroup
  response, as a ratio to one no-op round trip per member (target: 1,000
  members within 2 s);
- a lone no-op call to a partition actor: its round trip and the CPU it
  costs the partition's process (Ray's per-call machinery alone);
- failover: from `ray.kill` of a partition actor holding 10,000 groups to
  its groups serving commits again (target: < 3 s).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import psutil  # type: ignore[import-untyped]
import ray

from actors.client.client import Client, commit_request
from actors.client.coalesce import Coalescer
from bench.embedded import embedded_service
from bench.table import print_figures, progress
from coordinator import CoordinatorConfig, Errors
from coordinator.consumer_protocol import Subscription, encode_subscription
from coordinator.messages import JoinGroupRequest, SyncGroupRequest

# Lone no-op calls: the round trip the rebalance figures compare with, and what a Ray call
# costs the partition actor's process in CPU (user + system, a process-wide reading).
LONE_CALLS = 1_000
SUB = encode_subscription(Subscription(("t",)))
# A changed subscription: every member's rejoin then takes part in the rebalance.
SUB_CHANGED = encode_subscription(Subscription(("t", "u")))


def join_request(group: str, member_id: str, subscription: bytes = SUB) -> JoinGroupRequest:
    protocols = (("range", subscription),)
    return JoinGroupRequest(group, 60_000, 60_000, "consumer", protocols, member_id=member_id)


async def run_calls(calls: int, concurrency: int, make_call: Any) -> tuple[int, float]:
    """(calls made, seconds) of `make_call(worker, i)` awaited by `concurrency` coroutines."""
    per_worker = calls // concurrency

    async def worker(w: int) -> None:
        for i in range(per_worker):
            await make_call(w, i)

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return per_worker * concurrency, time.perf_counter() - started


class NoopSender:
    """Sends a request to a partition actor's no-op the way `client` sends requests."""

    def __init__(self, client: Client):
        self.client = client
        self.coalescers: dict[int, Coalescer] = {}

    def send(self, group: str, request: Any) -> Any:
        partition = self.client.partition_for(group)
        leader = self.client.leader(partition)
        if not self.client.coalesce:
            return leader.noop.remote(request)
        coalescer = self.coalescers.get(partition)
        if coalescer is None:
            loop = asyncio.get_running_loop()
            coalescer = self.coalescers[partition] = Coalescer(leader, loop, "noop", "noop_batch")
        return coalescer.submit(request)


async def bench_commits(
    clients: dict[str, Client], calls: int, concurrency: int, rounds: int
) -> list[tuple[str, float, float]]:
    """Commit calls/s vs the same calls to a no-op method of a partition actor:
    the same request built and sent the same way, only its handling differs.

    Two ways of sending: one Ray call per request, and coalesced (the async
    client's default: what the callers send in one loop turn goes as one
    call; the no-op then goes through a coalescer of its own). The no-op and
    the commit runs alternate in `rounds` rounds and each rate pools its
    rounds, so that a machine whose speed drifts (a shared host) slows both
    alike."""
    rows = []
    for way, client in clients.items():
        sender = NoopSender(client)
        for width in (1, 100):
            offsets = {("t", p): 0 for p in range(width)}

            async def noop(
                w: int, i: int, offsets: dict[tuple[str, int], int] = offsets, sender: NoopSender = sender
            ) -> None:
                group = f"bench-commit-{w}"
                await sender.send(group, commit_request(group, {tp: i for tp in offsets}, -1, "", None, -1))

            async def commit(
                w: int, i: int, offsets: dict[tuple[str, int], int] = offsets, client: Client = client
            ) -> None:
                response = await client.commit_offsets_async(f"bench-commit-{w}", {tp: i for tp in offsets})
                assert response.partitions[0].error is Errors.NONE

            await run_calls(concurrency * 4, concurrency, commit)  # warm up: the groups exist
            totals = {noop: [0, 0.0], commit: [0, 0.0]}
            for _ in range(rounds):
                for call in (noop, commit):
                    done, seconds = await run_calls(calls // rounds, concurrency, call)
                    totals[call][0] += done
                    totals[call][1] += seconds
            rates = {call: done / seconds for call, (done, seconds) in totals.items()}
            rows.append((f"OffsetCommit x{width} partitions, {way}", rates[commit], rates[noop]))
    return rows


async def form_and_rebalance(client: Client, group: str, members: int) -> float:
    """Seconds from the last JoinGroup of a full rejoin to the last SyncGroup answer."""
    # KIP-394: members get their ids first, so the join phase waits for all of them.
    first = await asyncio.gather(*(client.join_group_async(join_request(group, "")) for _ in range(members)))
    ids = [r.member_id for r in first]
    joined = await asyncio.gather(*(client.join_group_async(join_request(group, m)) for m in ids))
    assert {r.error for r in joined} == {Errors.NONE} and await sync_all(client, group, joined)
    rejoin = [client.join_group_async(join_request(group, m, SUB_CHANGED)) for m in ids]
    started = time.perf_counter()
    joined = await asyncio.gather(*rejoin)
    assert await sync_all(client, group, joined)
    return time.perf_counter() - started


async def sync_all(client: Client, group: str, joined: list[Any]) -> bool:
    leader = joined[0].leader
    generation = joined[0].generation_id
    assignment = tuple((r.member_id, b"a") for r in joined)
    responses = await asyncio.gather(
        *(
            client.sync_group_async(
                SyncGroupRequest(
                    group, generation, r.member_id, assignments=assignment if r.member_id == leader else ()
                )
            )
            for r in joined
        )
    )
    return all(r.error is Errors.NONE for r in responses)


async def bench_failover(client: Client, groups: int) -> tuple[float, int]:
    partition = 0
    names = [g for g in (f"fo-{i}" for i in range(groups * 60)) if client.partition_for(g) == partition][
        :groups
    ]
    sem = asyncio.Semaphore(200)

    async def seed(g: str) -> None:
        async with sem:
            await client.commit_offsets_async(g, {("t", p): 1 for p in range(10)})

    await asyncio.gather(*(seed(g) for g in names))
    client.refresh()
    leader = client.leader(partition)
    started = time.perf_counter()
    ray.kill(leader, no_restart=True)
    response = await client.commit_offsets_async(names[0], {("t", 0): 2})
    elapsed = time.perf_counter() - started
    assert response.partitions[0].error is Errors.NONE
    status = client.status()[partition]
    return elapsed, int(status.get("loaded_records", 0))


async def run(args: argparse.Namespace, client: Client) -> list[tuple[str, ...]]:
    """The figures table's rows; each figure also on stderr as it is measured."""
    rows: list[tuple[str, ...]] = []
    per_call = Client(client.controller, coalesce=False)
    ways = {"one call each": per_call, "coalesced": client}
    for name, value, noop in await bench_commits(ways, args.calls, args.concurrency, args.rounds):
        progress(f"{name}: {value:,.0f}/s vs no-op {noop:,.0f}/s")
        rows.append(
            (
                f"{name}, {args.concurrency} callers",
                f"{value:,.0f} calls/s",
                f"{noop:,.0f} no-op/s",
                f"{value / noop:.2f}",
                ">= 0.70",
            )
        )
    leader = client.leader(0)
    partition_process = psutil.Process((await leader.info.remote())["pid"])
    cpu_before, started = partition_process.cpu_times(), time.perf_counter()
    for _ in range(LONE_CALLS):
        await leader.noop.remote()
    round_trip = (time.perf_counter() - started) / LONE_CALLS
    cpu_after = partition_process.cpu_times()
    cpu_us = (cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system) / LONE_CALLS * 1e6
    progress(f"lone no-op call: {round_trip * 1000:.2f} ms round trip, {cpu_us:.0f} us of partition CPU")
    rows.append(("no-op call to a partition, one at a time", f"{cpu_us:,.0f} us of its CPU",
                 f"{round_trip * 1000:.2f} ms round trip", "", ""))
    for way, way_client in ways.items():
        for members in args.members:
            seconds = await form_and_rebalance(way_client, f"bench-rebalance-{members}-{way}", members)
            progress(f"rebalance of {members}, {way}: {seconds * 1000:,.0f} ms")
            rows.append(
                (
                    f"rebalance, {members} members, {way}",
                    f"{seconds * 1000:,.0f} ms",
                    f"{members * round_trip * 1000:,.0f} ms",
                    f"{seconds / (members * round_trip):.2f}",
                    "<= 2 s" if members == 1000 else "",
                )
            )
    elapsed, records = await bench_failover(client, args.failover_groups)
    rows.append(
        (
            f"failover, {args.failover_groups:,} groups ({records:,} records)",
            f"{elapsed * 1000:,.0f} ms",
            f"{round_trip * 1000:.2f} ms",
            f"{elapsed / round_trip:,.0f}",
            "< 3 s",
        )
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=6_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6, help="alternations of no-op and commit runs")
    parser.add_argument("--members", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--failover-groups", type=int, default=10_000)
    args = parser.parse_args(argv)
    with embedded_service(2, CoordinatorConfig(group_initial_rebalance_delay_ms=0)) as (client, _):
        rows = asyncio.run(run(args, client))
    print_figures(
        "coordinator on Ray (one machine, fsync on)",
        ("figure", "value", "baseline", "ratio", "target"),
        rows,
    )


if __name__ == "__main__":
    main()
