"""A leader's live lag as gauges (actors/core/metrics.py LagMetrics), with Ray's Gauge
replaced by a recorder: the series per group and the per-partition cap."""

from __future__ import annotations

from typing import Any

import pytest

from actors.core import metrics
from coordinator.lag import Health, LagTracker


class Recorded:
    """ray.util.metrics.Gauge's shape: every value set, by its tags."""

    def __init__(self, name: str, description: str = "", tag_keys: tuple[str, ...] = ()) -> None:
        self.name = name
        self.values: dict[tuple[tuple[str, str], ...], float] = {}
        self.default: dict[str, str] = {}

    def set_default_tags(self, tags: dict[str, str]) -> None:
        self.default = tags

    def set(self, value: float, tags: dict[str, str] | None = None) -> None:
        self.values[tuple(sorted({**self.default, **(tags or {})}.items()))] = value


@pytest.fixture
def lag_metrics(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(metrics.metrics, "Gauge", Recorded)
    return metrics.LagMetrics(3, interval_s=10.0, partitions_max=1)


def test_groups_get_lag_seconds_and_health_and_partitions_only_under_the_cap(lag_metrics: Any) -> None:
    tracker = LagTracker()
    tracker.on_end(("t", 0), 100, 0)
    tracker.on_end(("t", 1), 100, 0)
    tracker.on_commit("a", ("t", 0), 40, 0)
    tracker.on_commit("a", ("t", 1), 90, 0)
    tracker.on_commit("b", ("u", 0), 5, 0)  # no end reported: unknown lag, no lag series
    lag_metrics.set(*tracker.export(2_000, lag_metrics.partitions_max))

    a = (("group", "a"), ("partition", "3"))
    b = (("group", "b"), ("partition", "3"))
    assert lag_metrics.group_lag.values == {a: 70}
    assert lag_metrics.group_lag_seconds.values == {a: 2.0}
    assert lag_metrics.group_health.values == {a: int(Health.OK), b: int(Health.OK)}
    top = (("group", "a"), ("partition", "3"), ("topic", "t"), ("topic_partition", "0"))
    assert lag_metrics.partition_lag.values == {top: 60}, "only the one with most lag: the cap is 1"
    assert lag_metrics.not_exported.values == {(("partition", "3"),): 1}


def test_the_gauges_are_set_once_per_interval(lag_metrics: Any) -> None:
    assert lag_metrics.due(100.0) and not lag_metrics.due(105.0) and lag_metrics.due(110.0)


def test_an_export_in_chunks_sets_what_one_export_sets(
    lag_metrics: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from actors.partition import lag_export

    tracker = LagTracker()
    for p in range(3):
        tracker.on_end(("t", p), 100, 0)
    for g in range(7):
        tracker.on_commit(f"g{g}", ("t", g % 3), 10 * g, 0)
    whole = metrics.LagMetrics(3, interval_s=10.0, partitions_max=1)
    whole.set(*tracker.export(1_000, 1))
    monkeypatch.setattr(lag_export, "CHUNK_GROUPS", 2)
    asyncio.run(lag_export.export_lag(tracker, lag_metrics, 1_000))
    for name in ("group_lag", "group_lag_seconds", "group_health", "partition_lag", "not_exported"):
        assert getattr(lag_metrics, name).values == getattr(whole, name).values, name


def test_an_interval_and_cap_changed_online_apply_to_the_same_gauges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metrics.metrics, "Gauge", Recorded)
    partition = metrics.PartitionMetrics(3)
    first = partition.lag(10.0, 1)
    again = partition.lag(2.0, 50)  # `config set lag_metrics_interval_s=2 lag_metrics_partitions_max=50`
    assert again is first and (again.interval_s, again.partitions_max) == (2.0, 50)


def test_per_group_series_only_for_the_worst_groups_under_the_cap_and_every_group_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metrics.metrics, "Gauge", Recorded)
    capped = metrics.LagMetrics(3, interval_s=10.0, partitions_max=0, groups_max=2)
    tracker = LagTracker()
    tracker.on_end(("t", 0), 100, 0)
    tracker.on_commit("most", ("t", 0), 10, 0)  # lag 90
    tracker.on_commit("some", ("t", 0), 50, 0)  # lag 50
    tracker.on_commit("little", ("t", 0), 95, 0)  # lag 5
    tracker.on_commit("rewound", ("t", 0), 99, 0)
    tracker.on_commit("rewound", ("t", 0), 98, 1_000)  # lag 2, but a commit moved back
    capped.set(*tracker.export(2_000, capped.partitions_max))

    def series(gauge: Recorded) -> set[str]:
        return {dict(tags)["group"] for tags in gauge.values}

    assert series(capped.group_lag) == series(capped.group_health) == {"rewound", "most"}, "unhealthy first"
    assert capped.groups_not_exported.values == {(("partition", "3"),): 2}
    by_health = {dict(tags)["health"]: value for tags, value in capped.groups_by_health.values.items()}
    assert by_health == {"OK": 3, "WARN": 0, "REWIND": 1, "STALLED": 0, "STOPPED": 0}
