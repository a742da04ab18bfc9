"""Rolling restarts of a 3-node RF 3 service under commits, the second through a node lost
and returned: tests/ray/rolling_scenario.py,
in its own process (a multi-node `ray.cluster_utils.Cluster`)."""

from __future__ import annotations

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_every_replica_restarts_and_no_acknowledged_commit_is_lost() -> None:
    out = run_scenario("tests.ray.rolling_scenario", timeout_s=400, note="rolling restart: ")
    assert "none lost" in out
