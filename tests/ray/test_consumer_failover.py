"""A leader failover in the middle of a KIP-848 reconciliation, on a simulated 4-node
cluster with replication factor 3: the new leader's hot shard continues it, no
partition is owned twice, nobody is fenced by the failover, commits with member
epochs succeed (the cases are in tests/ray/consumer_failover_scenario.py, each in
its own process)."""

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.mark.parametrize("case", ["leader-actor", "leader-node"])
def test_a_failover_mid_reconciliation_is_continued_by_the_new_leader(case: str) -> None:
    out = run_scenario("tests.ray.consumer_failover_scenario", case, timeout_s=400)
    assert f"{case}: " in out and "none overlapping; no member fenced; continued on the new leader" in out
