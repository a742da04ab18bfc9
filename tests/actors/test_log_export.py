"""The partition actor's log export (`actors.partition.export`) without Ray: it lists the
committed segment files of its own log directory and serves their bytes, and
refuses bad arguments to the caller alone while it goes on serving."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from actors.core.settings import ServiceSettings, partition_dir
from actors.partition.actor import OffsetPartition
from actors.partition.export import MAX_READ_BYTES, LogNotServed
from coordinator import Errors
from coordinator.records import OffsetCommitKey, OffsetCommitValue, Record
from log.config import LogConfig

from tests.actors.support import active, commit, run


def settings_for(tmp_path: Path, segment_bytes: int = 100 * 1024 * 1024) -> ServiceSettings:
    return ServiceSettings(
        data_dir=str(tmp_path), num_partitions=1, log=LogConfig(offsets_segment_bytes=segment_bytes)
    )


async def commit_groups(partition: OffsetPartition, count: int) -> None:
    for index in range(count):
        response = await partition.handle(commit(f"group-{index}", index))
        assert response.errors() == {("t", 0): Errors.NONE}


async def read_whole(partition: OffsetPartition, name: str, size: int, chunk: int = 1000) -> bytes:
    parts = [await partition.read_log_file(name, offset, chunk) for offset in range(0, size, chunk)]
    return b"".join(parts)


def test_every_segment_is_listed_with_its_size_and_read_back_byte_for_byte(tmp_path: Path) -> None:
    async def scenario() -> None:
        # Segments small enough that every commit's batch rolls a new one.
        partition = await active(settings_for(tmp_path, segment_bytes=100))
        await commit_groups(partition, 5)
        directory = partition_dir(str(tmp_path), 0)

        files = await partition.log_files()

        logs = [Path(directory, name) for name in os.listdir(directory) if name.endswith(".log")]
        with_data = [path.name for path in logs if path.stat().st_size]
        assert [name for name, _ in files] == sorted(with_data)
        assert len(files) == 5
        for name, size in files:
            content = Path(directory, name).read_bytes()
            assert size == len(content)
            assert await read_whole(partition, name, size) == content
            assert await partition.read_log_file(name, size, 100) == b""
        await partition.unload(partition.epoch)

    run(scenario())


def test_a_batch_written_but_not_yet_durable_is_not_exported(tmp_path: Path) -> None:
    async def scenario() -> None:
        partition = await active(settings_for(tmp_path))
        await commit_groups(partition, 3)
        [(name, durable_size)] = await partition.log_files()
        assert partition.log is not None
        record = Record(OffsetCommitKey("late", "t", 0), OffsetCommitValue(9, -1, "", 1))
        # Appended on the log's own thread and never synced: past the high watermark.
        await partition.host.on_io(partition.log.append, [record], partition.epoch, 1)
        path = Path(partition_dir(str(tmp_path), 0), name)
        assert path.stat().st_size > durable_size

        assert await partition.log_files() == [(name, durable_size)]
        assert await partition.read_log_file(name, durable_size, 1000) == b""
        assert await read_whole(partition, name, durable_size) == path.read_bytes()[:durable_size]
        await partition.unload(partition.epoch)

    run(scenario())


BAD_READS: list[tuple[Any, Any, Any]] = [
    ("../secret", 0, 10),
    ("/etc/passwd", 0, 10),
    ("..", 0, 10),
    ("offsets-0/00000000000000000000.log", 0, 10),
    ("00000000000000000099.log", 0, 10),
    ("00000000000000000000.log\x00", 0, 10),
    (7, 0, 10),
    (None, 0, 10),
    ("00000000000000000000.log", -1, 10),
    ("00000000000000000000.log", 0, -1),
    ("00000000000000000000.log", True, 10),
    ("00000000000000000000.log", 0, 1.5),
    ("00000000000000000000.log", 0, MAX_READ_BYTES + 1),
    ("00000000000000000000.log", 0, 2**70),
]


def test_bad_arguments_are_refused_to_that_caller_and_the_actor_goes_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        (tmp_path / "secret").write_text("not for you")
        partition = await active(settings_for(tmp_path))
        await commit_groups(partition, 2)
        [(name, size)] = await partition.log_files()

        for bad in BAD_READS:
            with pytest.raises(ValueError):
                await partition.read_log_file(*bad)

        await commit_groups(partition, 3)
        [(same, grown)] = await partition.log_files()
        assert same == name and grown > size
        content = Path(partition_dir(str(tmp_path), 0), name).read_bytes()
        assert await partition.read_log_file(name, 0, MAX_READ_BYTES) == content[:grown]
        await partition.unload(partition.epoch)

    run(scenario())


def test_a_replica_serving_no_log_exports_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        standby = OffsetPartition(None, 0, settings_for(tmp_path))
        with pytest.raises(LogNotServed):
            await standby.log_files()
        partition = await active(settings_for(tmp_path))
        await commit_groups(partition, 1)
        [(name, _)] = await partition.log_files()
        await partition.unload(partition.epoch)
        with pytest.raises(LogNotServed):
            await partition.log_files()
        with pytest.raises(LogNotServed):
            await partition.read_log_file(name, 0, 10)

    run(scenario())
