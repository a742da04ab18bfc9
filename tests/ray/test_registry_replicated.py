"""The topic registry's state survives the loss of its node with its disk, and its own
death mid-write (tests/ray/registry_scenario.py, in processes of their own)."""

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.mark.parametrize("case", ["registry-node", "killed-mid-write"])
def test_registry_state_survives(case: str) -> None:
    assert "none lost" in run_scenario("tests.ray.registry_scenario", case, timeout_s=400)
