"""A backup of the offsets log on disk: its layout, its manifest, and its verification.

A backup directory holds `offsets-<p>/` for every offsets partition (the
segment files of its log up to the partition's cut, named as in a log, and
the newest snapshot at or below the cut, if any) and `MANIFEST.json`. The
service-wide state (the topic registry, ACLs, settings: service-state records,
FORMAT.md) is in partition 0's log, so it comes with it. Rules:
- The manifest is written last, atomically (`fsutil.atomic_write`: temp
  file, fsync, rename, directory fsync), after every data file is fsynced:
  a directory without `MANIFEST.json` is an incomplete backup, never one
  that looks complete.
- The manifest lists, per partition, the cut (the committed end it was
  copied to), the leader epochs of its data, and each file with its size
  and SHA-256; its own SHA-256 over the rest of it (canonical JSON) is in
  `checksum`. It guards against damage and edits that do not recompute
  every checksum; it is no signature.
- `verify_backup` trusts nothing: the manifest's checksum and schema, every
  partition present once, no file missing, extra or of another size or
  hash, and then every segment's batches checked as a reader would (CRC,
  offsets increasing, all below the cut) and the snapshot decoded. It
  raises `BackupError` naming the first bad file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from log.errors import LogError
from log.fsutil import atomic_write
from log.reader import LogReader
from log.snapshot import read_snapshot

MANIFEST_FILE = "MANIFEST.json"
FORMAT_NAME = "raygroups-backup"
FORMAT_VERSION = 1
_HASH_CHUNK = 4 * 1024 * 1024
_SEGMENT = re.compile(r"^\d{20}\.log$")
_SNAPSHOT = re.compile(r"^\d{20}\.snapshot$")


class BackupError(LogError):
    """A backup cannot be taken, read or trusted; the message names the file."""


@dataclass(frozen=True, slots=True)
class BackupFile:
    name: str
    bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class PartitionBackup:
    partition: int
    cut: int
    leader_epoch: int
    # (leader epoch, start offset) pairs of the data, oldest first.
    epochs: tuple[tuple[int, int], ...]
    # The replica log directory it was copied from (information only).
    source: str
    files: tuple[BackupFile, ...]


@dataclass(frozen=True, slots=True)
class Manifest:
    # When the partitions were held (the cut) and when the backup completed, ms since the epoch.
    cut_ms: int
    created_ms: int
    namespace: str
    num_partitions: int
    replication_factor: int
    partitions: tuple[PartitionBackup, ...]

    @property
    def records_end(self) -> int:
        """The sum of the cuts: offsets covered by the backup (a size, for reports)."""
        return sum(p.cut for p in self.partitions)

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for p in self.partitions for f in p.files)


def partition_path(root: str, partition: int) -> str:
    return os.path.join(root, f"offsets-{partition}")


def manifest_bytes(manifest: Manifest) -> bytes:
    body = {"format": FORMAT_NAME, "version": FORMAT_VERSION, **asdict(manifest)}
    body["checksum"] = _digest(body)
    return json.dumps(body, indent=1, sort_keys=True).encode("utf-8")


def write_manifest(root: str, manifest: Manifest) -> None:
    """The last step of a backup: after this the backup is complete (module docstring)."""
    atomic_write(os.path.join(root, MANIFEST_FILE), manifest_bytes(manifest), fsync=True)


def read_manifest(root: str) -> Manifest:
    path = os.path.join(root, MANIFEST_FILE)
    try:
        with open(path, "rb") as file:
            body = json.loads(file.read())
    except FileNotFoundError:
        raise BackupError(f"{path}: no manifest: not a backup, or an incomplete one") from None
    except (OSError, ValueError) as exc:
        raise BackupError(f"{path}: unreadable manifest: {exc}") from exc
    if not isinstance(body, dict) or body.get("format") != FORMAT_NAME:
        raise BackupError(f"{path}: not a raygroups backup manifest")
    if body.get("version") != FORMAT_VERSION:
        version = body.get("version")
        raise BackupError(f"{path}: backup format version {version!r}, this code reads {FORMAT_VERSION}")
    checksum = body.pop("checksum", None)
    if checksum != _digest(body):
        raise BackupError(f"{path}: the manifest's checksum does not match its content: it was changed")
    try:
        return _parse(body)
    except (KeyError, TypeError, ValueError) as exc:
        raise BackupError(f"{path}: malformed manifest: {exc!r}") from exc


def verify_backup(root: str) -> Manifest:
    """The backup's manifest once every byte of it checks out; BackupError naming the bad file."""
    manifest = read_manifest(root)
    numbers = [p.partition for p in manifest.partitions]
    if sorted(numbers) != list(range(manifest.num_partitions)):
        raise BackupError(f"{os.path.join(root, MANIFEST_FILE)}: partitions {numbers}, expected "
                          f"0..{manifest.num_partitions - 1} once each")
    extra = sorted(set(os.listdir(root)) - {MANIFEST_FILE, *(f"offsets-{p}" for p in numbers)})
    if extra:
        raise BackupError(f"{os.path.join(root, extra[0])}: not part of the backup")
    for partition in manifest.partitions:
        verify_partition(root, partition)
    return manifest


