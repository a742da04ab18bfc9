"""Benchmark of consumer groups of GroupMembers: `python -m bench.members [--members 100 ...]`.

Starts its own local Ray and service (a temporary data dir, 4 offsets
partitions, `--initial-delay-ms` group.initial.rebalance.delay.ms, 500 by
default) and, per assignor (range: eager; cooperative-sticky: cooperative),
hosts `--members` GroupMembers in `--hosts` sync Ray actors, then measures:
- form: from the start of every member to a complete, disjoint assignment in
  one generation at every member (the last member's final `on_assigned`);
- leave: the same after one member closes (LeaveGroup), for the other ones;
- for each phase, the generations it took, the partitions revoked (from
  `on_revoked`/`on_lost`), and each revoked partition's pause: the time from
  its revocation to its next `on_assigned`, at any member (reassignment, or
  resumption by the same member under the eager protocol).
Each time is also given as a ratio to two baselines measured in the same run:
100 sequential no-op calls to a sync Ray actor, and the time a group of one
member takes to form. All times come from `time.time()` in processes of one
machine.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import ray

import actors
from actors import GroupMember
from actors.client.topics import ensure_topic_registry
from actors.core.settings import ServiceSettings
from bench.embedded import PARTITIONS, embedded_service
from bench.table import print_figures
from coordinator import CoordinatorConfig
from coordinator.topic_partition import TopicPartition

Event = tuple[float, str, str, tuple[TopicPartition, ...]]  # (time, member, listener, partitions)
View = tuple[bool, int, frozenset[TopicPartition]]
ASSIGNORS = {"range": "eager", "cooperative-sticky": "cooperative"}  # assignor: its protocol


@ray.remote(num_cpus=0)
class BenchHost:
    """Many GroupMembers in one process, sharing one client; records listener calls with times."""

    def __init__(self) -> None:
        self.client = actors.connect()
        self.members: dict[str, GroupMember] = {}
        self.events: list[Event] = []

    def add(self, names: list[str], group_id: str, topic: str, options: dict[str, Any]) -> None:
        for name in names:
            listeners = {f"on_{kind}": self._recorder(name, kind) for kind in ("assigned", "revoked", "lost")}
            member = GroupMember(group_id, [topic], client=self.client, **options, **listeners)
            self.members[name] = member.start()

    def _recorder(self, name: str, kind: str) -> Any:
        return lambda parts: self.events.append((time.time(), name, kind, tuple(parts)))

    def views(self) -> dict[str, View]:
        return {n: (m.is_stable, m.generation_id, frozenset(m.assignment())) for n, m in self.members.items()}

    def recorded(self) -> list[Event]:
        return list(self.events)

    def close(self, name: str) -> None:
        self.members.pop(name).close()

    def close_all(self) -> None:
        for member in self.members.values():
            member.close()
        self.members.clear()


@ray.remote(num_cpus=0)
class Echo:
    def ping(self) -> None:
        return None


@dataclass
class Phase:
    seconds: float
    generations: int
    revoked: int = 0
    members_revoking: int = 0
    pauses_s: list[float] = field(default_factory=list)
    members: int = 1

    @property
    def mean_pause_s(self) -> float:
        return sum(self.pauses_s) / len(self.pauses_s) if self.pauses_s else 0.0

    @property
    def max_pause_s(self) -> float:
        return max(self.pauses_s, default=0.0)

    @property
    def paused_per_member_s(self) -> float:
        return sum(self.pauses_s) / self.members


# ------------------------------------------------------------ measuring


def settled(views: list[View], expected: frozenset[TopicPartition], after: int) -> int:
    """The generation every member settled in with a complete, disjoint assignment; else 0."""
    generations = {g for _, g, _ in views}
    if not all(s for s, _, _ in views) or len(generations) != 1 or min(generations) <= after:
        return 0
    owned = [a for _, _, a in views]
    if sum(map(len, owned)) != len(expected) or frozenset().union(*owned) != expected:
        return 0
    return generations.pop()


def wait_settled(hosts: list[Any], expected: frozenset[TopicPartition], after: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        views = [v for per_host in ray.get([h.views.remote() for h in hosts]) for v in per_host.values()]
        generation = settled(views, expected, after)
        if generation:
            return generation
        time.sleep(0.02)
    raise TimeoutError(f"group not settled after {timeout_s} s")


def phase_of(events: list[Event], start: float, generations: tuple[int, int], members: int) -> Phase:
    """Figures of the listener calls made since `start`."""
    events = sorted(e for e in events if e[0] >= start)
    assigned = [e[0] for e in events if e[2] == "assigned"]
    revoked_at: dict[TopicPartition, float] = {}
    pauses: list[float] = []
    revoking: Counter[str] = Counter()
    for at, name, kind, parts in events:
        if kind in ("revoked", "lost"):
            revoking[name] += len(parts)
            for tp in parts:
                revoked_at.setdefault(tp, at)
        else:
            pauses.extend(at - revoked_at.pop(tp) for tp in parts if tp in revoked_at)
    return Phase(
        seconds=max(assigned) - start,
        generations=generations[1] - max(generations[0], 0),
        revoked=sum(revoking.values()),
        members_revoking=len(revoking),
        pauses_s=pauses,
        members=members,
    )


def run_group(
    client: actors.Client, assignor: str, members: int, hosts_n: int, partitions: int, options: dict[str, Any]
) -> tuple[Phase, Phase | None]:
    """Form a group of `members` in `hosts_n` processes; then, with more than one, one leaves."""
    topic = group = f"bench-{assignor}-{members}-{time.time_ns()}"
    client.create_topic(topic, partitions)
    expected = frozenset(TopicPartition(topic, p) for p in range(partitions))
    hosts = [BenchHost.remote() for _ in range(hosts_n)]
    try:
        names = [f"m{i:03d}" for i in range(members)]
        ray.get([h.recorded.remote() for h in hosts])  # hosts up before the clock starts
        member_options = {**options, "assignors": [assignor]}
        start = time.time()
        ray.get([h.add.remote(names[i::hosts_n], group, topic, member_options) for i, h in enumerate(hosts)])
        formed_generation = wait_settled(hosts, expected, -1, timeout_s=300)
        events = [e for per_host in ray.get([h.recorded.remote() for h in hosts]) for e in per_host]
        form = phase_of(events, start, (0, formed_generation), members)
        if members == 1:
            return form, None
        leaving = time.time()
        ray.get(hosts[0].close.remote(names[0]))
        left_generation = wait_settled(hosts, expected, formed_generation, timeout_s=300)
        events = [e for per_host in ray.get([h.recorded.remote() for h in hosts]) for e in per_host]
        # The leaver's own revocations count: its partitions pause until someone else gets them.
        leave = phase_of(events, leaving, (formed_generation, left_generation), members)
        return form, leave
    finally:
        ray.get([h.close_all.remote() for h in hosts])
        for h in hosts:
            ray.kill(h)


def round_trips_s(n: int = 100) -> float:
    echo = Echo.remote()
    ray.get(echo.ping.remote())
    start = time.perf_counter()
    for _ in range(n):
        ray.get(echo.ping.remote())
    elapsed = time.perf_counter() - start
    ray.kill(echo)
    return elapsed


# -------------------------------------------------------------- report


FIGURES = (
    ("time to a stable assignment", lambda p: p.seconds, True),
    ("generations", lambda p: p.generations, False),
    ("partitions revoked", lambda p: p.revoked, False),
    ("members revoking", lambda p: p.members_revoking, False),
    ("pause per revoked partition, mean", lambda p: p.mean_pause_s, True),
    ("pause per revoked partition, max", lambda p: p.max_pause_s, True),
    ("paused partition-time per member", lambda p: p.paused_per_member_s, True),
)


def print_report(args: argparse.Namespace, rtt_s: float, single_s: float, results: dict[str, Any]) -> None:
    title = f"{args.members} GroupMembers in {args.hosts} Ray actors; one topic, {args.partitions} partitions"
    columns = ["phase", "figure", *(f"{assignor} ({protocol})" for assignor, protocol in ASSIGNORS.items())]
    rows = []
    for phase, index in (("form", 0), ("one leaves", 1)):
        for label, pick, timed in FIGURES:
            cells = []
            for assignor in ASSIGNORS:
                value = pick(results[assignor][index])
                cells.append(
                    f"{value * 1000:,.0f} ms (÷ {value / rtt_s:,.1f}, ÷ {value / single_s:,.2f})"
                    if timed
                    else f"{value:,}"
                )
            rows.append([phase, label, *cells])
    notes = [
        "times: value (÷ 100 sequential actor calls, ÷ a group of 1 forming)",
        f"baselines: 100 sequential no-op sync-actor calls {rtt_s * 1000:.0f} ms; a group of 1 member "
        f"formed in {single_s * 1000:.0f} ms. heartbeat {args.heartbeat_ms} ms, "
        f"session {args.session_ms} ms, group.initial.rebalance.delay.ms {args.initial_delay_ms}.",
    ]
    print_figures(title, columns, rows, notes=notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--session-ms", type=int, default=10_000)
    parser.add_argument("--initial-delay-ms", type=int, default=500)
    args = parser.parse_args()
    config = CoordinatorConfig(group_initial_rebalance_delay_ms=args.initial_delay_ms)
    with embedded_service(4, config) as (client, data_dir):
        ensure_topic_registry(ServiceSettings(data_dir=data_dir, num_partitions=PARTITIONS))
        options = {"session_timeout_ms": args.session_ms, "heartbeat_interval_ms": args.heartbeat_ms}
        rtt_s = round_trips_s()
        single_s = run_group(client, "range", 1, 1, args.partitions, options)[0].seconds
        results = {
            a: run_group(client, a, args.members, args.hosts, args.partitions, options) for a in ASSIGNORS
        }
    print_report(args, rtt_s, single_s, results)


if __name__ == "__main__":
    main()
