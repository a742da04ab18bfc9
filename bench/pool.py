"""Benchmark of `actors.ConsumerPool` against KEDA's way of scaling: `python -m bench.pool`.

One run, on an embedded service: two topics of 8 partitions, two groups, two
pools side by side over the same simulated producers (a thread advances both
topics' end offsets with `client.set_end_offsets` every 0.1 s, the records the
members "read"). Each member processes a record in `--per-record-ms` (a sleep:
its capacity), 50 records per call at most. The producers run at `--low` records/s per
partition, step to `--high` for `--step-s`, then fall back to `--low`.

- the pool: `ConsumerPool` with its own policy (coordinator/pool_policy.py
  LagPolicy), the group's lag pushed by its leader (a lag watch), a warm standby
  member (`--no-standby`: none), cooldown `--cooldown-s`;
- KEDA: the same pool driven by `KedaPolicy` (KEDA's Kafka scaler, lagThreshold =
  the target, and the HPA's scale-down window), its 30 s poll and 300 s window
  divided by `--keda-scale` (10: 3 s and 30 s) so the run stays short; the
  ratio between the two is what a real KEDA would show `--keda-scale` times larger.

Figures per pool, times from the moment the group's lag crossed the target
(a monitor keeps a lag watch per group: answered as the leader sees the lag
cross the target or move by an eighth of it, and every 0.5 s): the pool's
first scale-up, a member activated after the step committing its first range
(and where its time went: scale-up decision to activation, to its first
assignment, to its first commit), lag back under the target, the largest lag,
back to one member after the step ended, and the members over time.
Members run on KIP-848's consumer protocol, as the pool's do by default (`--group-protocol
classic`: the classic protocol, cooperative-sticky).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from typing import Any

from bench.table import print_figures, progress

PARTITIONS = 8
TICK_S = 0.1


class Source:
    """The members' source: the registry's end offsets are the records (cached 50 ms)."""

    def __init__(self, per_record_s: float, batch: int = 50) -> None:
        self.per_record_s, self.batch = per_record_s, batch
        self.client: Any = None
        self.ends: dict[Any, int] = {}
        self.read_at = 0.0

    def __call__(self, topic: str, partition: int, start: int) -> int:
        if self.client is None:
            import actors
            self.client = actors.connect()
        if time.monotonic() - self.read_at > 0.05:
            self.ends, self.read_at = self.client.end_offsets(), time.monotonic()
        upto = min(self.ends.get((topic, partition), 0), start + self.batch)
        time.sleep(self.per_record_s * (upto - start))
        return upto


class Producers(threading.Thread):
    """Advances the topics' end offsets at `rate` records/s per partition."""

    def __init__(self, client: Any, topics: list[str], rate: float) -> None:
        super().__init__(daemon=True)
        self.client, self.topics, self.rate = client, topics, rate
        self.ends = {(t, p): 0.0 for t in topics for p in range(PARTITIONS)}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(TICK_S):
            for key in self.ends:
                self.ends[key] += self.rate * TICK_S
            self.client.set_end_offsets({k: int(v) for k, v in self.ends.items()})


