"""`raygroups demo --replicated` end to end, in a process of its own (it starts a
simulated multi-node cluster): a leader's node is removed with its disk while
consumers commit, nothing acknowledged is lost, and no Ray process is left."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def processes_naming(text: str) -> list[str]:
    """Command lines of live processes that contain `text` (a cluster's GCS address)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # the process ended meanwhile
        if text in args:
            found.append(args)
    return found


def test_replicated_demo_loses_a_leader_node_and_no_commit(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli.main", "demo", "--replicated", "--seconds", "4",
         "--data-dir", str(data_dir)],
        cwd=ROOT,
        env={**os.environ, "RAY_AUTH_MODE": "disabled", "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    acknowledged = re.search(r"(\d+) commits acknowledged, 0 lost", out)
    assert acknowledged and int(acknowledged.group(1)) > 0, out
    removed = re.search(r"removing node (\w+), leader of partitions \[(\d[\d, ]*)\]", out)
    assert removed, out
    victim = removed.group(1)
    for partition in removed.group(2).split(", "):  # each one it led has a new leader, at a higher epoch
        elected = re.search(rf"^\s*{partition}\s+{victim}\s+(\S+)\s+(\d+) -> (\d+)\s+[\d.]+ *$", out, re.M)
        assert elected, out
        assert elected.group(1) != victim and int(elected.group(3)) > int(elected.group(2)), elected.group(0)
    assert "UNDER-REPLICATED" in out
    # Its disk is gone; the other three nodes' disks stay in the data directory.
    assert len(list((data_dir / "nodes").iterdir())) == 3
    address = re.search(r"simulated cluster at (\S+),", out)
    assert address, out
    assert processes_naming(address.group(1)) == []
