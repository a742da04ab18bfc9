"""Backup under load, restore into a new cluster of other node names and size.

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share a
process with the test session's): `python -m tests.ray.backup_scenario`. A
simulated 4-node cluster runs a replicated service (RF 3) with a topic and its
end offsets while members of 8 groups commit; `raygroups backup` is taken in
the middle of it, and commits go on through it. The cluster is shut down. A
NEW 3-node simulated cluster (unlabelled nodes: its node names are new Ray
ids, none of the first cluster's) gets `raygroups restore`: first into a
non-empty data directory (refused, naming it), then into an empty one. Every
group's offsets on the restored service are exactly what the backup's logs
hold, at least every offset acknowledged before the backup began; groups,
topics, ids and end offsets are the first service's. Exits non-zero if a
check fails.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
import time

import actors
from actors.cli.main import main as raygroups
from actors.demo.sim_cluster import fully_replicated, status_rows, wait_for
from coordinator.records import OffsetCommitKey
from log import materialize
from log.backup_manifest import partition_path, read_manifest

from tests.ray.cluster_support import simulated_cluster
from tests.ray.replication_scenario import NAMESPACE, PARTITIONS, groups_on, settings_for, start_load

TOPIC = "orders"


def first_life(backup: str) -> tuple[dict[str, int], dict[str, int], object, list[object], set[str]]:
    """Serve, commit and back up under load; (acked before the backup, committed at the
    end, topics, groups, node names)."""
    with simulated_cluster(3, NAMESPACE, "raygroups-backup-a-") as (_, path):
        client = actors.start(settings=settings_for(path), namespace=NAMESPACE)
        wait_for("every partition fully replicated", lambda: fully_replicated(client))
        client.create_topic(TOPIC, 3)
        client.set_end_offsets({(TOPIC, p): 100 + p for p in range(3)})
        loads, stop, thread = start_load([g for p in range(PARTITIONS) for g in groups_on(client, p)])
        wait_for("every group committing", lambda: all(load.acked > 2 for load in loads), 30.0)
        before = {load.group: load.acked for load in loads}
        assert raygroups(["backup", backup, "--namespace", NAMESPACE]) == 0
        during = {load.group: load.acked for load in loads}
        wait_for("commits after the backup", lambda: all(load.acked > during[load.group] for load in loads))
        stop.set()
        thread.join(timeout=30)
        committed = {g: client.fetch_offsets(g).offsets()[("t", 0)] for g in before}
        topics = (client.describe_topics(), client.topic_ids(), client.end_offsets())
        groups = sorted(client.list_groups(), key=repr)
        names = {n for row in status_rows(client).values() for n in row["replicas"]}
        actors.stop(NAMESPACE)
    return before, committed, topics, groups, names


def backed_up_offsets(backup: str) -> dict[str, int]:
    """Each group's offset of ("t", 0) as the backup's logs hold it."""
    offsets = {}
    for p in range(read_manifest(backup).num_partitions):
        for key, value in materialize(partition_path(backup, p)).items():
            if isinstance(key, OffsetCommitKey):
                offsets[key.group_id] = value.offset  # type: ignore[union-attr]
    return offsets


def second_life(
    backup: str, before: dict[str, int], topics: object, groups: list[object], old: set[str]
) -> None:
    expected = backed_up_offsets(backup)
    assert all(expected[g] >= acked for g, acked in before.items()), (before, expected)
    with simulated_cluster(2, NAMESPACE, "raygroups-backup-b-") as (_, path):
        os.makedirs(os.path.join(path, "nodes", "someone"))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            refused = raygroups(["restore", backup, "--data-dir", path, "--namespace", NAMESPACE])
        assert refused == 1 and f"{path}: the target is not empty" in err.getvalue(), err.getvalue()
        target = os.path.join(path, "restored")
        assert raygroups(["restore", backup, "--data-dir", target, "--namespace", NAMESPACE]) == 0
        client = actors.connect(namespace=NAMESPACE)
        wait_for("every restored partition fully replicated", lambda: fully_replicated(client), 60.0)
        rows = status_rows(client)
        names = {n for row in rows.values() for n in row["replicas"]}
        assert len(names) == 3 and not names & old, (names, old)
        restored = {g: client.fetch_offsets(g).offsets()[("t", 0)] for g in before}
        assert restored == {g: expected[g] for g in before}, (restored, expected)
        assert (client.describe_topics(), client.topic_ids(), client.end_offsets()) == topics
        assert sorted(client.list_groups(), key=repr) == groups
        actors.stop(NAMESPACE)
    print(f"backup under load of {len(before)} committing groups restored on 3 new nodes: every offset "
          f"exactly as backed up, none below what was acknowledged before the backup", flush=True)


def mark(what: str, since: float) -> None:
    print(f"{what}: {time.monotonic() - since:.1f} s", flush=True)


def main() -> int:
    backup = tempfile.mkdtemp(prefix="raygroups-backup-")
    shutil.rmtree(backup)
    try:
        started = time.monotonic()
        before, committed, topics, groups, old = first_life(backup)
        assert raygroups(["backup", "--verify", backup]) == 0
        assert all(committed[g] >= acked for g, acked in before.items())
        second_life(backup, before, topics, groups, old)
        print(f"took {time.monotonic() - started:.1f} s", flush=True)
    finally:
        shutil.rmtree(backup, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
