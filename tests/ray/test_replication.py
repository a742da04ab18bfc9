"""Replicated partitions on a simulated 4-node cluster, each node with its own disk
(the cases are in tests/ray/replication_scenario.py, each in its own process)."""

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CASES = {
    "leader-node": "none lost",
    "followers": "none lost",
    "controller-node": "none lost",
    "restart": "recovered from the replicas' disks",
    "divergent-tail": "its log equal to the new leader's",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_replication_case(case: str) -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-m", "tests.ray.replication_scenario", case],
        cwd=root,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert CASES[case] in done.stdout
