"""partition-state.json: written atomically, read back whole, and refused when unreadable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from log.errors import CorruptLogError
from log.fsutil import TMP_SUFFIX
from log.replica_state import STATE_FILE, ReplicaState, read_replica_state, write_replica_state

STATE = ReplicaState(("a", "b", "c"), ("a", "c"), "a", 4, 9, 50, 3)


def test_a_written_state_reads_back_equal_and_replaces_the_old_one(tmp_path: Path) -> None:
    assert read_replica_state(str(tmp_path)) is None
    write_replica_state(str(tmp_path), STATE)
    assert read_replica_state(str(tmp_path)) == STATE
    newer = ReplicaState(("a", "b", "c"), ("a",), "a", 4, 10, 50, 3)
    write_replica_state(str(tmp_path), newer)
    assert read_replica_state(str(tmp_path)) == newer
    assert newer.version > STATE.version
    assert sorted(os.listdir(tmp_path)) == [STATE_FILE]  # no temporary file left


def test_a_leftover_temporary_file_does_not_change_what_is_read(tmp_path: Path) -> None:
    write_replica_state(str(tmp_path), STATE)
    (tmp_path / (STATE_FILE + TMP_SUFFIX)).write_bytes(b'{"version": 1, "isr": [')  # a crash mid-write
    assert read_replica_state(str(tmp_path)) == STATE


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[]",
        json.dumps({"version": 2}).encode(),
        json.dumps({"version": 1, "replicas": ["a"], "isr": ["a"], "leader": "a"}).encode(),
        json.dumps({
            "version": 1, "replicas": ["a", "b"], "isr": ["a", "z"], "leader": "a", "leader_epoch": 1,
            "partition_epoch": 1, "num_partitions": 1, "replication_factor": 2,
        }).encode(),
        json.dumps({
            "version": 1, "replicas": ["a", "b"], "isr": ["a"], "leader": "a", "leader_epoch": "1",
            "partition_epoch": 1, "num_partitions": 1, "replication_factor": 2,
        }).encode(),
    ],
)
def test_an_unreadable_state_file_is_refused_not_guessed(tmp_path: Path, content: bytes) -> None:
    (tmp_path / STATE_FILE).write_bytes(content)
    with pytest.raises(CorruptLogError, match="partition state"):
        read_replica_state(str(tmp_path))
