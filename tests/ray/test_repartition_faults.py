"""Growing a replicated service's partition count with its controller and a source leader
killed midway, with the fenced handoff and with pre-copy (tests/ray/repartition_scenario.py,
in a process of its own)."""

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.mark.parametrize("case", ["kills", "precopy-kills"], ids=["fenced", "pre-copied"])
def test_a_repartition_finishes_by_itself_through_kills_and_loses_nothing(case: str) -> None:
    assert "none lost" in run_scenario("tests.ray.repartition_scenario", case, "1", timeout_s=400)
