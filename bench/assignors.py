"""The server-side assignors of the consumer group protocol (KIP-848), alone:
`python -m bench.assignors`.

Issue 23's case: 1,000 members subscribed to 10,000 partitions (10 topics of
1,000), the `uniform` assignor (Kafka's default) computing a fresh target,
then again after one member joins (sticky: only the partitions the newcomer
takes move) and after one leaves; the `range` assignor on the same input.
Each time is the best of `--rounds` CPU times, and is printed as a ratio to
two baselines measured in the same run: the floor (a bare loop storing every
partition in a member's set, the least any assignor must do) and the classic
protocol's client-side cooperative-sticky assignor on the same group (what a
classic group leader computes).
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.table import print_figures
from coordinator.assignors.base import MemberSubscription
from coordinator.assignors.registry import get_assignor
from coordinator.consumer.assignors import (
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    RangeAssignor,
    SubscriptionType,
    TopicMetadata,
    UniformAssignor,
)


def best_cpu_s(fn: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def topics_of(count: int, partitions: int) -> dict[uuid.UUID, TopicMetadata]:
    ids = [uuid.UUID(int=i + 1) for i in range(count)]
    return {topic_id: TopicMetadata(topic_id, f"topic-{i}", partitions) for i, topic_id in enumerate(ids)}


def group_of(
    member_ids: list[str], topics: dict[uuid.UUID, TopicMetadata], target: GroupAssignment | None
) -> GroupSpec:
    subscribed = tuple(topics)
    assignment = target.members if target is not None else {}
    members = tuple(MemberSpec(m, subscribed, dict(assignment.get(m, {}))) for m in member_ids)
    return GroupSpec(members, SubscriptionType.HOMOGENEOUS)


def floor(member_ids: list[str], topics: dict[uuid.UUID, TopicMetadata]) -> None:
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in member_ids}
    i = 0
    for topic in topics.values():
        for partition in range(topic.partition_count):
            owned[member_ids[i % len(member_ids)]].add((topic.topic_id, partition))
            i += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=1000, help="per topic")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    topics = topics_of(args.topics, args.partitions)
    member_ids = [f"member-{i:05d}" for i in range(args.members)]
    uniform, range_assignor = UniformAssignor(), RangeAssignor()

    first = uniform.assign(group_of(member_ids, topics, None), topics)
    joined_ids = [*member_ids, "member-new"]
    joined = uniform.assign(group_of(joined_ids, topics, first), topics)
    moved = sum(
        len(set(partitions) - set(first.members.get(m, {}).get(t, ())))
        for m, assignment in joined.members.items()
        for t, partitions in assignment.items()
    )
    left_ids = member_ids[1:]

    classic = get_assignor("cooperative-sticky")
    names = {topic.name: topic.partition_count for topic in topics.values()}
    subscriptions = {m: MemberSubscription(tuple(names)) for m in member_ids}

    floor_s = best_cpu_s(lambda: floor(member_ids, topics), args.rounds)
    classic_s = best_cpu_s(lambda: classic.assign(subscriptions, names), args.rounds)
    cases = [
        ("uniform, fresh target", lambda: uniform.assign(group_of(member_ids, topics, None), topics)),
        ("uniform, one member joins", lambda: uniform.assign(group_of(joined_ids, topics, first), topics)),
        ("uniform, one member leaves", lambda: uniform.assign(group_of(left_ids, topics, first), topics)),
        ("range, fresh target", lambda: range_assignor.assign(group_of(member_ids, topics, None), topics)),
    ]
    rows = [["floor (store every partition)", f"{floor_s * 1000:.1f} ms", "1.0", "-"]]
    rows.append(["cooperative-sticky (classic, client side)", f"{classic_s * 1000:.1f} ms",
                 f"{classic_s / floor_s:.1f}", "1.0"])
    for name, run in cases:
        seconds = best_cpu_s(run, args.rounds)
        ratios = f"{seconds / floor_s:.1f}", f"{seconds / classic_s:.2f}"
        rows.append([name, f"{seconds * 1000:.1f} ms", *ratios])
    total = args.topics * args.partitions
    print_figures(
        f"Server-side assignors: {args.members} members x {total} partitions ({args.topics} topics), "
        f"best CPU time of {args.rounds}",
        ["CASE", "CPU TIME", "X FLOOR", "X COOPERATIVE-STICKY"],
        rows,
        notes=[f"one member joining moves {moved} partitions to it (sticky: the fair share is "
               f"{total // len(joined_ids)}-{-(-total // len(joined_ids))})"],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
