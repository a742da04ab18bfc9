"""Replication metrics, without Ray: a leader's ISR size and per-follower lag
(refreshed by its gauge task from `describe()`), and the controller's
under-replicated and offline partition counts.

Ray's gauges are replaced by recorders: what reaches Ray's API is what the
metrics agent exports (tests/ray/test_metrics.py checks that path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.core.metrics import ControllerMetrics, PartitionMetrics
from coordinator import Errors

from tests.actors.replication_support import Cluster
from tests.actors.support import Answers, commit, run, until


class RecordingGauge:
    def __init__(self) -> None:
        self.sets: list[tuple[float, dict[str, str] | None]] = []

    def set(self, value: float, tags: dict[str, str] | None = None) -> None:
        self.sets.append((value, tags))

    def last(self) -> float | None:
        return self.sets[-1][0] if self.sets else None

    def last_by_replica(self) -> dict[str, float]:
        return {tags["replica"]: value for value, tags in self.sets if tags is not None}


def recorded(metrics: Any, monkeypatch: pytest.MonkeyPatch, *names: str) -> list[RecordingGauge]:
    gauges = [RecordingGauge() for _ in names]
    for name, gauge in zip(names, gauges):
        monkeypatch.setattr(metrics, name, gauge)
    return gauges


def test_partition_metrics_set_isr_size_and_each_known_follower_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = PartitionMetrics(7)
    isr_size, lag, below = recorded(metrics, monkeypatch, "isr_size", "replication_lag", "below_min_isr")
    view = {
        "isr": ["a", "b"],
        "writable": False,
        "followers": {
            "b": {"log_end": 40, "lag": 0},
            "c": {"log_end": 23, "lag": 17},
            "d": {"log_end": None, "lag": None},
        },
    }
    metrics.set_replication(view)
    assert isr_size.sets == [(2, None)] and below.sets == [(1, None)], "below min ISR: it refuses writes"
    # d was never heard from: no value rather than a made-up one.
    assert lag.sets == [(0, {"partition": "7", "replica": "b"}), (17, {"partition": "7", "replica": "c"})]


class RecordingCounter:
    def __init__(self) -> None:
        self.incs: list[tuple[float, dict[str, str] | None]] = []

    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        self.incs.append((value, tags))


def test_partition_metrics_rate_the_requests_counted_between_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`raygroups status`'s REQ/S: requests per second between the last two flushes."""
    now = [100.0]
    monkeypatch.setattr("actors.core.metrics.time.monotonic", lambda: now[0])
    metrics = PartitionMetrics(3)
    monkeypatch.setattr(metrics, "requests", RecordingCounter())
    monkeypatch.setattr(metrics, "latency_ms", type("Sink", (), {"observe": lambda *_: None})())
    for _ in range(50):
        metrics.observe("HeartbeatRequest", BaseException(), 0.0, 0.001)
    now[0] += 2.0
    metrics.flush_counts()
    assert metrics.request_rate == 25.0
    now[0] += 4.0
    metrics.flush_counts()
    assert metrics.request_rate == 0.0


def test_controller_metrics_keep_and_export_replication_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = ControllerMetrics()
    under, offline, held = recorded(metrics, monkeypatch, "_under_replicated", "_offline", "_held")
    metrics.set_replication(under_replicated=3, offline=1, held=1)
    metrics.set_replication(under_replicated=2, offline=0)
    assert (metrics.under_replicated, metrics.offline, metrics.held) == (2, 0, 0)
    assert (under.sets, offline.sets) == ([(3, None), (2, None)], [(1, None), (0, None)])
    assert held.sets == [(1, None), (0, None)]


def test_a_leader_reports_its_isr_and_follower_lags_from_its_gauge_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        isr_size, lag = recorded(cluster.replicas["a"].metrics, monkeypatch, "isr_size", "replication_lag")
        follower_gauges = recorded(cluster.replicas["b"].metrics, monkeypatch, "isr_size", "replication_lag")
        leader = await cluster.start()
        answers = Answers()
        assert (await answers.wait(answers.send(leader, commit("g", 1)))).errors()[("t", 0)] is Errors.NONE
        await until(lambda: isr_size.last() == 3, "the gauge task to report an ISR of 3")
        # c stops: it falls behind by the next commit and leaves the ISR after the lag time.
        cluster.handles["c"].stop()
        assert (await answers.wait(answers.send(leader, commit("g", 2)))).errors()[("t", 0)] is Errors.NONE
        await cluster.until_isr("a", ("a", "b"))
        await until(
            lambda: isr_size.last() == 2 and lag.last_by_replica() == {"b": 0, "c": 1},
            "the gauge task to report c one record behind, out of the ISR",
        )
        assert [gauge.sets for gauge in follower_gauges] == [[], []]  # only the leader reports
        await cluster.close()

    run(scenario())
