"""Benchmark of a rolling restart under commits (issue 48):
`python -m bench.rolling [--workers W] [--partitions P] [--groups-per-partition G]
[--kafka-per-partition K]`.

A simulated cluster on this machine (`ray.cluster_utils.Cluster`: a head and W workers,
one CPU each, sharing the host's cores and disk; 4 nodes by default) runs a replicated
service (RF 3, min ISR 2, P offsets partitions) with a Kafka gateway deployed on every
node (`gateway.deploy`), gateways and leaders' listeners with SASL/PLAIN on, so on the
node's address: a loopback listener serves only clients of its own Ray node, and the
simulated nodes are Ray nodes of one host, so without it FindCoordinator would name the
gateway for most groups rather than their leader's listener. G threaded members per
partition commit without pause (one thread each, a plain `Client`), and beside them K
Kafka clients per partition (confluent-kafka consumers, one thread each, bootstrapped at
every gateway) commit through the direct path: FindCoordinator names their group's partition leader's Kafka
listener, which moves with leadership. After a baseline window, `Client.rolling_restart`
restarts every replica one node at a time, then the controller, the topic registry and
the gateways, with a new setting. Prints, against the baseline in the same run:
- the roll's total time;
- per partition, the longest time its groups went without an acknowledged commit in the
  roll's window (target < 1 s: only the leadership moves), the worst and the median
  partition, against the same measure over an equally long window before the roll;
  for the Ray members and the Kafka clients apart;
- commits acknowledged during the roll, and lost (every group's committed offset
  afterwards must be at least its last acknowledged one: 0).
Stdout holds the figures table only; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer

import actors
from actors.core.settings import KafkaListenerSettings
from actors.demo.sim_cluster import fully_replicated, quick_failover_settings, simulated_cluster, wait_for
from bench.driver_log import log_file
from bench.gateway import TOPIC as KAFKA_TOPIC
from bench.gateway import commit_now, confluent_consumers
from bench.table import Row, print_table, progress
from coordinator.errors import Errors
from gateway import deploy

NAMESPACE = "raygroups-bench-rolling"
KAFKA_USER, KAFKA_PASSWORD = "bench", "bench-secret"


@dataclass
class Member:
    group: str
    partition: int
    topic: str = "t"
    acked: int = 0
    acked_at: list[float] = field(default_factory=list)  # perf-counter seconds of each ack

    def longest_gap(self, start: float, end: float) -> tuple[float, float]:
        """(the longest time without an acknowledged commit in [start, end], when it began)."""
        times = [start, *(t for t in self.acked_at if start < t < end), end]
        return max((b - a, a) for a, b in zip(times, times[1:]))


def commit_forever(client: actors.Client, member: Member, stop: threading.Event) -> None:
    while not stop.is_set():
        offset = member.acked + 1
        try:
            errors = client.commit_offsets(member.group, {("t", 0): offset}).errors()
        except Exception:  # a deadline passed mid-move: counted as a gap, tried again
            continue
        if errors[("t", 0)] is Errors.NONE:
            member.acked = offset
            member.acked_at.append(time.perf_counter())


def kafka_commit_forever(consumer: Consumer, member: Member, stop: threading.Event) -> None:
    """As `commit_forever`, through a Kafka client: librdkafka finds the coordinator (the
    leader's listener) again after a move, and reconnects to another gateway if its goes."""
    while not stop.is_set():
        offset = member.acked + 1
        try:
            commit_now(consumer, offset, 1)
        except Exception:  # NOT_COORDINATOR past librdkafka's retries, a closed connection
            time.sleep(0.01)
            continue
        member.acked = offset
        member.acked_at.append(time.perf_counter())


def members_for(
    client: actors.Client, partitions: int, per_partition: int, prefix: str = "bench-roll", topic: str = "t"
) -> list[Member]:
    found: dict[int, list[Member]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(m) < per_partition for m in found.values()):
        group = f"{prefix}-{i}"
        p = client.partition_for(group)
        if len(found[p]) < per_partition:
            found[p].append(Member(group, p, topic))
        i += 1
    return [m for ms in found.values() for m in ms]


def per_partition(members: list[Member], start: float, end: float) -> dict[int, tuple[float, float]]:
    """{partition: (its groups' longest commit gap, when it began)}."""
    gaps: dict[int, tuple[float, float]] = {}
    for m in members:
        gaps[m.partition] = max(gaps.get(m.partition, (0.0, start)), m.longest_gap(start, end))
    return gaps


@dataclass
class Window:
    """The roll's window and the baseline's, in perf-counter seconds."""

    base_start: float
    base_end: float
    started: float
    ended: float
    # (perf-counter seconds, the roll's phase then), as its progress reported it.
    phases: list[tuple[float, str]] = field(default_factory=list)

    def phase_at(self, at: float) -> str:
        return next((phase for t, phase in reversed(self.phases) if t <= at), "replicas")


def gap_rows(members: list[Member], window: Window, label: str) -> list[Row]:
    """Longest commit gap per partition (worst, median) against the baseline, commits/s;
    every gap over 1 s during the roll to stderr, with the phase it began in."""
    w = window
    for m in members:
        times = [w.started, *(t for t in m.acked_at if w.started < t < w.ended), w.ended]
        for a, b in zip(times, times[1:]):
            if b - a > 1.0:
                progress(f"{label}: {m.group} (partition {m.partition}) waited {b - a:.2f} s from "
                         f"+{a - w.started:.1f} s ({w.phase_at(a)} phase)")
    gaps = per_partition(members, w.started, w.ended)
    base_end = min(w.base_end, w.base_start + (w.ended - w.started))
    base_worst = max(gap for gap, _ in per_partition(members, w.base_start, base_end).values())
    during = sum(1 for m in members for t in m.acked_at if w.started <= t <= w.ended)
    before = sum(1 for m in members for t in m.acked_at if w.base_start <= t <= w.base_end)
    worst_partition = max(gaps, key=gaps.__getitem__)
    worst, at = gaps[worst_partition]
    median = statistics.median(gap for gap, _ in gaps.values())
    rate, base_rate = during / (w.ended - w.started), before / (w.base_end - w.base_start)
    return [
        Row(f"{label}: longest commit gap, worst partition", worst, "s", worst / base_worst,
            note=f"partition {worst_partition}, from +{at - w.started:.1f} s ({w.phase_at(at)} "
                 "phase); target < 1 s"),
        Row(f"{label}: longest commit gap, median partition", median, "s", median / base_worst),
        Row(f"{label}: baseline longest commit gap", base_worst, "s",
            note="before the roll, worst partition"),
        Row(f"{label}: commits/s during the roll", rate, "/s", rate / base_rate,
            note=f"baseline {base_rate:.0f}/s"),
    ]


def measure(args: argparse.Namespace, data_dir: str) -> list[Row]:
    users = Path(data_dir) / "kafka-users"
    users.write_text(f"{KAFKA_USER}:{KAFKA_PASSWORD}\n")
    listener = KafkaListenerSettings(sasl_users_file=str(users), super_users=(f"User:{KAFKA_USER}",))
    settings = quick_failover_settings(data_dir, NAMESPACE, args.partitions, kafka_listener=listener)
    # SASL configured would authorize the Ray path by default (docs/security.md, The default):
    # the benchmark's Ray committers connect without a credential, as before.
    client = actors.start(settings=settings, namespace=NAMESPACE, ray_credentials=False)
    wait_for("every partition fully replicated", lambda: fully_replicated(client), 300)
    spec = deploy.GatewaySpec(port=0, sasl_users_file=str(users), super_users=(f"User:{KAFKA_USER}",))
    gateways = deploy.start_gateways(spec, NAMESPACE)
    bootstrap = ",".join(f"{host}:{port}" for _, host, port in gateways)
    members = members_for(client, args.partitions, args.groups_per_partition)
    kafka = members_for(client, args.partitions, args.kafka_per_partition, "bench-roll-kafka", KAFKA_TOPIC)
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": KAFKA_USER, "sasl.password": KAFKA_PASSWORD}
    consumers = confluent_consumers(bootstrap, [m.group for m in kafka], login)
    stop = threading.Event()
    committer = actors.connect(namespace=NAMESPACE, timeout_s=30.0)
    threads = [
        threading.Thread(target=commit_forever, args=(committer, m, stop), daemon=True) for m in members
    ] + [
        threading.Thread(target=kafka_commit_forever, args=(c, m, stop), daemon=True)
        for c, m in zip(consumers, kafka)
    ]
    for thread in threads:
        thread.start()
    wait_for("every group committed", lambda: all(m.acked for m in members + kafka), 300)
    progress(f"{len(members)} members and {len(kafka)} Kafka clients committing on {args.partitions} "
             f"partitions, {len(gateways)} gateways; baseline {args.baseline_s} s")
    base_start = time.perf_counter()
    time.sleep(args.baseline_s)
    base_end = time.perf_counter()
    progress("rolling restart")
    started = time.perf_counter()
    window = Window(base_start, base_end, started, started)
    status = client.rolling_restart(
        settings={"commit_timeout_ms": settings.commit_timeout_ms + 1},
        progress=lambda now: window.phases.append((time.perf_counter(), now["phase"])),
    )
    ended = window.ended = time.perf_counter()
    time.sleep(1.0)  # commits started in the window finish
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    for consumer in consumers:
        consumer.close()
    if status["phase"] != "done":
        raise SystemExit(f"the rolling restart did not finish: {status}")
    fetch = actors.connect(namespace=NAMESPACE, timeout_s=60.0)
    lost = [
        m for m in members + kafka
        if fetch.fetch_offsets(m.group, [(m.topic, 0)]).offsets().get((m.topic, 0), -1) < m.acked
    ]
    actors.stop(NAMESPACE)
    return [
        Row("rolling restart time", ended - started, "s",
            note=f"{len(status['nodes'])} nodes, the controller, the registry, "
                 f"{len(status['gateways_done'])} gateways"),
        *gap_rows(members, window, "Ray members"),
        *gap_rows(kafka, window, "Kafka clients"),
        Row("acknowledged commits lost", len(lost), "groups",
            note=f"of {len(members)} Ray and {len(kafka)} Kafka groups"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--groups-per-partition", type=int, default=2)
    parser.add_argument("--kafka-per-partition", type=int, default=1)
    parser.add_argument("--baseline-s", type=float, default=5.0)
    args = parser.parse_args()
    # Ray tells the driver of each restarted actor's process on stdout: into a log file.
    with log_file("raygroups-bench-rolling"):
        with simulated_cluster(args.workers, NAMESPACE, "raygroups-bench-rolling-") as (_, data_dir):
            rows = measure(args, data_dir)
    print_table("rolling restart under commits", rows, "vs baseline")


if __name__ == "__main__":
    main()
