"""Benchmark of the sync client from many threads: `python -m bench.threads`.

What a process of threaded `GroupMember`s costs a partition: `--threads` threads
each send OffsetCommit (1 partition) requests, then Heartbeats (each thread a
member alone in its group), through `Client.send` as fast as their answers come
back, with one Ray call per request (`coalesce=False`) and through the
process's sender (the default: an in-flight window per leader,
actors/client/coalesce.py), alternating the two ways `--rounds` times on the
same partition actor. Also a lone request's round trip both ways (one thread).
Figures: requests/s and the lone round trip, each coalesced figure as a ratio to
the one-call figure of the same run (targets: >= 3x the throughput; a lone
request no more than 10% slower). Fairness: while this process floods the
partition coalesced, another process (a Ray task) commits one request at a
time to the same leader; its round trip's p50 and p99 are given against the
flooding threads' own mean round trip (threads / requests/s): a flood that
starved the other process would put its figures far above that.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import threading
import time
from typing import Any

import ray

from actors.client.client import Client
from bench.actors import SUB
from bench.embedded import embedded_service
from bench.table import print_figures, progress
from coordinator import CoordinatorConfig, Errors
from coordinator.messages import JoinGroupRequest, SyncGroupRequest


def joined(client: Client, group: str) -> tuple[int, str]:
    """(generation, member id) of a member that formed `group` alone (KIP-394 round first)."""
    request = JoinGroupRequest(group, 30_000, rebalance_timeout_ms=30_000, protocol_type="consumer",
                               protocols=(("range", SUB),))
    answer = client.join_group(request)
    if answer.error is Errors.MEMBER_ID_REQUIRED:
        answer = client.join_group(dataclasses.replace(request, member_id=answer.member_id))
    client.sync_group(SyncGroupRequest(group, answer.generation_id, answer.member_id,
                                       assignments=((answer.member_id, b""),)))
    return answer.generation_id, answer.member_id


def requests_per_s(client: Client, threads: int, seconds: float, prefix: str, kind: str = "commit") -> float:
    """Requests/s answered when `threads` threads send `kind` requests (OffsetCommit of one
    partition, or Heartbeat of a member alone in its group) through `client` for `seconds`."""
    names = (f"{prefix}-{i}" for i in itertools.count())
    group = list(itertools.islice((g for g in names if client.partition_for(g) == 0), threads))  # one leader
    members = [joined(client, g) for g in group] if kind == "heartbeat" else []
    done = [0] * threads
    deadline = time.perf_counter() + seconds

    def member(t: int) -> None:
        offset = 0
        while time.perf_counter() < deadline:
            offset += 1
            if members:
                client.heartbeat(group[t], *members[t])
            else:
                client.commit_offsets(group[t], {("t", 0): offset})
            done[t] += 1

    pool = [threading.Thread(target=member, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(done) / (time.perf_counter() - started)


def lone_round_trip_ms(client: Client, calls: int, group: str) -> float:
    times = []
    for i in range(calls):
        started = time.perf_counter()
        client.commit_offsets(group, {("t", 0): i})
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


# The quiet host's process starts (a Ray worker) before this; the flood covers its window.
QUIET_START_S = 5.0
FLOOD_MARGIN_S = 0.5


@ray.remote(num_cpus=0)
def quiet_host(controller: Any, group: str, start_at: float, seconds: float) -> list[float]:
    """Another process: one commit at a time from `start_at` (wall clock) for `seconds`;
    each round trip (s)."""
    client = Client(controller)
    client.commit_offsets(group, {("t", 0): 0})  # routed and connected before timing
    if time.time() > start_at:
        raise RuntimeError("the quiet host started after its window: raise QUIET_START_S")
    time.sleep(start_at - time.time())
    times, deadline = [], time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        client.commit_offsets(group, {("t", 0): len(times)})
        times.append(time.perf_counter() - started)
    return times


def fairness(args: argparse.Namespace, coalesced: Client) -> list[tuple[str, ...]]:
    """The quiet host's round trips while this process floods the same leader."""
    names = (f"bench-quiet-{i}" for i in itertools.count())
    group = next(g for g in names if coalesced.partition_for(g) == 0)
    start_at = time.time() + QUIET_START_S
    quiet = quiet_host.remote(coalesced.controller, group, start_at, args.seconds)
    time.sleep(max(0.0, start_at - FLOOD_MARGIN_S - time.time()))
    rate = requests_per_s(coalesced, args.threads, args.seconds + 2 * FLOOD_MARGIN_S, "bench-flood")
    times = sorted(ray.get(quiet))
    flood_ms = args.threads / rate * 1000
    p50, p99 = (times[int(q * (len(times) - 1))] * 1000 for q in (0.5, 0.99))
    progress(f"fairness: flood {rate:,.0f}/s ({flood_ms:.1f} ms each), quiet host p50 {p50:.1f} ms, "
             f"p99 {p99:.1f} ms over {len(times)} commits")
    return [
        (f"quiet host's round trip p50, {args.threads} threads flooding", f"{p50:.1f} ms",
         f"{flood_ms:.1f} ms", f"{p50 / flood_ms:.2f}", "<= 1"),
        (f"quiet host's round trip p99, {args.threads} threads flooding", f"{p99:.1f} ms",
         f"{flood_ms:.1f} ms", f"{p99 / flood_ms:.2f}", ""),
    ]


