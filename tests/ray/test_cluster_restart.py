"""A full Ray cluster restart (GCS lost) under a replicated service: every acknowledged
commit is recovered from the replicas' disks under their node names
(the scenario is tests/ray/cluster_restart_scenario.py, in its own process)."""

import pytest

from tests.ray.cluster_support import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.mark.parametrize(
    "args",
    [("--grow",), ("--mid-grow",), ("--lose-disk",)],
    ids=["grown-every-disk", "mid-grow", "one-disk-lost"],
)
def test_a_full_cluster_restart_recovers_every_acknowledged_commit(args: tuple[str, ...]) -> None:
    """With --grow the partition count was doubled online before the restart: it comes back
    doubled, each group at its new partition. With --mid-grow the restart cuts the doubling
    midway: the plan the state files recorded is finished after it. With --lose-disk the
    node that led most comes back empty: its partitions elect from the rest."""
    out = run_scenario("tests.ray.cluster_restart_scenario", *args, timeout_s=400)
    assert "none lost" in out and "recovered from the replicas' disks" in out
