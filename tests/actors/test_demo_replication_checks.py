"""The replicated demo's checks, without Ray: a commit missing from its partition
leader's log or served below what was acknowledged is reported, the longest gap
without a commit is measured inside the watched window."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from actors.demo.replicated import Ack, commits_in_log, longest_gap, missing_from_logs, not_served
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from log import PartitionLog


@dataclass
class Consumer:
    group_id: str
    acks: list[Ack] = field(default_factory=list)


def commit(group: str, topic: str, partition: int, offset: int) -> Record:
    return Record(OffsetCommitKey(group, topic, partition), OffsetCommitValue(offset, 1, "", 1_000 + offset))


def test_commits_in_log_lists_every_offset_commit_record(tmp_path: Path) -> None:
    with PartitionLog.open(tmp_path, 1) as log:
        log.append([commit("g", "t", 0, 5), commit("g", "t", 1, 7)], 1, 1_000)
        group = Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, None, None, 0, ()))
        log.append([commit("g", "t", 0, 9), group], 1, 1_001)
        log.sync()
    assert commits_in_log(str(tmp_path)) == {("g", "t", 0, 5), ("g", "t", 1, 7), ("g", "t", 0, 9)}


def test_an_acknowledged_commit_missing_from_the_leaders_log_is_lost() -> None:
    consumer = Consumer("g", [Ack(1.0, {("t", 0): 5, ("t", 1): 7}), Ack(2.0, {("t", 0): 9})])
    logged = {3: {("g", "t", 0, 5), ("g", "t", 1, 7), ("g", "t", 0, 9)}}
    assert missing_from_logs(logged, lambda group: 3, [consumer]) == []
    logged[3].discard(("g", "t", 1, 7))
    assert missing_from_logs(logged, lambda group: 3, [consumer]) == [
        "g {('t', 1): 7}: not in the log of partition 3's leader"
    ]


def test_a_group_partition_served_below_its_last_acknowledged_offset_is_lost() -> None:
    consumers = [Consumer("g", [Ack(1.0, {("t", 0): 5})]), Consumer("g", [Ack(2.0, {("t", 0): 9})])]
    assert not_served({"g": {("t", 0): 9}}, consumers) == []
    assert not_served({"g": {("t", 0): 12}}, consumers) == []  # a commit that timed out but was applied
    assert not_served({"g": {("t", 0): 5}}, consumers) == ["g ('t', 0): acknowledged 9, served 5"]
    assert not_served({"g": {}}, consumers) == ["g ('t', 0): acknowledged 9, served None"]


def test_longest_gap_counts_from_the_window_edges() -> None:
    assert longest_gap([10.2, 10.4, 11.9], 10.0, 12.0) == 11.9 - 10.4
    assert longest_gap([9.0, 13.0], 10.0, 12.0) == 2.0  # nothing inside the window
