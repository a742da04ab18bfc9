"""A simulated worker node is removed: its partitions move to the remaining nodes."""

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_partitions_move_off_a_removed_node() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.ray.node_failure_scenario"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "commits intact" in done.stdout
