"""Metrics through Ray's own API (`ray.util.metrics`), shown in the Ray dashboard.

Per partition: requests by type and error, request latency (OffsetCommit's
is the commit latency), completed rebalances and their join-phase duration,
flush (append + fsync) latency, load time, groups and members. Request
counts are summed in the actor and reported with the gauges, every 2 s.

Ray's metrics agent (installed with `ray[default]`) exports them for
Prometheus under the `ray_` prefix, e.g. `ray_raygroups_requests_total`;
the Ray dashboard's Metrics view shows them once Prometheus and Grafana are
set up (README, "Metrics").
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from ray.util import metrics

from coordinator.status import response_error

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
        self.groups = metrics.Gauge("raygroups_groups", "Groups held by the partition", ("partition",))
        self.members = metrics.Gauge("raygroups_members", "Members held by the partition", ("partition",))
        for metric in (
            self.rebalances, self.join_phase_ms, self.flush_ms, self.load_time_ms, self.groups, self.members
        ):
            metric.set_default_tags(tags)
        self._partition = str(partition)
        self._counts: Counter[tuple[str, str]] = Counter()
        self._latency_tags: dict[str, dict[str, str]] = {}

    def observe(self, kind: str, response: Any, started: float) -> None:
        """Count a request and record its latency.

        Counts gather here and reach Ray in `flush_counts`: a Ray metric call
        costs about 5 us, a dict increment a few tens of ns.
        """
        self._counts[(kind, response_error(response).name)] += 1
        tags = self._latency_tags.get(kind)
        if tags is None:
            tags = self._latency_tags[kind] = {"partition": self._partition, "type": kind}
        self.latency_ms.observe((time.perf_counter() - started) * 1000, tags)

    def rebalanced(self, join_phases_ms: list[int]) -> None:
        for duration in join_phases_ms:
            self.rebalances.inc()
            self.join_phase_ms.observe(duration)

    def flush_counts(self) -> None:
        counts, self._counts = self._counts, Counter()
        for (kind, error), count in counts.items():
            self.requests.inc(count, {"partition": self._partition, "type": kind, "error": error})
