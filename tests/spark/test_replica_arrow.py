"""The replica reader's Arrow path against its row path, without Ray or Spark.

Replicas here are plain objects serving a partition directory as a replica
actor does (`log_files`, `read_log_file`), called in-process; one of them
fails in the middle of a file. The Arrow batches, and the Arrow IPC stream
a read task puts in Ray's object store, hold the row path's rows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import spark_bridge.replica_reader as replica_reader
from log.config import LogConfig
from log.segment import list_dir
from spark_bridge.reader import partition_dirs
from spark_bridge.replica_reader import (
    plan_replica_tasks,
    read_replica_task,
    read_replica_task_batches,
    read_task_stream,
)
from spark_bridge.rows import arrow_schema

from tests.spark.histories import HISTORY, write_history
from tests.spark.test_columnar_rows import batch_rows, write_generated

SMALL_SEGMENTS = LogConfig(offsets_segment_bytes=600, fsync=False)


class Files:
    """A replica serving one partition directory, as actors/partition/export.py does."""

    def __init__(self, directory: str, fail_at_read: int = 0) -> None:
        self.directory, self.fail_at_read, self.reads = directory, fail_at_read, 0

    def log_files(self) -> list[tuple[str, int]]:
        segments = list_dir(self.directory).segments
        return [(os.path.basename(s.path), os.path.getsize(s.path)) for s in segments]

    def read_log_file(self, name: str, offset: int, length: int) -> bytes:
        self.reads += 1
        if self.reads == self.fail_at_read:
            raise RuntimeError("connection lost")
        with open(os.path.join(self.directory, name), "rb") as file:
            file.seek(offset)
            return file.read(length)


def call(handle: Any, method: str, *args: Any) -> Any:
    return getattr(handle, method)(*args)


def by_offset(row: tuple[Any, ...]) -> tuple[int, int]:
    return row[0], row[1]


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[int, list[Any]]:
    # Reads smaller than a batch: batches are put together from several reads.
    monkeypatch.setattr(replica_reader, "READ_CHUNK_BYTES", 100)
    write_history(str(tmp_path), HISTORY, SMALL_SEGMENTS)
    write_generated(str(tmp_path / "offsets-2"), 50, seed=9).close()
    dirs = dict(partition_dirs(tmp_path))
    return {
        0: [Files(dirs[0])],
        1: [Files(dirs[1], fail_at_read=3), Files(dirs[1])],
        2: [Files(dirs[2], fail_at_read=5), Files(dirs[2])],
    }


def test_arrow_batches_through_the_replicas_are_the_row_paths_rows(sources: dict[int, list[Any]]) -> None:
    tasks = plan_replica_tasks(sources, call)
    expected = [row for task in tasks for row in read_replica_task(task, call)]
    for replicas in sources.values():
        for replica in replicas:
            replica.reads = 0

    got = [row for task in tasks for row in batch_rows(read_replica_task_batches(task, call))]

    assert got and sorted(got, key=by_offset) == sorted(expected, key=by_offset)
    replicas = [replica for listed in sources.values() for replica in listed]
    assert any(replica.reads >= replica.fail_at_read > 0 for replica in replicas)


def test_a_read_tasks_arrow_stream_holds_its_rows(
    sources: dict[int, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replica_reader, "replica_raw_batches", _raw_batches_by_call)
    task = plan_replica_tasks(sources, call)[-1]

    table = pa.ipc.open_stream(read_task_stream(task)).read_all()

    assert table.schema == arrow_schema()
    expected = list(read_replica_task(task, call))
    got = sorted(batch_rows(table.to_batches()), key=by_offset)
    assert expected and got == sorted(expected, key=by_offset)


_raw_batches = replica_reader.replica_raw_batches


def _raw_batches_by_call(task: Any, _call: Any = None) -> Any:
    """The read task calls the replicas in-process instead of through Ray."""
    return _raw_batches(task, call)
