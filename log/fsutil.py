"""Durable file-system steps shared by the writer, compaction and snapshots.

Rules: a file that must survive a crash is fsynced before it is published
by a rename, and the directory is fsynced after every create, rename or
unlink that must survive: on Linux a new directory entry is only durable
once its directory has been synced.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

from log.errors import CorruptLogError

T = TypeVar("T")

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until every byte is written (it may write fewer)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: str, data: bytes, fsync: bool = True) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new file.

    Writes `<path>.tmp`, fsyncs it, renames it over `path`, fsyncs the
    directory. Recovery deletes stale `.tmp` files.
    """
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")


def atomic_write_json(path: str, data: object, fsync: bool = True) -> None:
    """`atomic_write` of a JSON document (metadata files beside the logs)."""
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"), fsync)


def read_versioned_json(path: str, version: int, what: str, parse: Callable[[dict[str, Any]], T]) -> T | None:
    """`parse` of the JSON object in `path` whose "version" is `version`; None if
    the file is missing. Any other content is CorruptLogError naming `what`:
    metadata beside a log is refused, never guessed."""
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        if data["version"] != version:
            raise ValueError(f"unknown version {data['version']!r}")
        return parse(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptLogError(path, 0, None, f"unreadable {what}: {exc!r}") from exc


DISK_CHECK_FILE = ".disk-check"


def check_disk(directory: str) -> None:
    """Raise OSError unless a write and an fsync succeed in `directory` (or, if it
    is missing, its nearest existing parent): whether a failed disk works again."""
    while not os.path.isdir(directory):
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    path = os.path.join(directory, DISK_CHECK_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, b"raygroups disk check\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.unlink(path)
    fsync_dir(directory)


RETIRED_PREFIX = "retired-"


def retire_directory(directory: str, version: int) -> str:
    """Rename a partition's directory that a shrink emptied to `retired-v<version>-<name>`
    beside it (atomic, the parent fsynced), so no start, scan or recovery takes it for a
    live partition's; the new path, or "" when it is gone already (a retried retirement)."""
    if not os.path.isdir(directory):
        return ""
    parent, name = os.path.split(directory.rstrip(os.sep))
    retired = os.path.join(parent, f"{RETIRED_PREFIX}v{version}-{name}")
    if os.path.exists(retired):  # a retirement that crashed after its rename, then made again
        raise FileExistsError(f"{retired} exists beside {directory}")
    os.rename(directory, retired)
    fsync_dir(parent)
    return retired
