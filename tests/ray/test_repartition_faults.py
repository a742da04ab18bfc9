"""Growing a replicated service's partition count with its controller and a source leader
killed midway (tests/ray/repartition_scenario.py, in a process of its own)."""

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_repartition_finishes_by_itself_through_kills_and_loses_nothing() -> None:
    assert "none lost" in run_scenario("tests.ray.repartition_scenario", "kills", "1", timeout_s=400)