def verify_partition(root: str, partition: PartitionBackup) -> None:
    directory = partition_path(root, partition.partition)
    listed = {f.name for f in partition.files}
    present = set(os.listdir(directory)) if os.path.isdir(directory) else set()
    for name in sorted(present - listed):
        raise BackupError(f"{os.path.join(directory, name)}: not listed in the manifest")
    for file in partition.files:
        path = os.path.join(directory, file.name)
        if file.name not in present:
            raise BackupError(f"{path}: missing")
        size = os.path.getsize(path)
        if size != file.bytes:
            raise BackupError(f"{path}: {size} bytes, the manifest says {file.bytes}")
        if file_sha256(path) != file.sha256:
            raise BackupError(f"{path}: its SHA-256 does not match the manifest: it was changed")
    _check_structure(directory, partition)


def _check_structure(directory: str, partition: PartitionBackup) -> None:
    """The log reads back as a log: valid batches, increasing offsets, all below the cut."""
    path = directory
    try:
        for file in partition.files:
            if _SNAPSHOT.match(file.name):
                path = os.path.join(directory, file.name)
                if read_snapshot(path).next_offset > partition.cut:
                    raise BackupError(f"{path}: a snapshot past the cut {partition.cut}")
        for path, batch in LogReader(directory).raw_batches(0, None):
            if batch.next_offset > partition.cut:
                end, cut = batch.next_offset, partition.cut
                raise BackupError(f"{path}: a batch ending at {end}, past the cut {cut}")
    except BackupError:
        raise
    except LogError as exc:
        raise BackupError(f"{path}: {exc}") from exc


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _parse(body: dict[str, Any]) -> Manifest:
    partitions = tuple(
        PartitionBackup(
            partition=_int(p["partition"]), cut=_int(p["cut"]), leader_epoch=_int(p["leader_epoch"], -1),
            epochs=tuple((_int(e), _int(s)) for e, s in p["epochs"]), source=str(p["source"]),
            files=tuple(_file(f) for f in p["files"]),
        )
        for p in body["partitions"]
    )
    return Manifest(
        cut_ms=_int(body["cut_ms"]), created_ms=_int(body["created_ms"]), namespace=str(body["namespace"]),
        num_partitions=_int(body["num_partitions"], 1),
        replication_factor=_int(body["replication_factor"], 1),
        partitions=partitions,
    )


def check_file_name(name: object) -> str:
    """A backup's file name: a segment's or a snapshot's, never a path."""
    if not isinstance(name, str) or not (_SEGMENT.match(name) or _SNAPSHOT.match(name)):
        raise ValueError(f"file name {name!r} is no segment or snapshot name")
    return name


def _file(data: dict[str, Any]) -> BackupFile:
    name = check_file_name(data["name"])
    sha = data["sha256"]
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ValueError(f"bad sha256 {sha!r}")
    return BackupFile(name, _int(data["bytes"]), sha)


def _int(value: object, minimum: int = 0) -> int:
    if type(value) is not int or value < minimum:
        raise ValueError(f"an integer >= {minimum} expected, got {value!r}")
    return value
