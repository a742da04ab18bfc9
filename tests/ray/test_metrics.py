"""The partition actors' metrics reach Ray's metrics agent: the Prometheus
endpoint every node exports, which the Ray dashboard's Metrics view reads."""

from __future__ import annotations

import time
import urllib.request
from collections import Counter
from collections.abc import Callable

import pytest
import ray
from prometheus_client.parser import text_string_to_metric_families

from actors import Client
from coordinator import Errors
from coordinator.messages import JoinGroupRequest, MemberIdentity

from tests.ray.helpers import SUB, form_group

pytestmark = [pytest.mark.ray, pytest.mark.slow]

Sample = tuple[str, frozenset[tuple[str, str]]]


def scrape() -> Counter[Sample]:
    """Every `raygroups` sample of every live node, summed over Ray's own
    labels (worker, session, ...) so that values add up per partition."""
    totals: Counter[Sample] = Counter()
    for node in ray.nodes():
        if not node["Alive"]:
            continue
        url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith("ray_raygroups_"):
                    labels = {k: v for k, v in sample.labels.items() if k in ("partition", "type", "error")}
                    totals[(sample.name, frozenset(labels.items()))] += sample.value
    return totals


def value(samples: Counter[Sample], name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def wait_for(check: Callable[[Counter[Sample]], bool], timeout_s: float = 45.0) -> Counter[Sample]:
    deadline = time.monotonic() + timeout_s
    while True:
        samples = scrape()
        if check(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(1.0)


def test_requests_rebalances_and_gauges_are_exported(service: Client) -> None:
    group = "metrics-group"
    partition = str(service.partition_for(group))
    before = scrape()
    # Members nobody heartbeats: a session long enough to outlive the test.
    members, generation = form_group(service, group, 2, session_ms=120_000)
    for offset in range(3):
        response = service.commit_offsets(group, {("t", 0): offset}, generation, members[0])
        assert response.partitions[0].error is Errors.NONE
    stale = service.commit_offsets(group, {("t", 0): 9}, generation + 7, members[0])
    assert stale.partitions[0].error is Errors.ILLEGAL_GENERATION
    # A join with an unknown member id is refused: counted under its error.
    refused = service.join_group(
        JoinGroupRequest(group, 3_000, 30_000, "consumer", (("range", SUB),), member_id="ghost")
    )
    assert refused.error is Errors.UNKNOWN_MEMBER_ID

    def delta(samples: Counter[Sample], name: str, **labels: str) -> float:
        now, then = (value(s, name, partition=partition, **labels) for s in (samples, before))
        return now - then

    commits = "ray_raygroups_requests_total"
    expected = {
        (commits, "OffsetCommitRequest", "NONE"): 3,
        (commits, "OffsetCommitRequest", "ILLEGAL_GENERATION"): 1,
        (commits, "JoinGroupRequest", "UNKNOWN_MEMBER_ID"): 1,
    }

    def exported(samples: Counter[Sample]) -> bool:
        return all(
            delta(samples, name, type=kind, error=error) >= count
            for (name, kind, error), count in expected.items()
        ) and delta(samples, "ray_raygroups_rebalances_total") >= 1 and members_gauge(samples) >= 2

    def members_gauge(samples: Counter[Sample]) -> float:
        return value(samples, "ray_raygroups_members", partition=partition)

    samples = wait_for(exported)
    for (name, kind, error), count in expected.items():
        assert delta(samples, name, type=kind, error=error) >= count, (kind, error)
    assert delta(samples, "ray_raygroups_rebalances_total") >= 1
    assert delta(samples, "ray_raygroups_join_phase_ms_count") >= 1
    assert delta(samples, "ray_raygroups_request_latency_ms_count", type="OffsetCommitRequest") >= 4
    assert delta(samples, "ray_raygroups_flush_ms_count") >= 1
    assert value(samples, "ray_raygroups_groups", partition=partition) >= 1
    assert members_gauge(samples) >= 2
    assert value(samples, "ray_raygroups_load_time_ms", partition=partition) > 0
    assert service.leave_group(group, map(MemberIdentity, members)).error is Errors.NONE
