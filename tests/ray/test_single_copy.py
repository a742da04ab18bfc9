"""Replication factor 1 on node-local disks: a partition waits for the node holding its log."""

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_single_copy_partition_waits_for_its_node_and_serves_again_there() -> None:
    assert "commits intact" in run_scenario("tests.ray.single_copy_scenario", timeout_s=300)
