"""Metrics through Ray's own API (`ray.util.metrics`), shown in the Ray dashboard.

Per partition: requests by type and error, request latency (OffsetCommit's
is the commit latency), completed rebalances and their join-phase duration,
flush (append + fsync) latency, load time, groups and members, disk
failures per replica and node; on a leader
its ISR size, whether it is below min.insync.replicas, each follower's
replication lag, and its groups' live lag (`LagMetrics`: per group, and per
topic partition under the operator's cap). Request counts are summed
in the actor and reported with the gauges, every 2 s. For the controller:
failovers by reason, partitions refusing to serve, under-replicated and
offline and held partitions, orphan partition actors reaped and errors its
loops survived.

Ray's metrics agent (installed with `ray[default]`) exports them for
Prometheus under the `ray_` prefix, e.g. `ray_raygroups_requests_total`;
the Ray dashboard's Metrics view shows them once Prometheus and Grafana are
set up (docs/metrics.md).
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ray.util import metrics

from coordinator.lag import GroupLag, Health, PartitionLag
from coordinator.status import response_error

# The labels of a request refused as malformed (InvalidRequestError).
INVALID_KIND, INVALID_ERROR = "invalid", "INVALID_REQUEST"
LATENCY_BOUNDARIES_MS = [0.5, 1, 2, 5, 10, 20, 50, 100, 250, 500, 1_000, 3_000, 10_000, 60_000]


class PartitionMetrics:
    def __init__(self, partition: int) -> None:
        tags = {"partition": str(partition)}
        self.requests = metrics.Counter(
            "raygroups_requests", "Group protocol requests by type and error", ("partition", "type", "error")
        )
        self.latency_ms = metrics.Histogram(
            "raygroups_request_latency_ms",
            "Request latency, parked time included",
            LATENCY_BOUNDARIES_MS,
            ("partition", "type"),
        )
        self.flush_ms = metrics.Histogram(
            "raygroups_flush_ms",
            "Append + fsync of one group-commit batch",
            LATENCY_BOUNDARIES_MS,
            ("partition",),
        )
        self.rebalances = metrics.Counter(
            "raygroups_rebalances",
            "Completed rebalances: join phases that started a generation with members",
            ("partition",),
        )
        self.join_phase_ms = metrics.Histogram(
            "raygroups_join_phase_ms",
            "Time from the start of a rebalance to the end of its join phase",
            LATENCY_BOUNDARIES_MS,
            ("partition",),
        )
        self.load_time_ms = metrics.Gauge(
            "raygroups_load_time_ms", "Last load of the partition", ("partition",)
        )
        self.failures = metrics.Counter(
            "raygroups_partition_failures",
            "Partition failures (append, broken invariant, background task) followed by a reload",
            ("partition",),
        )
        self.task_failures = metrics.Counter(
            "raygroups_task_failures", "Background tasks of a partition that raised", ("partition", "task")
        )
        self.load_failures = metrics.Counter(
            "raygroups_load_failures",
            "Failed loads: refused (log missing or behind what was acknowledged) or retried",
            ("partition", "refused"),
        )
        self.groups = metrics.Gauge("raygroups_groups", "Groups held by the partition", ("partition",))
        self.members = metrics.Gauge("raygroups_members", "Members held by the partition", ("partition",))
        self.isr_size = metrics.Gauge(
            "raygroups_partition_isr_size",
            "In-sync replicas of the partition, its leader included",
            ("partition",),
        )
        self.below_min_isr = metrics.Gauge(
            "raygroups_partition_below_min_isr",
            "1 while the partition's ISR is below min.insync.replicas: it refuses writes",
            ("partition",),
        )
        self.replication_lag = metrics.Gauge(
            "raygroups_partition_replication_lag",
            "Records a follower is behind its leader's log end",
            ("partition", "replica"),
        )
        self.disk_failures = metrics.Counter(
            "raygroups_disk_failures",
            "Disk failures of a replica's log (a write, fsync, open or rename failed); each heals by itself",
            ("partition", "node"),
        )
        for metric in (
            self.rebalances, self.join_phase_ms, self.flush_ms, self.load_time_ms, self.groups, self.members,
            self.failures, self.isr_size, self.below_min_isr,
        ):
            metric.set_default_tags(tags)
        self._partition = str(partition)
        self._counts: Counter[tuple[str, str]] = Counter()
        self._latency_tags: dict[str, dict[str, str]] = {}
        # Requests per second between the last two flushes (`raygroups status`'s REQ/S).
        self.request_rate = 0.0
        self._flushed_at = time.monotonic()
        self._lag: LagMetrics | None = None

    def lag(self, interval_s: float, partitions_max: int, groups_max: int = 200) -> LagMetrics:
        """The live lag gauges of this partition (made at the first call; the settings may
        change online, `actors.core.setting_keys`: each call passes those in force)."""
        if self._lag is None:
            self._lag = LagMetrics(int(self._partition), interval_s, partitions_max, groups_max)
        lag = self._lag
        lag.interval_s, lag.partitions_max, lag.groups_max = interval_s, partitions_max, groups_max
        return self._lag

    def observe(self, kind: str, response: Any, started: float, now: float) -> None:
        """Count a request and record its latency (`started` to `now`, perf counter seconds).

        Counts gather here and reach Ray in `flush_counts`: a Ray metric call
        costs about 5 us, a dict increment a few tens of ns.
        """
        if isinstance(response, BaseException):  # a malformed request: its type name is the caller's
            kind, error = INVALID_KIND, INVALID_ERROR
        else:
            error = response_error(response).name
        self._counts[(kind, error)] += 1
        tags = self._latency_tags.get(kind)
        if tags is None:
            tags = self._latency_tags[kind] = {"partition": self._partition, "type": kind}
        self.latency_ms.observe((now - started) * 1000, tags)

    def failed(self) -> None:
        self.failures.inc()

    def task_failed(self, task: str) -> None:
        self.task_failures.inc(1, {"partition": self._partition, "task": task})

    def disk_failed(self, node: str) -> None:
        self.disk_failures.inc(1, {"partition": self._partition, "node": node})

    def load_failed(self, refused: bool) -> None:
        self.load_failures.inc(1, {"partition": self._partition, "refused": str(refused).lower()})

    def rebalanced(self, join_phases_ms: list[int]) -> None:
        for duration in join_phases_ms:
            self.rebalances.inc()
            self.join_phase_ms.observe(duration)

    def set_replication(self, leader_view: Mapping[str, Any]) -> None:
        """ISR size and each follower's lag, from the leader's `describe()`.

        A follower the leader has not heard from yet has no lag to report;
        its last value lapses (Ray's TTL) rather than read as caught up."""
        self.isr_size.set(len(leader_view["isr"]))
        self.below_min_isr.set(0 if leader_view["writable"] else 1)
        for replica, follower in leader_view["followers"].items():
            if follower["lag"] is not None:
                self.replication_lag.set(follower["lag"], {"partition": self._partition, "replica": replica})

    def flush_counts(self) -> None:
        counts, self._counts = self._counts, Counter()
        now = time.monotonic()
        self.request_rate = round(sum(counts.values()) / max(now - self._flushed_at, 1e-3), 1)
        self._flushed_at = now
        for (kind, error), count in counts.items():
            self.requests.inc(count, {"partition": self._partition, "type": kind, "error": error})


class LagMetrics:
    """A leader's live lag (coordinator/lag.py) as gauges, set every `interval_s` from
    `LagTracker.export`: per group its lag in messages and seconds and its health (the
    `Health` value: 0 OK, 1 WARN, 2 REWIND, 3 STALLED, 4 STOPPED) for the `groups_max` worst
    groups (unhealthy first, then most lag in messages), and over every group how many are
    in each health and how many the cap left out; per topic partition the `partitions_max`
    with most lag, and how many lagging ones that cap left out (the operator's cardinality
    caps: Ray's metrics pipeline does not carry 100,000s of series). Unknown lag (no end
    offset reported) sets nothing: the series lapses (Ray's TTL) rather than read 0; so does
    a group gone, or one that left the top."""

    def __init__(
        self, partition: int, interval_s: float, partitions_max: int, groups_max: int = 200
    ) -> None:
        group = ("partition", "group")
        topic_partition = ("partition", "group", "topic", "topic_partition")
        self.group_lag = metrics.Gauge("raygroups_group_lag", "Live lag of a group, in messages", group)
        self.group_lag_seconds = metrics.Gauge(
            "raygroups_group_lag_seconds", "How long ago the end offset was where the group committed", group
        )
        self.group_health = metrics.Gauge(
            "raygroups_group_health", "Group health: 0 OK, 1 WARN, 2 REWIND, 3 STALLED, 4 STOPPED", group
        )
        self.partition_lag = metrics.Gauge(
            "raygroups_topic_partition_lag", "Live lag of a group on a topic partition, in messages",
            topic_partition,
        )
        self.partition_lag_seconds = metrics.Gauge(
            "raygroups_topic_partition_lag_seconds", "Live lag of a group on a topic partition, in seconds",
            topic_partition,
        )
        self.not_exported = metrics.Gauge(
            "raygroups_lag_partitions_not_exported",
            "Lagging topic partitions of groups left out of the per-partition series by the cap",
            ("partition",),
        )
        self.groups_not_exported = metrics.Gauge(
            "raygroups_lag_groups_not_exported",
            "Groups left out of the per-group series by the cap (lag_metrics_groups_max)",
            ("partition",),
        )
        self.groups_by_health = metrics.Gauge(
            "raygroups_groups_by_health", "Groups with committed offsets per health, every group counted",
            ("partition", "health"),
        )
        self.not_exported.set_default_tags({"partition": str(partition)})
        self.groups_not_exported.set_default_tags({"partition": str(partition)})
        self._partition = str(partition)
        self.interval_s = interval_s
        self.partitions_max = partitions_max
        self.groups_max = groups_max
        self._due = 0.0

    def due(self, now: float) -> bool:
        """True once per `interval_s` (monotonic seconds)."""
        if now < self._due:
            return False
        self._due = now + self.interval_s
        return True

    def set(self, groups: list[GroupLag], partitions: list[tuple[str, PartitionLag]], lagging: int) -> None:
        """`LagTracker.export`'s answer: every group, the partitions under the cap, how many lag."""
        self.set_groups(groups)
        self.set_partitions(partitions, lagging)

    def set_groups(self, groups: list[GroupLag]) -> None:
        """Every group of the partition: the series of the `groups_max` worst, counts of all."""
        p = self._partition
        counts = Counter(g.health for g in groups)
        for health in Health:
            self.groups_by_health.set(counts[health], {"partition": p, "health": health.name})
        top = heapq.nlargest(self.groups_max, groups, key=_worse) if len(groups) > self.groups_max else groups
        self.groups_not_exported.set(len(groups) - len(top))
        for g in top:
            tags = {"partition": p, "group": g.group_id}
            self.group_health.set(int(g.health), tags)
            if g.lag is not None:
                self.group_lag.set(g.lag, tags)
            if g.lag_ms is not None:
                self.group_lag_seconds.set(g.lag_ms / 1000, tags)

    def set_partitions(self, partitions: list[tuple[str, PartitionLag]], lagging: int) -> None:
        """The partitions under the cap, and how many lagging ones it left out."""
        p = self._partition
        for group_id, row in partitions:
            tags = {
                "partition": p, "group": group_id, "topic": row.topic, "topic_partition": str(row.partition)
            }
            self.partition_lag.set(row.lag or 0, tags)
            if row.lag_ms is not None:
                self.partition_lag_seconds.set(row.lag_ms / 1000, tags)
        self.not_exported.set(lagging - len(partitions))


class ControllerMetrics:
    """The controller's metrics, with their running totals kept for `Controller.stats()`.

    Failovers by reason, partitions refusing to serve, under-replicated and
    offline partitions (gauges, set again on every watch round: Ray drops
    gauge values not refreshed within its TTL), orphan partition actors
    reaped, and exceptions its loops survived.
    """

    def __init__(self) -> None:
        self._failovers = metrics.Counter(
            "raygroups_controller_failovers", "New leaders started for a partition, by reason", ("reason",)
        )
        self._refused = metrics.Gauge(
            "raygroups_controller_refused_partitions",
            "Partitions whose leader refuses to serve: its log is missing or behind what was acknowledged",
        )
        self._reaped = metrics.Counter(
            "raygroups_controller_orphans_reaped", "Partition actors killed because no controller owned them"
        )
        self._under_replicated = metrics.Gauge(
            "raygroups_controller_under_replicated_partitions",
            "Partitions whose ISR is smaller than their replicas",
        )
        self._offline = metrics.Gauge(
            "raygroups_controller_offline_partitions", "Partitions without a leader: they serve nothing"
        )
        self._held = metrics.Gauge(
            "raygroups_controller_held_partitions",
            "Partitions HELD offline after a full restart found their history ambiguous (until an election)",
        )
        self._loop_errors = metrics.Counter(
            "raygroups_controller_loop_errors", "Exceptions caught in a controller loop, by loop", ("loop",)
        )
        self.failovers: Counter[str] = Counter()
        self.refused = 0
        self.under_replicated = 0
        self.offline = 0
        self.held = 0
        self.reaped = 0
        self.loop_errors: Counter[str] = Counter()

    def failover(self, reason: str) -> None:
        self.failovers[reason] += 1
        self._failovers.inc(1, {"reason": reason})

    def set_refused(self, count: int) -> None:
        self.refused = count
        self._refused.set(count)

    def set_replication(self, under_replicated: int, offline: int, held: int = 0) -> None:
        """Set on every watch round, as `set_refused`."""
        self.under_replicated, self.offline, self.held = under_replicated, offline, held
        self._under_replicated.set(under_replicated)
        self._offline.set(offline)
        self._held.set(held)

    def orphan_reaped(self) -> None:
        self.reaped += 1
        self._reaped.inc()

    def loop_error(self, loop: str) -> None:
        self.loop_errors[loop] += 1
        self._loop_errors.inc(1, {"loop": loop})


def _worse(group: GroupLag) -> tuple[bool, int]:
    """A group's rank for the per-group series: unhealthy first, then by lag in messages."""
    return group.health > Health.OK, group.lag or 0