def run(args: argparse.Namespace, coalesced: Client) -> list[tuple[str, ...]]:
    ways = {"one call each": Client(coalesced.controller, coalesce=False), "coalesced": coalesced}
    rates: dict[str, list[float]] = {way: [] for way in ways}
    trips: dict[str, list[float]] = {way: [] for way in ways}
    beats: dict[str, list[float]] = {way: [] for way in ways}
    for round_ in range(args.rounds):
        for way, client in ways.items():
            rate = requests_per_s(client, args.threads, args.seconds, f"bench-threads-{round_}")
            beat = requests_per_s(client, args.threads, args.seconds, f"bench-beats-{round_}", "heartbeat")
            trip = lone_round_trip_ms(client, 200, f"bench-lone-{way}")
            rates[way].append(rate)
            beats[way].append(beat)
            trips[way].append(trip)
            progress(f"round {round_}, {way}: {rate:,.0f} commits/s, {beat:,.0f} heartbeats/s, "
                     f"lone {trip:.2f} ms")
    one, many = statistics.median(rates["one call each"]), statistics.median(rates["coalesced"])
    lone_one, lone_many = statistics.median(trips["one call each"]), statistics.median(trips["coalesced"])
    beat_one, beat_many = statistics.median(beats["one call each"]), statistics.median(beats["coalesced"])
    return [
        (f"Heartbeat, {args.threads} threads, one call each", f"{beat_one:,.0f}/s", "", "1.00", ""),
        (f"Heartbeat, {args.threads} threads, coalesced", f"{beat_many:,.0f}/s", f"{beat_one:,.0f}/s",
         f"{beat_many / beat_one:.2f}", ">= 3"),
        (f"OffsetCommit x1, {args.threads} threads, one call each", f"{one:,.0f}/s", "", "1.00", ""),
        (f"OffsetCommit x1, {args.threads} threads, coalesced", f"{many:,.0f}/s", f"{one:,.0f}/s",
         f"{many / one:.2f}", ">= 3"),
        ("a lone request, one call", f"{lone_one:.2f} ms", "", "1.00", ""),
        ("a lone request, coalesced", f"{lone_many:.2f} ms", f"{lone_one:.2f} ms",
         f"{lone_many / lone_one:.2f}", "<= 1.10"),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measured run")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two ways")
    args = parser.parse_args(argv)
    with embedded_service(2, CoordinatorConfig(group_initial_rebalance_delay_ms=0)) as (client, _):
        rows = run(args, client) + fairness(args, client)
    print_figures(
        "sync client from many threads (one machine, fsync on; medians of the rounds)",
        ("figure", "value", "baseline", "ratio", "target"),
        rows,
    )


if __name__ == "__main__":
    main()
