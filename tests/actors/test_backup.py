"""Backups without Ray: the hold's cut against compaction, the manifest written last,
checksums and tampering, a failing destination, and restored replica directories that
a full restart of a replicated service recovers under new node names."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from actors.backup.restore import placement
from actors.backup.take import SourceLost, Throttle, take_backup
from actors.cli.main import main as raygroups
from actors.controller.forgotten_logs import recover_state, scan_replicas
from actors.core.settings import ServiceSettings
from coordinator.records import Record
from log import LogConfig, LogReader, PartitionLog, compact, materialize, replica_dir, write_snapshot
from log.backup_files import check_empty_dir, finish_replica, restored_state, write_backup_file
from log.backup_hold import HOLD_MAX_AGE_S, HOLDS_DIR, expire_holds, hold_dir, hold_log, release_hold
from log.backup_manifest import (
    MANIFEST_FILE,
    BackupError,
    partition_path,
    read_manifest,
    verify_backup,
)
from log.epoch import read_leader_epoch
from log.replica_state import read_epoch_replicas, read_replica_state

from tests.log.helpers import EPOCH, NOW_MS, commit, group, model

CONFIG = LogConfig(offsets_segment_bytes=400, offsets_delete_retention_ms=1000)


def fill(log: PartitionLog, batches: list[list[Record]]) -> list[Record]:
    for i, batch in enumerate(batches):
        log.append(batch, EPOCH, NOW_MS + i)
    log.sync()
    return [r for batch in batches for r in batch]


def history(partition: int, rounds: int, first: int = 0) -> list[list[Record]]:
    return [
        [commit(f"g{partition}-{i % 3}", "t", p, first + i * 10 + p) for p in range(3)]
        + ([group(f"g{partition}-{i % 3}", generation=i)] if i % 4 == 1 else [])
        for i in range(rounds)
    ]


class LogSource:
    """The backup's `PartitionSource` over open logs in this process: what the actors do."""

    def __init__(
        self, logs: Mapping[int, PartitionLog], fail_read_at: int | None = None, lost: type = BackupError
    ) -> None:
        self.logs, self.token, self.fail_read_at, self.lost = logs, "test-token", fail_read_at, lost
        self.held: dict[int, dict[str, int]] = {}
        self.reads = 0

    def hold(self, partitions: Sequence[int]) -> dict[int, dict[str, Any]]:
        holds = {}
        for p in partitions:
            log = self.logs[p]
            hold = hold_log(log, lambda log=log: log.high_watermark, self.token)
            self.held[p] = dict(hold.files)
            holds[p] = {**hold.to_wire(), "source": log.directory}
        return holds

    def read(self, partition: int, name: str, offset: int, length: int) -> bytes:
        self.reads += 1
        if self.reads == self.fail_read_at:
            raise self.lost(f"{name}: the replica went away")
        assert offset + length <= self.held[partition][name]
        with open(os.path.join(hold_dir(self.logs[partition].directory, self.token), name), "rb") as file:
            file.seek(offset)
            return file.read(length)

    def release(self) -> None:
        for log in self.logs.values():
            release_hold(log.directory, self.token)


@pytest.fixture
def logs(tmp_path: Path) -> Any:
    opened = {p: PartitionLog.open(tmp_path / "live" / f"offsets-{p}", EPOCH, CONFIG) for p in range(3)}
    yield opened
    for log in opened.values():
        log.close()


def backup_of(logs: Mapping[int, PartitionLog], dest: Path, **source: Any) -> Any:
    source_ = LogSource(logs, **source)
    return take_backup(str(dest), source_, len(logs), "ns", 3, now_ms=lambda: NOW_MS, throttle=Throttle(None))


def test_a_backup_holds_every_partition_up_to_its_committed_end(logs: Any, tmp_path: Path) -> None:
    records = {p: fill(log, history(p, 12)) for p, log in logs.items()}
    write_snapshot(logs[1], NOW_MS)
    fill(logs[1], history(1, 3, first=500))
    records[1] += [r for batch in history(1, 3, first=500) for r in batch]
    manifest = backup_of(logs, tmp_path / "b")
    assert verify_backup(str(tmp_path / "b")) == manifest
    for p, log in logs.items():
        assert manifest.partitions[p].cut == log.high_watermark
        assert materialize(partition_path(str(tmp_path / "b"), p)) == model(records[p])
        assert not os.listdir(os.path.join(log.directory, HOLDS_DIR)), "holds are released"
    assert any(f.name.endswith(".snapshot") for f in manifest.partitions[1].files)
    assert manifest.partitions[0].epochs == ((EPOCH, 0),)


