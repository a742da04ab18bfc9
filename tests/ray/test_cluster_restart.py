"""A full Ray cluster restart (GCS lost) under a replicated service: every acknowledged
commit is recovered from the replicas' disks under their node names
(the scenario is tests/ray/cluster_restart_scenario.py, in its own process)."""

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_full_cluster_restart_recovers_every_acknowledged_commit() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-m", "tests.ray.cluster_restart_scenario"],
        cwd=root,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "none lost" in done.stdout and "recovered from the replicas' disks" in done.stdout