class Monitor(threading.Thread):
    """One group's lag as its leader pushes it (a lag watch, coordinator/lag_watch.py):
    [(time, lag)] at each answer (the target crossed, a move of target/8, 0.5 s)."""

    def __init__(self, client: Any, group: str, target: int) -> None:
        super().__init__(daemon=True)
        self.client, self.group, self.target = client, group, target
        self.samples: list[tuple[float, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        from coordinator.lag_watch import LagWatchRequest
        seen = None
        while not self.stopped.is_set():
            request = LagWatchRequest(self.group, "bench-monitor", seen, None, self.target, None,
                                      max(1, self.target // 8), 500)
            try:
                response = self.client.send(request, timeout_s=10.0)
            except Exception:
                continue
            if response.groups and response.groups[0][1] is not None:
                seen = response.groups[0][1]
                self.samples.append((time.time(), seen))


def figures(name: str, pool: Any, samples: list[tuple[float, int]], target: int,
            step_at: float, step_end: float) -> list[tuple[str, ...]]:
    crossed = next((t for t, lag in samples if t >= step_at and lag > target), None)
    if crossed is None:
        return [(f"{name}: the lag never crossed the target", "", "", "")]
    largest, peak = max((lag, t) for t, lag in samples if t >= step_at)
    back = next((t for t, lag in samples if t > peak and lag <= target), None)
    first_up = next((t for t, n, *_ in pool.history if t >= crossed and n > 1), None)
    statuses = [*pool.finished.values(), *pool.status()]
    joined = sorted((s for s in statuses if (s["activated_at"] or 0) >= step_at and s["first_commit_at"]),
                    key=lambda s: s["first_commit_at"])
    new_member = joined[0]["first_commit_at"] if joined else None
    down = next((t for t, n, *_ in pool.history if t >= step_end and n == 1), None)

    def since(t: float | None, origin: float) -> str:
        return "-" if t is None else f"{t - origin:.1f} s"

    series = ", ".join(f"{t - crossed:+.1f}s:{n}" for t, n, *_ in pool.history if n)
    changes = [(t, n) for t, n, *_ in pool.history]
    end = samples[-1][0]
    member_s = sum(n * (min(nxt, end) - max(t, step_at))
                   for (t, n), (nxt, _) in zip(changes, [*changes[1:], (end, 0)], strict=True)
                   if min(nxt, end) > max(t, step_at))
    if joined and first_up is not None:
        first = joined[0]
        steps = (f"activated {first['activated_at'] - first_up:+.2f} s, assigned "
                 f"{(first['assigned_at'] or first_up) - first['activated_at']:+.2f} s, first commit "
                 f"{first['first_commit_at'] - (first['assigned_at'] or first['activated_at']):+.2f} s")
        decision_to_commit = f"{first['first_commit_at'] - first_up:.2f} s"
    else:
        steps = decision_to_commit = "-"
    return [
        (f"{name}: first scale-up after the lag crossed the target", since(first_up, crossed), "", ""),
        (f"{name}: a new member consuming", since(new_member, crossed), "", "target < 2 s"),
        (f"{name}: first scale-up decision to the new member's first commit", decision_to_commit,
         steps, "< 2 s"),
        (f"{name}: lag back under the target (after its peak)", since(back, crossed), "", ""),
        (f"{name}: largest lag", f"{largest:,} records", f"target {target:,}", ""),
        (f"{name}: back to 1 member after the step ended", since(down, step_end), "", ""),
        (f"{name}: member-seconds from the step to the end", f"{member_s:.0f}", "", ""),
        (f"{name}: members over time (from the crossing)", series, "", ""),
        (f"{name}: why each scale-up", "; ".join(
            f"{t - crossed:+.1f}s:{n} {reason}" for (t, n, *_, reason), (_, before, *_) in
            zip(pool.history[1:], pool.history, strict=False) if n > before), "", ""),
    ]


def wait_for(condition: Any, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--low", type=float, default=20.0, help="records/s per partition before and after")
    parser.add_argument("--high", type=float, default=150.0, help="records/s per partition during the step")
    parser.add_argument("--step-s", type=float, default=40.0)
    parser.add_argument("--after-s", type=float, default=50.0, help="observed after the step")
    parser.add_argument("--per-record-ms", type=float, default=2.0, help="a member's cost per record")
    parser.add_argument("--target", type=int, default=400, help="target lag in records (the group's sum)")
    parser.add_argument("--cooldown-s", type=float, default=10.0)
    parser.add_argument("--keda-scale", type=float, default=10.0)
    parser.add_argument("--no-standby", action="store_true", help="the pool keeps no warm member")
    parser.add_argument("--group-protocol", choices=("consumer", "classic"), default="consumer")
    args = parser.parse_args(argv)

    import ray

    import actors
    from actors.pool.pool import ConsumerPool
    from coordinator import CoordinatorConfig
    from coordinator.pool_policy import KedaPolicy, Target

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-pool-")
    pools: list[Any] = []
    threads: list[Any] = []
    try:
        actors.init_local_ray(num_cpus=4)
        client = actors.start(data_dir, num_partitions=4, coordinator_config=CoordinatorConfig(
            group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500))
        names = {"pool": ("bench-pool-t", "bench-pool-g"), "KEDA": ("bench-keda-t", "bench-keda-g")}
        for topic, _ in names.values():
            client.create_topic(topic, PARTITIONS)
        producers = Producers(client, [t for t, _ in names.values()], args.low)
        producers.start()
        threads.append(producers)
        wait_for(lambda: all(end > 0 for end in client.end_offsets([t for t, _ in names.values()]).values()),
                 "the producers' first end offsets")
        member_options = {"session_timeout_ms": 6_000, "heartbeat_interval_ms": 300,
                          "metadata_max_age_ms": 2_000, "retry_backoff_ms": 50,
                          "group_protocol": args.group_protocol}
        common = {"min_members": 1, "max_members": PARTITIONS, "target_lag_messages": args.target,
                  "member_cpus": 0, "member_options": member_options}
        source = Source(args.per_record_ms / 1000)
        topic, group = names["pool"]
        pools.append(ConsumerPool(group, [topic], source, cooldown_s=args.cooldown_s,
                                  scale_up_interval_s=2.0, standby=not args.no_standby, **common))
        topic, group = names["KEDA"]
        keda = KedaPolicy(Target(messages=args.target), 1, PARTITIONS, PARTITIONS,
                          poll_interval_ms=int(30_000 / args.keda_scale),
                          stabilization_ms=int(300_000 / args.keda_scale))
        pools.append(ConsumerPool(group, [topic], source, policy=keda, standby=False, **common))
        for pool in pools:
            pool.start()
        monitors = {g: Monitor(client, g, args.target) for _, g in names.values()}
        for monitor in monitors.values():
            monitor.start()
            threads.append(monitor)
        progress(f"steady at {args.low} records/s per partition")
        time.sleep(8)
        step_at = time.time()
        producers.rate = args.high
        progress(f"step to {args.high} records/s per partition for {args.step_s} s")
        time.sleep(args.step_s)
        step_end = time.time()
        producers.rate = args.low
        progress(f"back to {args.low}; observing {args.after_s} s")
        time.sleep(args.after_s)
        rows: list[tuple[str, ...]] = []
        for (name, (_, group)), pool in zip(names.items(), pools, strict=True):
            rows += figures(name, pool, monitors[group].samples, args.target, step_at, step_end)
        capacity = 1000 / args.per_record_ms
        notes = [
            f"8 partitions per pool; a member processes {capacity:.0f} records/s; producers {args.low} -> "
            f"{args.high} -> {args.low} records/s per partition ({args.step_s:.0f} s step); target lag "
            f"{args.target} records; pool cooldown {args.cooldown_s:.0f} s; KEDA's 30 s poll and 300 s "
            f"window / {args.keda_scale:g}; members on the {args.group_protocol} protocol; the pool "
            f"{'without' if args.no_standby else 'with'} a standby, KEDA without",
        ]
        print_figures("consumer pool vs KEDA", ("figure", "value", "baseline", "target"), rows, notes=notes)
    finally:
        for thread in threads:
            thread.stopped.set()
        for pool in pools:
            pool.stop()
        actors.stop()
        ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