def test_the_cut_survives_a_compaction_against_records_past_it(logs: Any, tmp_path: Path) -> None:
    """Compaction after the hold drops a value below the cut (a newer one lies past it);
    the backup still has the state as of the cut."""
    log = logs[0]
    before = fill(log, [[commit("g", "t", 0, 1)], *history(0, 6)])
    hold = hold_log(log, lambda: log.high_watermark, "t1")
    fill(log, [[commit("g", "t", 0, 2)], *history(0, 8, first=900)])
    compact(log, NOW_MS)
    assert materialize(log)[commit("g", "t", 0, 0).key].offset == 2
    live_below_cut = [r for _, r in LogReader(log.directory).records(0, hold.cut)]
    assert commit("g", "t", 0, 0).key not in {r.key for r in live_below_cut}, "compaction dropped it"
    copy = tmp_path / "copy"
    copy.mkdir()
    for name, size in hold.files:
        with open(os.path.join(hold_dir(log.directory, "t1"), name), "rb") as file:
            (copy / name).write_bytes(file.read(size))
    assert materialize(copy) == model(before)


def test_the_manifest_is_written_last_and_a_failed_backup_leaves_nothing(logs: Any, tmp_path: Path) -> None:
    for p, log in logs.items():
        fill(log, history(p, 12))
    dest = tmp_path / "b"
    with pytest.raises(BackupError, match="the replica went away.*partial backup was removed"):
        backup_of(logs, dest, fail_read_at=3)
    assert not dest.exists()
    with pytest.raises(BackupError, match="no manifest"):
        read_manifest(str(dest))
    assert all(not os.listdir(os.path.join(log.directory, HOLDS_DIR)) for log in logs.values())


def test_a_repartition_during_the_copy_fails_the_backup_and_leaves_nothing(logs: Any, tmp_path: Path) -> None:
    for p, log in logs.items():
        fill(log, history(p, 12))
    checks: list[int] = []

    def steady() -> None:  # the second check, after the copies, sees a repartition
        checks.append(1)
        if len(checks) == 2:
            raise BackupError("the offsets partitions are being repartitioned")

    dest = tmp_path / "b"
    with pytest.raises(BackupError, match="repartitioned.*partial backup was removed"):
        take_backup(str(dest), LogSource(logs), len(logs), "ns", 3, now_ms=lambda: NOW_MS,
                    throttle=Throttle(None), steady=steady)
    assert not dest.exists() and len(checks) == 2
    assert all(not os.listdir(os.path.join(log.directory, HOLDS_DIR)) for log in logs.values())


def test_a_partition_whose_replica_is_lost_mid_copy_is_held_again(logs: Any, tmp_path: Path) -> None:
    records = {p: fill(log, history(p, 12)) for p, log in logs.items()}
    dest = tmp_path / "b"
    manifest = backup_of(logs, dest, fail_read_at=2, lost=SourceLost)
    assert verify_backup(str(dest)) == manifest
    for p in logs:
        assert materialize(partition_path(str(dest), p)) == model(records[p])


def test_a_destination_in_use_or_failing_is_refused_with_the_reason(logs: Any, tmp_path: Path) -> None:
    fill(logs[0], history(0, 12))
    dest = tmp_path / "b"
    dest.mkdir()
    (dest / "offsets-0").write_text("in the way")
    with pytest.raises(BackupError, match="not empty"):
        backup_of(logs, dest)
    os.unlink(dest / "offsets-0")
    assert write_backup_file(str(dest / "x"), [b"1", b"23"]).bytes == 3
    with pytest.raises(BackupError, match=f"{dest / 'x'}: cannot write the backup: File exists"):
        write_backup_file(str(dest / "x"), [b"2"])


@pytest.mark.parametrize("tamper", ["flip", "truncate", "extra", "missing", "manifest"])
def test_a_tampered_backup_is_refused_naming_the_file(logs: Any, tmp_path: Path, tamper: str) -> None:
    for p, log in logs.items():
        fill(log, history(p, 12))
    dest = tmp_path / "b"
    manifest = backup_of(logs, dest)
    segment = dest / "offsets-1" / manifest.partitions[1].files[0].name
    if tamper == "flip":
        data = bytearray(segment.read_bytes())
        data[60] ^= 1
        segment.write_bytes(bytes(data))
    elif tamper == "truncate":
        segment.write_bytes(segment.read_bytes()[:-1])
    elif tamper == "extra":
        segment = dest / "offsets-1" / "00000000000000099999.log"
        segment.write_bytes(b"")
    elif tamper == "missing":
        segment.unlink()
    else:
        segment = dest / MANIFEST_FILE
        body = json.loads(segment.read_text())
        body["partitions"][1]["cut"] += 1
        segment.write_text(json.dumps(body))
    with pytest.raises(BackupError, match=str(segment)):
        verify_backup(str(dest))


