"""Replicated partitions on a simulated 4-node cluster, each node with its own disk
(the cases are in tests/ray/replication_scenario.py, each in its own process)."""

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CASES = {
    "leader-node": "none lost",
    "followers": "none lost",
    "controller-node": "none lost",
    "restart": "recovered from the replicas' disks",
    "divergent-tail": "its log equal to the new leader's",
    "zombie-read": "answered its queued read NOT_COORDINATOR",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_replication_case(case: str) -> None:
    out = run_scenario("tests.ray.replication_scenario", case, timeout_s=400)
    assert CASES[case] in out
