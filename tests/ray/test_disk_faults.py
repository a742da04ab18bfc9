"""Disk faults on replicated partitions (issues 21 and 24): a follower's or the
leader's disk full or read-only, two followers' disks broken in turn, a disk
broken past the move delay; each a case of tests/ray/disk_fault_scenario.py,
all run in one process on one simulated cluster with a disk per node
(tests/ray/disks.py: needs root; fails, never skips, where it cannot mount)."""

import tempfile

import pytest

from tests.ray.cluster_support import run_scenario
from tests.ray.disk_fault_scenario import CASES
from tests.ray.disks import ROOT_PREFIX, release_root, require_disk_rig

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.chaos]


def test_disk_faults_heal_by_themselves() -> None:
    require_disk_rig()
    root = tempfile.mkdtemp(prefix=ROOT_PREFIX)
    try:
        out = run_scenario("tests.ray.disk_fault_scenario", "--root", root, timeout_s=900)
    finally:
        # The scenario unmounts its disks itself; this is for a process killed on timeout.
        left = release_root(root)
    assert not left, f"the disk-fault scenario left mounts or loop devices: {left}"
    for case in CASES:
        assert f"case {case}: passed" in out, out