def test_raygroups_restore_refuses_a_tampered_backup_naming_the_file(
    logs: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Verified before Ray is even reached: nothing is written anywhere."""
    for p, log in logs.items():
        fill(log, history(p, 12))
    dest = tmp_path / "b"
    manifest = backup_of(logs, dest)
    segment = dest / "offsets-2" / manifest.partitions[2].files[0].name
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    target = tmp_path / "restored"
    assert raygroups(["restore", str(dest), "--data-dir", str(target)]) == 1
    assert raygroups(["backup", "--verify", str(dest)]) == 1
    err = capsys.readouterr().err
    assert err.count(f"{segment}: its SHA-256 does not match the manifest") == 2, err
    assert not target.exists()


def test_restored_replicas_are_recovered_under_new_node_names(logs: Any, tmp_path: Path) -> None:
    records = {p: fill(log, history(p, 12)) for p, log in logs.items()}
    manifest = backup_of(logs, tmp_path / "b")
    data_dir, nodes = str(tmp_path / "restored"), ["n-a", "n-b"]
    check_empty_dir(data_dir)
    for part in manifest.partitions:
        state = restored_state(part, nodes, manifest.num_partitions)
        for node in nodes:
            directory = replica_dir(data_dir, node, part.partition)
            shutil.copytree(partition_path(str(tmp_path / "b"), part.partition), directory)
            finish_replica(directory, part, state, leader=node == state.leader)
        assert materialize(replica_dir(data_dir, "n-b", part.partition)) == model(records[part.partition])
        assert read_leader_epoch(replica_dir(data_dir, "n-b", part.partition)) == EPOCH
        assert read_epoch_replicas(replica_dir(data_dir, "n-b", part.partition)) == (EPOCH, tuple(nodes))
        assert read_replica_state(replica_dir(data_dir, "n-a", part.partition)) == state
    settings = ServiceSettings(data_dir, num_partitions=3, replication_factor=2, min_insync_replicas=1)
    recovered = recover_state(scan_replicas(data_dir), settings, nodes)
    assert recovered is not None
    for meta in recovered.partitions.values():
        assert (meta.replicas, meta.isr, meta.epoch) == (nodes, nodes, EPOCH)
    with pytest.raises(BackupError, match="not empty"):
        check_empty_dir(data_dir)
    damaged = replica_dir(data_dir, "n-a", 0)
    with open(os.path.join(damaged, manifest.partitions[0].files[0].name), "r+b") as file:
        file.write(b"X")
    with pytest.raises(BackupError, match="does not match"):
        part = manifest.partitions[0]
        finish_replica(damaged, part, restored_state(part, nodes, 3), leader=True)


def test_a_hold_a_dead_backup_left_expires(logs: Any) -> None:
    log = logs[0]
    fill(log, history(0, 3))
    hold_log(log, lambda: log.high_watermark, "old")
    hold_log(log, lambda: log.high_watermark, "new")
    later = os.path.getmtime(hold_dir(log.directory, "old")) + HOLD_MAX_AGE_S + 1
    assert expire_holds(log.directory, keep="new", now_s=later) == ["old"]
    assert os.listdir(os.path.join(log.directory, HOLDS_DIR)) == ["new"]
    with pytest.raises(ValueError, match="token"):
        hold_dir(log.directory, "../x")


def test_a_restore_places_distinct_replicas_and_spreads_the_leaders() -> None:
    layout = placement(["c", "a", "b"], num_partitions=6, replication_factor=2)
    assert all(len(set(replicas)) == 2 for replicas in layout.values())
    assert sorted(replicas[0] for replicas in layout.values()) == ["a", "a", "b", "b", "c", "c"]
    assert layout[0] == ["a", "b"] and layout[2] == ["c", "a"]


def test_the_throttle_paces_reads_over_every_thread() -> None:
    now, slept = [100.0], []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))

    throttle = Throttle(2.0, clock=lambda: now[0], sleep=sleep)  # 2 MB/s
    for _ in range(3):
        throttle.take(1_000_000)
    assert slept == [0.5, 1.0]
    now[0] = 200.0  # idle time earns no burst beyond the next read
    throttle.take(1_000_000)
    assert slept == [0.5, 1.0]
    Throttle(None).take(10**12)
    with pytest.raises(ValueError, match="> 0 MB/s"):
        Throttle(-1.0)
