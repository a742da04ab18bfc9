"""Benchmark of the pure protocol core (no Ray, no log): `python -m bench.core`.

Prints requests/s for OffsetCommit and JoinGroup+SyncGroup rounds and the CPU
time of a large rebalance, each also as a ratio to a baseline measured in the
same run: a bare Python loop doing the minimum per operation (build a tuple
and store it in a dict), so the ratio says how many times the cost of that
floor the core spends.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench.table import print_figures
from coordinator import Errors, Shard
from coordinator.consumer_protocol import Subscription, encode_subscription
from coordinator.messages import (
    JoinGroupRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    SyncGroupRequest,
)

SUBSCRIPTION = encode_subscription(Subscription(("orders",)))


def cpu_seconds(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def baseline_ops_per_s(n: int) -> float:
    store: dict[tuple[str, int], tuple[int, int]] = {}

    def loop() -> None:
        for i in range(n):
            store[("t", i & 1023)] = (i, i)

    return n / cpu_seconds(loop)


def join_request(group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group,
        30_000,
        60_000,
        "consumer",
        (("range", SUBSCRIPTION),),
        member_id=member_id,
        client_id="bench",
        require_known_member_id=False,
    )


def rebalance(shard: Shard, group: str, members: int, now: int) -> tuple[list[str], float]:
    """One join phase and sync of `members` new members.

    Returns their ids and the CPU seconds spent inside the shard; requests
    are built outside the timed part, as they arrive already built.
    """
    joins = [join_request(group) for _ in range(members)]
    answers: dict[int, object] = {}
    cpu = 0.0

    def join_phase() -> None:
        nonlocal now
        for token, request in enumerate(joins):
            answers.update(shard.handle(request, now, token).responses)
        while len(answers) < members:  # the initial delay, extended once per wave
            now += shard.config.group_initial_rebalance_delay_ms
            for result in shard.poll_timers(now):
                answers.update(result.responses)

    cpu += cpu_seconds(join_phase)
    joined = [answers[t] for t in range(members)]
    assert all(r.error is Errors.NONE for r in joined), joined[0]  # type: ignore[attr-defined]
    leader = joined[0].leader  # type: ignore[attr-defined]
    ids = [r.member_id for r in joined]  # type: ignore[attr-defined]
    generation = joined[0].generation_id  # type: ignore[attr-defined]
    assignments = tuple((m, b"x") for m in ids)
    syncs = [
        SyncGroupRequest(group, generation, m, assignments=assignments if m == leader else ()) for m in ids
    ]

    def sync_phase() -> None:
        for token, request in enumerate(syncs, start=members):
            answers.update(shard.handle(request, now, token).responses)

    cpu += cpu_seconds(sync_phase)
    assert all(answers[t].error is Errors.NONE for t in range(members, 2 * members))  # type: ignore[attr-defined]
    return ids, cpu


def bench_commits(n: int, groups: int) -> float:
    shard = Shard()
    members = [(f"g{g}", rebalance(shard, f"g{g}", 1, 0)[0][0]) for g in range(groups)]
    requests = [
        OffsetCommitRequest(group, (OffsetCommitPartition("orders", i & 63, i),), 1, member)
        for i, (group, member) in zip(range(n), members * (n // groups + 1))
    ]
    handle = shard.handle

    def run() -> None:
        for request in requests:
            handle(request, 1_000, None)

    return n / cpu_seconds(run)


def bench_join_sync_rounds(rounds: int) -> float:
    shard = Shard()

    def run() -> None:
        for i in range(rounds):
            rebalance(shard, f"r{i}", 1, 0)

    return rounds / cpu_seconds(run)


def bench_big_rebalance(members: int) -> float:
    return rebalance(Shard(), "big", members, 0)[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=200_000)
    parser.add_argument("--members", type=int, default=1_000)
    args = parser.parse_args(argv)

    base = baseline_ops_per_s(args.commits)
    commits = bench_commits(args.commits, groups=1_000)
    rounds = bench_join_sync_rounds(20_000)
    big_s = bench_big_rebalance(args.members)
    big_base_s = args.members * 2 / base

    rows = [
        ("baseline loop (dict store)", f"{base:,.0f} ops/s", "", "1.00", ""),
        (
            "OffsetCommit, 1 partition",
            f"{commits:,.0f} req/s",
            f"{base:,.0f} ops/s",
            f"{commits / base:.3f}",
            ">= 100,000 req/s",
        ),
        (
            "JoinGroup+SyncGroup round (1 member)",
            f"{rounds:,.0f} rounds/s",
            f"{base:,.0f} ops/s",
            f"{rounds / base:.4f}",
            "",
        ),
        (
            f"rebalance of {args.members} members (join+sync)",
            f"{big_s * 1000:.1f} ms CPU",
            f"{big_base_s * 1000:.2f} ms",
            f"{big_s / big_base_s:.1f}x",
            "< 50 ms",
        ),
    ]
    print_figures(
        "pure core (one CPU, no Ray, no log)",
        ("figure", "value", "baseline", "ratio to baseline", "target"),
        rows,
    )


if __name__ == "__main__":
    main()
