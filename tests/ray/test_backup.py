"""`raygroups backup` against the session's running service: a destination that fills
fails with the disk's reason and leaves no backup and no hold behind while commits go
on; then a backup and its verification. Restoring onto a new cluster of other node names
is tests/ray/backup_scenario.py, in its own process."""

from __future__ import annotations

import contextlib
import io
import os
import threading
from pathlib import Path

import pytest

from actors import Client
from actors.cli.main import main as raygroups
from coordinator.errors import Errors
from coordinator.messages import OffsetCommitPartition
from log.backup_hold import HOLDS_DIR
from log.backup_manifest import MANIFEST_FILE, verify_backup

from tests.ray.cluster_support import run_scenario
from tests.ray.disks import node_disks, require_disk_rig
from tests.ray.member_support import unique

pytestmark = pytest.mark.ray


def commit_big(client: Client, group: str, offset: int, partitions: int = 300) -> None:
    """About 1.2 MB of log: distinct metadata of 4000 characters on each of `partitions` partitions."""
    for first in range(0, partitions, 25):  # within offsets_max_commit_bytes a commit
        offsets = {
            ("big", p): OffsetCommitPartition("big", p, offset, os.urandom(2000).hex())
            for p in range(first, first + 25)
        }
        errors = client.commit_offsets(group, offsets).errors()
        assert set(errors.values()) == {Errors.NONE}, errors


def test_a_full_destination_fails_clearly_and_commits_go_on(service: Client, tmp_path: Path) -> None:
    require_disk_rig("tmpfs")
    group, other = unique("backup-big"), unique("backup-live")
    commit_big(service, group, 1)
    stop, committed = threading.Event(), []

    def commit_meanwhile() -> None:
        while not stop.is_set():
            response = service.commit_offsets(other, {("t", 0): len(committed) + 1})
            assert response.errors() == {("t", 0): Errors.NONE}
            committed.append(len(committed) + 1)

    thread = threading.Thread(target=commit_meanwhile, daemon=True)
    thread.start()
    try:
        with node_disks(["dest"], size_mib=1, kind="tmpfs") as disks:
            dest = os.path.join(disks.path("dest"), "backup")
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                assert raygroups(["backup", dest]) == 1
            assert "No space left on device" in err.getvalue(), err.getvalue()
            assert "the partial backup was removed; the service is unaffected" in err.getvalue()
            assert not os.path.exists(dest) and not os.listdir(disks.path("dest"))
    finally:
        stop.set()
        thread.join(timeout=30)
    assert committed, "commits went on during the backup"
    assert service.fetch_offsets(other).offsets()[("t", 0)] == committed[-1]
    commit_big(service, group, 2)
    good = str(tmp_path / "good")
    assert raygroups(["backup", good]) == 0
    manifest = verify_backup(good)
    assert raygroups(["backup", "--verify", good]) == 0
    assert manifest.num_partitions == service.num_partitions
    assert os.path.exists(os.path.join(good, MANIFEST_FILE))
    partition = service.partition_for(group)
    assert manifest.partitions[partition].cut > 0
    for part in manifest.partitions:
        assert not os.listdir(os.path.join(part.source, HOLDS_DIR)), f"{part.source}: a hold was left"


@pytest.mark.slow
def test_a_backup_under_load_restores_on_new_nodes_exactly() -> None:
    out = run_scenario("tests.ray.backup_scenario", timeout_s=400)
    assert "every offset exactly as backed up" in out
