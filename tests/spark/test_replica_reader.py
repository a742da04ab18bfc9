"""The replica reader: the offsets log read through the partition actors, not a path.

Driver side without Ray: the actors run in-process on an asyncio loop and
the reader, in a thread, calls them on it. The rows must be the path
reader's, row for row, whichever replicas answer or fail. With Spark, a
live service's log read through its replicas gives the DataFrame, and the
`lag` command, that the path gives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray
from pyspark.sql import SparkSession

import spark_bridge.replica_reader as replica_reader
from actors.cli.tables import print_table
from actors.core.settings import ServiceSettings
from actors.partition.actor import OffsetPartition
from coordinator import CoordinatorConfig
from log.config import LogConfig
from spark_bridge import cli
from spark_bridge.reader import read_log_rows, read_offsets_log
from spark_bridge.replica_reader import ReplicaReadError, read_replica_rows, read_replicas_log
from spark_bridge.rows import COLUMN_NAMES

from tests.actors.support import WAIT_S, run
from tests.spark.histories import EPOCH, HISTORY, write_history

TOMBSTONE = COLUMN_NAMES.index("tombstone")
SMALL_SEGMENTS = LogConfig(offsets_segment_bytes=400, fsync=False)
Reader = Callable[[dict[int, list[Any]]], list[tuple[Any, ...]]]


class Broken:
    """A replica whose every call fails (a dead actor)."""

    async def log_files(self) -> Any:
        raise RuntimeError("actor died")

    async def read_log_file(self, *args: Any) -> Any:
        raise RuntimeError("actor died")


class Flaky:
    """A replica whose n-th file read fails, then which serves as `inner` does."""

    def __init__(self, inner: OffsetPartition, fail_at: int) -> None:
        self.inner, self.fail_at, self.reads = inner, fail_at, 0

    async def log_files(self) -> Any:
        return await self.inner.log_files()

    async def read_log_file(self, *args: Any) -> Any:
        self.reads += 1
        if self.reads == self.fail_at:
            raise RuntimeError("connection lost")
        return await self.inner.read_log_file(*args)


async def leaders(tmp_path: Path) -> dict[int, OffsetPartition]:
    """A loaded leader of partitions 0 and 1 over HISTORY, written in small segments."""
    write_history(str(tmp_path), HISTORY, SMALL_SEGMENTS)
    settings = ServiceSettings(
        data_dir=str(tmp_path), num_partitions=2, log=SMALL_SEGMENTS,
        # HISTORY is old: offsets must not expire (and append tombstones) under the test.
        coordinator=CoordinatorConfig(offsets_retention_minutes=10**8),
    )
    found = {p: OffsetPartition(p, EPOCH, settings) for p in (0, 1)}
    for partition in found.values():
        await partition.activate(0)
        assert await partition.wait_active(WAIT_S) == "ACTIVE"
    return found


async def read_in_thread(sources: dict[int, list[Any]]) -> list[tuple[Any, ...]]:
    loop = asyncio.get_running_loop()

    def call(handle: Any, method: str, *args: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(getattr(handle, method)(*args), loop).result(WAIT_S)

    return await asyncio.to_thread(lambda: list(read_replica_rows(sources, call)))


def test_rows_through_the_replicas_are_the_path_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks smaller than a batch: a batch is put together from several reads.
    monkeypatch.setattr(replica_reader, "READ_CHUNK_BYTES", 50)

    async def scenario() -> None:
        partitions = await leaders(tmp_path)
        expected = list(read_log_rows(tmp_path))
        assert len({row[0] for row in expected}) == 2 and any(row[TOMBSTONE] for row in expected)
        assert len(await partitions[0].log_files()) > 2

        assert await read_in_thread({p: [actor] for p, actor in partitions.items()}) == expected
        # A dead first replica, and one failing in the middle of a file: the next replica goes on.
        failing = {0: [Broken(), partitions[0]], 1: [Flaky(partitions[1], fail_at=3), partitions[1]]}
        assert await read_in_thread(failing) == expected
        with pytest.raises(ReplicaReadError):
            await read_in_thread({0: [Broken(), Broken()]})
        for partition in partitions.values():
            await partition.unload(partition.epoch)

    run(scenario())


@pytest.mark.spark
def test_a_live_service_read_through_its_replicas_is_the_path_read(
    spark: SparkSession, service: Any, tmp_path: Path
) -> None:
    groups = [f"replica-read-{index}" for index in range(6)]
    for index, group in enumerate(groups):
        service.commit_offsets(group, {("orders", index % 2): 10 + index})
    controller = service.controller
    sources = ray.get(controller.log_sources.remote())
    data_dir = ray.get(controller.get_settings.remote()).data_dir
    assert sorted(sources) == [0, 1, 2, 3]

    through_replicas = read_replicas_log(spark, sources)
    through_path = read_offsets_log(spark, data_dir)

    assert through_replicas.schema == through_path.schema
    mine = through_path.where(through_path.group_id.isin(groups))
    assert sorted(through_replicas.where(through_replicas.group_id.isin(groups)).collect()) == sorted(
        mine.collect()
    )
    assert mine.count() == len(groups)
    # `raygroups lag` without --data-dir: the CLI hands the replicas in.
    args = argparse_lag(groups[0])
    args.sources = sources
    [row] = cli.lag_rows(spark, args, None)
    assert (row["group_id"], row["topic"], row["topic_partition"], row["current_offset"]) == (
        groups[0], "orders", 0, 10
    )


def argparse_lag(group: str) -> Any:
    import argparse

    parser = argparse.ArgumentParser(prog="raygroups")
    cli.add_parsers(parser.add_subparsers(dest="command", required=True), print_table=print_table)
    return parser.parse_args(["lag", group])


def test_without_a_data_dir_the_commands_ask_the_service_and_say_when_it_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from actors.cli.main import build_parser, service_log_sources

    args = build_parser().parse_args(["lag", "--namespace", "elsewhere"])
    assert args.data_dir is None and args.service_log is service_log_sources

    assert cli.lag_command(argparse_lag("g")) == cli.EXIT_BAD_INPUT
    assert "no running service" in capsys.readouterr().err

    def unreachable(args: Any) -> Any:
        raise ConnectionError("no Ray cluster at auto")

    args = argparse_lag("g")
    args.service_log = unreachable
    assert cli.lag_command(args) == cli.EXIT_BAD_INPUT
    assert "cannot reach the raygroups service" in capsys.readouterr().err
