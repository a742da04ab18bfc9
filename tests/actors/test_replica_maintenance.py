"""Log maintenance on every replica (actors/partition/maintenance.py): followers
snapshot and compact their own logs as the leader does, up to their high
watermark, and the state their logs load to stays the leader's."""

from __future__ import annotations

from pathlib import Path

from coordinator import Errors
from log import LogConfig, LogReader, materialize
from log.snapshot import list_snapshots

from tests.actors.replication_support import Cluster
from tests.actors.support import Answers, acknowledged, run, until

COMMITS = 200


def maintained(directory: str) -> bool:
    """A snapshot written, and fewer records left than were committed."""
    return bool(list_snapshots(directory)) and sum(1 for _ in LogReader(directory).records()) < COMMITS / 2


def test_followers_snapshot_and_compact_their_own_logs(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(
            tmp_path,
            maintenance_interval_s=0.02,
            compaction_interval_s=0.05,
            snapshot_every_records=50,
            log=LogConfig(offsets_segment_bytes=2_000),
        )
        leader = await cluster.start()
        answers = Answers()
        for i in range(COMMITS):
            answer = await acknowledged(answers, leader, "g", i)
            assert answer.errors() == {("t", 0): Errors.NONE}
        for name in ("b", "c"):
            directory = cluster.directory(name)
            await until(lambda directory=directory: maintained(directory), f"{name}'s log maintained")
            follower = cluster.replicas[name].follower
            assert follower is not None and follower.log.log_end_offset == COMMITS
            assert materialize(directory) == materialize(cluster.directory("a"))
        await cluster.close()

    run(scenario())
