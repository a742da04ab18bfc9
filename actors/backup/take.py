"""Taking a backup of a running service: a consistent cut, copied without stopping commits.

How the cut is consistent: every group lives in one offsets partition, and
the service-wide state (topic registry, ACLs, settings) in partition 0's log,
so a cut is one offset per partition: its committed end (high watermark)
when the backup holds it. Everything acknowledged before the backup began
was committed, so it is below that cut. Each partition's leader freezes its
log below the cut by hard links taken under the log's maintenance lock
(`log.backup_hold`): later compactions cannot change what lies below it, and
appends go on meanwhile. The holds of all partitions are asked for at once;
then the held files are copied, several partitions in parallel, each read in
chunks through its actor (`read_held_file`), hashed as written, fsynced. The
manifest comes last (`log.backup_manifest`). Rules:
- The service is never changed: a backup only reads, and its holds are
  released whatever happens (a hold a dead backup left is expired by the log).
- Reads are paced (`Throttle`, `mb_per_s`, default `DEFAULT_MB_PER_S`) in
  1 MiB calls, two partitions at a time: a backup takes longer rather than
  taking the leaders' time from commits.
- A destination that fails or fills ends the backup with a `BackupError`
  naming the file and the OS's reason; what it wrote is removed, and there
  is never a manifest, so nothing looks complete.
- A partition whose leader cannot hold it is held on its next replica (a
  follower's committed end is a cut as good). A replica lost mid-copy (its
  hold died with it: a leadership move, a crash) makes the partition be held
  again on its replicas of the moment, and copied from the start, up to
  `HOLD_ATTEMPTS` times: its cut is then later, still above everything
  acknowledged before the backup began.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from log.backup_files import check_empty_dir, write_backup_file
from log.backup_manifest import (
    MANIFEST_FILE,
    BackupError,
    Manifest,
    PartitionBackup,
    partition_path,
    write_manifest,
)

READ_CHUNK_BYTES = 1024 * 1024
COPY_THREADS = 2
# The default pace of a backup's reads: its cost to the service, not its speed, is what
# matters (bench.backup: unthrottled on 2 cores, commits fell to a third during the copy).
DEFAULT_MB_PER_S = 20.0
CALL_TIMEOUT_S = 120.0
HOLD_ATTEMPTS = 3
# {partition: replica handles, the leader first}, as the controller's `log_sources` gives them.
Sources = Mapping[int, Sequence[Any]]


class SourceLost(BackupError):
    """The replica holding a partition for the backup is gone: hold the partition again."""


class PartitionSource(Protocol):
    """Where a backup reads partitions from (the partition actors, or a fake in tests)."""

    def hold(self, partitions: Sequence[int]) -> Mapping[int, Mapping[str, Any]]: ...

    def read(self, partition: int, name: str, offset: int, length: int) -> bytes: ...

    def release(self) -> None: ...


class Throttle:
    """Paces reads to `mb_per_s` over all threads (None: no limit): each read waits for its slot."""

    def __init__(
        self, mb_per_s: float | None, clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if mb_per_s is not None and not mb_per_s > 0:
            raise ValueError(f"a backup's pace must be > 0 MB/s, got {mb_per_s}")
        self.bytes_per_s = None if mb_per_s is None else mb_per_s * 1e6
        self.clock, self.sleep = clock, sleep
        self.lock = threading.Lock()
        self.next_s = clock()

    def take(self, size: int) -> None:
        if self.bytes_per_s is None:
            return
        with self.lock:
            now = self.clock()
            start = max(self.next_s, now)
            self.next_s = start + size / self.bytes_per_s
        if start > now:
            self.sleep(start - now)


def take_backup(
    dest: str, source: PartitionSource, num_partitions: int, namespace: str, replication_factor: int,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000), throttle: Throttle | None = None,
    steady: Callable[[], None] = lambda: None,
) -> Manifest:
    """Back the service up into the new or empty directory `dest` (module docstring).
    `steady` raises BackupError when the partitions changed (a repartition under way or
    run meanwhile): called once the partitions are held and again after the copies."""
    throttle = throttle or Throttle(DEFAULT_MB_PER_S)
    check_empty_dir(dest)
    created = not os.path.exists(dest)
    try:
        os.makedirs(dest, exist_ok=True)
    except OSError as exc:
        raise BackupError(f"{dest}: cannot create the backup directory: {exc.strerror or exc}") from exc
    try:
        try:
            cut_ms = now_ms()
            holds = source.hold(range(num_partitions))
            steady()
            with ThreadPoolExecutor(COPY_THREADS) as pool:
                copies = pool.map(
                    lambda p: _copy_partition(dest, source, p, holds[p], throttle), range(num_partitions)
                )
                partitions = tuple(copies)
            steady()
        finally:
            source.release()
        manifest = Manifest(cut_ms, now_ms(), namespace, num_partitions, replication_factor, partitions)
        write_manifest(dest, manifest)
        return manifest
    except BaseException as exc:
        _remove_partial(dest, created)
        if isinstance(exc, BackupError):
            raise BackupError(f"{exc} (the partial backup was removed; the service is unaffected)") from exc
        raise


def _copy_partition(
    dest: str, source: PartitionSource, partition: int, hold: Mapping[str, Any], throttle: Throttle
) -> PartitionBackup:
    for attempt in range(1, HOLD_ATTEMPTS + 1):
        try:
            return _copy_held(dest, source, partition, hold, throttle)
        except SourceLost:
            if attempt == HOLD_ATTEMPTS:
                raise
            shutil.rmtree(partition_path(dest, partition), ignore_errors=True)
            hold = source.hold([partition])[partition]
    raise AssertionError("unreachable")


def _copy_held(
    dest: str, source: PartitionSource, partition: int, hold: Mapping[str, Any], throttle: Throttle
) -> PartitionBackup:
    directory = partition_path(dest, partition)
    try:
        os.mkdir(directory)
    except OSError as exc:
        raise BackupError(f"{directory}: cannot create: {exc.strerror or exc}") from exc
    files = tuple(
        write_backup_file(os.path.join(directory, name), _chunks(source, partition, name, size, throttle))
        for name, size in hold["files"]
    )
    for file, (_, size) in zip(files, hold["files"]):
        if file.bytes != size:
            raise BackupError(f"{directory}/{file.name}: read {file.bytes} of its {size} held bytes")
    epochs = tuple((int(e), int(s)) for e, s in hold["epochs"])
    return PartitionBackup(
        partition, int(hold["cut"]), int(hold["leader_epoch"]), epochs, str(hold.get("source", "")), files
    )


def _chunks(
    source: PartitionSource, partition: int, name: str, size: int, throttle: Throttle
) -> Iterator[bytes]:
    offset = 0
    while offset < size:
        length = min(READ_CHUNK_BYTES, size - offset)
        throttle.take(length)
        chunk = source.read(partition, name, offset, length)
        if not chunk:
            return
        offset += len(chunk)
        yield chunk


def _remove_partial(dest: str, created: bool) -> None:
    """Remove what this backup wrote (only that: `dest` was empty or new)."""
    if created:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for name in os.listdir(dest) if os.path.isdir(dest) else ():
        if name.startswith("offsets-") or name.startswith(MANIFEST_FILE):
            shutil.rmtree(os.path.join(dest, name), ignore_errors=True)


class ActorSource:
    """The partition actors of a running service as a `PartitionSource` (Ray calls by name)."""

    def __init__(self, sources: Sources, refresh: Callable[[], Sources] | None = None) -> None:
        self.sources, self.refresh = sources, refresh
        self.token = uuid.uuid4().hex
        self.holders: dict[int, Any] = {}
        self.held_on: list[Any] = []  # every replica holding something, to release them all

    def hold(self, partitions: Sequence[int]) -> dict[int, Mapping[str, Any]]:
        import ray

        if self.holders and self.refresh is not None:
            self.sources = self.refresh()  # holding again: the replicas may have moved
        missing = [p for p in partitions if not self.sources.get(p)]
        if missing:
            raise BackupError(f"partitions {missing} have no replica serving their log: try again once led")
        # Every partition asked at once: the cuts are taken as close together as Ray allows.
        asked = {p: self.sources[p][0].hold_backup.remote(self.token) for p in partitions}
        holds: dict[int, Mapping[str, Any]] = {}
        for p in partitions:
            errors = []
            for index, handle in enumerate(self.sources[p]):
                try:
                    ref = asked[p] if index == 0 else handle.hold_backup.remote(self.token)
                    holds[p] = ray.get(ref, timeout=CALL_TIMEOUT_S)
                    self.holders[p] = handle
                    self.held_on.append(handle)
                    break
                except Exception as exc:  # any replica failure: the next replica is asked
                    errors.append(repr(exc))
            else:
                raise BackupError(f"partition {p}: no replica could hold its log: {'; '.join(errors)}")
        return holds

    def read(self, partition: int, name: str, offset: int, length: int) -> bytes:
        import ray

        handle = self.holders[partition]
        try:
            ref = handle.read_held_file.remote(self.token, name, offset, length)
            return ray.get(ref, timeout=CALL_TIMEOUT_S)  # type: ignore[no-any-return]
        except Exception as exc:  # the actor or its hold is gone: the partition is held again
            raise SourceLost(f"partition {partition}: reading {name} from its replica: {exc!r}") from exc

    def release(self) -> None:
        import ray

        refs = [handle.release_backup.remote(self.token) for handle in self.held_on]
        try:
            ray.get(refs, timeout=CALL_TIMEOUT_S)
        except Exception:  # noqa: S110 - a hold not released here expires (log.backup_hold)
            pass
