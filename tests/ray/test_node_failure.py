"""A simulated worker node is removed: its partitions move to the remaining nodes."""

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_partitions_move_off_a_removed_node() -> None:
    assert "commits intact" in run_scenario("tests.ray.node_failure_scenario", timeout_s=300)
