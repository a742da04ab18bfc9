"""The consumer group protocol (KIP-848) against the classic one, side by side in one
run: `python -m bench.protocols [--grow-members 10 --grow-to 900 --members 200 ...]`.

Starts its own local Ray and service (bench.embedded) and hosts GroupMembers
in `--hosts` sync Ray actors (bench.members' `BenchHost`), each group once per
protocol: classic with the eager `range` assignor and with the cooperative
`cooperative-sticky` one, consumer with the server-side `uniform` assignor,
with assignment watches (raygroups' members: told of a new assignment at
once, coordinator/consumer/watch.py) and without (Kafka's members: told at
their next heartbeat).

1. Kafka's case (KIP-848's motivating figure: 10 consumers, a topic grown to
   900 partitions): `--grow-members` members of a group on a topic of
   `--grow-from` partitions settle; the topic then grows to `--grow-to`
   partitions in the topic registry. Measured: from the growth to a stable,
   complete and disjoint assignment at every member. A classic group learns
   of the growth when its leader re-reads the metadata (metadata.max.age.ms,
   set to the heartbeat interval here so detection costs both protocols the
   same); a consumer group when the registry's change reaches the
   coordinator, which bumps the group epoch.
2. Join and leave in a large stable group: `--members` members settle, then
   one more joins, then one leaves. Measured: the time until the newcomer
   owns its partitions (its first `on_assigned`), until every partition
   that moved is owned again (the last `on_assigned`), to a stable group
   (every member at the new generation or epoch: a consumer-protocol member
   whose partitions did not change catches up at its next heartbeat, without
   pausing anything), and the partition-seconds paused across the members whose
   assignment did not change (revoked and given back to the same member:
   the eager protocol's stop-the-world; target 0).

Every time is also given as a ratio to the consumer protocol's in the same
run. Heartbeats: `--heartbeat-ms` for classic members (heartbeat.interval.ms)
and for consumer groups (group.consumer.heartbeat.interval.ms). Times come
from `time.time()` in processes of one machine.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import ray

import actors
from actors.client.topics import ensure_topic_registry
from actors.core.settings import ServiceSettings
from bench.embedded import PARTITIONS, embedded_service
from bench.members import BenchHost, Event, wait_settled
from bench.table import print_figures
from coordinator import CoordinatorConfig
from coordinator.topic_partition import TopicPartition

# label: GroupMember options
PROTOCOLS: dict[str, dict[str, Any]] = {
    "classic, range (eager)": {"assignors": ["range"]},
    "classic, cooperative-sticky": {"assignors": ["cooperative-sticky"]},
    "consumer, uniform": {"group_protocol": "consumer", "group_remote_assignor": "uniform"},
    "consumer, uniform, no watch (Kafka's)": {
        "group_protocol": "consumer", "group_remote_assignor": "uniform", "assignment_watch": False,
    },
}
CONSUMER = "consumer, uniform"
# The benchmark's members never call poll(): with Kafka's metadata.max.age.ms a classic
# group may take minutes to notice a grown topic, past max.poll.interval.ms' default.
NEVER_POLLED = {"max_poll_interval_ms": 3_600_000}
SETTLE_TIMEOUT_S = 600.0


@dataclass
class Growth:
    seconds: float


@dataclass
class JoinLeave:
    newcomer_consumes_s: float
    join_owned_s: float  # until the last partition revoked (or lost) is owned again
    join_stable_s: float
    join_paused_s: float  # partition-seconds, members whose assignment did not change
    leave_owned_s: float
    leave_stable_s: float
    leave_paused_s: float


def expected_of(topic: str, partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in range(partitions))


def events_of(hosts: list[Any]) -> list[Event]:
    return sorted(e for per_host in ray.get([h.recorded.remote() for h in hosts]) for e in per_host)


def owners_of(hosts: list[Any]) -> dict[str, frozenset[TopicPartition]]:
    views = ray.get([h.views.remote() for h in hosts])
    return {name: view[2] for per_host in views for name, view in per_host.items()}


def unchanged_pauses(events: list[Event], start: float, before: dict[str, frozenset[TopicPartition]],
                     after: dict[str, frozenset[TopicPartition]]) -> float:
    """Partition-seconds paused since `start` by members that own the same partitions
    before and after: each partition revoked from them until it came back."""
    steady = {name for name in before if after.get(name) == before[name]}
    revoked_at: dict[tuple[str, TopicPartition], float] = {}
    paused = 0.0
    for at, name, kind, parts in events:
        if at < start or name not in steady:
            continue
        for tp in parts:
            if kind in ("revoked", "lost"):
                revoked_at.setdefault((name, tp), at)
            elif (name, tp) in revoked_at:
                paused += at - revoked_at.pop((name, tp))
    return paused


def owned_again(events: list[Event], start: float) -> float:
    """Seconds from `start` to the last `on_assigned` with partitions: every partition
    that moved (or was revoked and given back) has an owner consuming it again."""
    return max(at for at, _, kind, parts in events if at >= start and kind == "assigned" and parts) - start


def start_hosts(n: int) -> list[Any]:
    hosts = [BenchHost.remote() for _ in range(n)]
    ray.get([h.recorded.remote() for h in hosts])  # up before any clock starts
    return hosts


def stop_hosts(hosts: list[Any]) -> None:
    ray.get([h.close_all.remote() for h in hosts])
    for h in hosts:
        ray.kill(h)


def run_growth(
    client: actors.Client, label: str, args: argparse.Namespace, options: dict[str, Any]
) -> Growth:
    topic = group = f"grow-{label.split(',')[0]}-{time.time_ns()}"
    client.create_topic(topic, args.grow_from)
    hosts = start_hosts(min(args.hosts, args.grow_members))
    try:
        names = [f"m{i:03d}" for i in range(args.grow_members)]
        ray.get([h.add.remote(names[i::len(hosts)], group, topic, options) for i, h in enumerate(hosts)])
        generation = wait_settled(hosts, expected_of(topic, args.grow_from), -1, SETTLE_TIMEOUT_S)
        start = time.time()
        client.create_partitions(topic, args.grow_to)
        wait_settled(hosts, expected_of(topic, args.grow_to), generation, SETTLE_TIMEOUT_S)
        return Growth(time.time() - start)
    finally:
        stop_hosts(hosts)


def run_join_leave(
    client: actors.Client, label: str, args: argparse.Namespace, options: dict[str, Any]
) -> JoinLeave:
    topic = group = f"joinleave-{label.split(',')[0]}-{time.time_ns()}"
    client.create_topic(topic, args.partitions)
    expected = expected_of(topic, args.partitions)
    hosts = start_hosts(args.hosts)
    try:
        names = [f"m{i:04d}" for i in range(args.members)]
        ray.get([h.add.remote(names[i::len(hosts)], group, topic, options) for i, h in enumerate(hosts)])
        generation = wait_settled(hosts, expected, -1, SETTLE_TIMEOUT_S)
        before = owners_of(hosts)
        start = time.time()
        ray.get(hosts[0].add.remote(["newcomer"], group, topic, options))
        generation = wait_settled(hosts, expected, generation, SETTLE_TIMEOUT_S)
        join_stable = time.time() - start
        events = events_of(hosts)
        # The newcomer's first `on_assigned` with partitions (a consumer-protocol member is
        # told its empty assignment at once, before any partition is released to it).
        consumes = min(
            at for at, name, kind, parts in events if name == "newcomer" and kind == "assigned" and parts
        )
        join_owned = owned_again(events, start)
        joined = owners_of(hosts)
        join_paused = unchanged_pauses(events, start, before, joined)
        leaving = time.time()
        ray.get(hosts[-1].close.remote(names[-1]))
        wait_settled(hosts, expected, generation, SETTLE_TIMEOUT_S)
        leave_stable = time.time() - leaving
        joined.pop(names[-1], None)
        events = events_of(hosts)
        leave_paused = unchanged_pauses(events, leaving, joined, owners_of(hosts))
        return JoinLeave(
            consumes - start, join_owned, join_stable, join_paused,
            owned_again(events, leaving), leave_stable, leave_paused,
        )
    finally:
        stop_hosts(hosts)


def timed(value: float, base: float) -> str:
    return f"{value * 1000:,.0f} ms (x {value / base:,.1f})" if base > 0 else f"{value * 1000:,.0f} ms"


def print_report(args: argparse.Namespace, growth: dict[str, Growth], joins: dict[str, JoinLeave]) -> None:
    labels = list(PROTOCOLS)
    rows = [[f"{args.grow_members} members, topic grown {args.grow_from} -> {args.grow_to} partitions",
             "time to a stable assignment",
             *(timed(growth[label].seconds, growth[CONSUMER].seconds) for label in labels)]]
    figures = (
        ("newcomer owns its partitions", lambda j: j.newcomer_consumes_s, True),
        ("one joins: every moved partition owned again", lambda j: j.join_owned_s, True),
        ("one joins: time to a stable group", lambda j: j.join_stable_s, True),
        ("one joins: partition-seconds paused, unchanged members", lambda j: j.join_paused_s, False),
        ("one leaves: every moved partition owned again", lambda j: j.leave_owned_s, True),
        ("one leaves: time to a stable group", lambda j: j.leave_stable_s, True),
        ("one leaves: partition-seconds paused, unchanged members", lambda j: j.leave_paused_s, False),
    )
    for name, pick, ratio in figures:
        cells = [
            timed(pick(joins[label]), pick(joins[CONSUMER])) if ratio else f"{pick(joins[label]):,.2f}"
            for label in labels
        ]
        rows.append([f"stable group of {args.members} members, {args.partitions} partitions", name, *cells])
    print_figures(
        f"Consumer group protocol (KIP-848) vs classic; members in {args.hosts} Ray actors",
        ["case", "figure", *labels],
        rows,
        notes=[
            "times: value (x the consumer protocol's in this run)",
            f"heartbeat interval {args.heartbeat_ms} ms for both protocols; classic metadata.max.age.ms "
            f"{args.classic_metadata_max_age_ms or args.heartbeat_ms} ms; "
            f"session timeout {args.session_ms} ms",
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grow-members", type=int, default=10)
    parser.add_argument("--grow-from", type=int, default=10)
    parser.add_argument("--grow-to", type=int, default=900)
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--session-ms", type=int, default=30_000)
    parser.add_argument(
        "--classic-metadata-max-age-ms", type=int,
        help="how often a classic leader re-reads the topics (default: the heartbeat interval; "
        "Kafka's: 300000)",
    )
    args = parser.parse_args(argv)
    config = CoordinatorConfig(
        group_initial_rebalance_delay_ms=0,
        group_consumer_heartbeat_interval_ms=args.heartbeat_ms,
        group_consumer_session_timeout_ms=args.session_ms,
    )
    classic = {
        "heartbeat_interval_ms": args.heartbeat_ms, "session_timeout_ms": args.session_ms,
        "metadata_max_age_ms": args.classic_metadata_max_age_ms or args.heartbeat_ms,
    }
    with embedded_service(4, config) as (client, data_dir):
        ensure_topic_registry(ServiceSettings(data_dir=data_dir, num_partitions=PARTITIONS))
        growth, joins = {}, {}
        for label, options in PROTOCOLS.items():
            member_options = {**NEVER_POLLED, **(classic if label.startswith("classic") else {}), **options}
            growth[label] = run_growth(client, label, args, member_options)
            joins[label] = run_join_leave(client, label, args, member_options)
    print_report(args, growth, joins)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
