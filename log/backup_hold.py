"""A backup's hold on a live log: its committed part up to a cut, frozen by hard links.

A backup copies each partition's log up to a recorded offset, the cut, while
the service keeps appending and compacting. Copying the live files would not
give the log as it was at the cut: a compaction running meanwhile may drop a
record below the cut because a newer record of its key lies above it (the
compacted range ends at the committed end, which moves on), so the copy
would lose that key's value as of the cut. A hold avoids it. Rules:
- `hold_log` takes the log's maintenance lock (no compaction, snapshot or
  truncation runs meanwhile), reads the cut (the committed end, from the
  caller, at that moment: every compaction finished before used an end at or
  below it), and hard-links every segment holding offsets below the cut, and
  the newest snapshot at or below it, into `<log dir>/backup-holds/<token>/`.
  Only then is the lock released: a compaction afterwards replaces files by
  rename and deletes the old names, so the linked inodes keep their bytes.
  The last segment is linked too and grows under its new name's writes; the
  hold lists it at its size up to the cut (whole batches: everything below
  the committed end is durable and complete), and only that much is read.
- Holding costs no copy and no lock while the bytes travel; it pins the
  disk space of segments compacted away meanwhile until `release_hold`.
- A hold whose backup died is removed by the next hold of that log once it
  is `HOLD_MAX_AGE_S` old; the log's readers ignore the directory.
- `committed_segments` is the listing both a hold and the log export use.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

from log.errors import LogError
from log.partition import PartitionLog
from log.segment import list_dir, seek_offset, segment_file_name
from log.snapshot import list_snapshots, snapshot_file_name

HOLDS_DIR = "backup-holds"
HOLD_MAX_AGE_S = 24 * 3600.0
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class LogHold:
    """What one hold froze: the cut and the files that hold the log below it."""

    cut: int
    # (name, bytes to read) in offset order: segments, then the snapshot if any.
    files: tuple[tuple[str, int], ...]
    # (leader epoch, start offset) of every epoch starting below the cut.
    epochs: tuple[tuple[int, int], ...]
    # The highest leader epoch that wrote to the log (its directory's fence).
    leader_epoch: int

    def to_wire(self) -> dict[str, object]:
        return {
            "cut": self.cut, "files": [list(f) for f in self.files],
            "epochs": [list(e) for e in self.epochs], "leader_epoch": self.leader_epoch,
        }


def check_token(token: object) -> str:
    """A hold's token as given by a caller: letters, digits, `-` and `_` (a directory name)."""
    if type(token) is not str or not _TOKEN.match(token):
        raise ValueError(f"a backup token is 1-64 letters, digits, '-' or '_', got {token!r}")
    return token


def hold_dir(log_dir: str, token: str) -> str:
    return os.path.join(log_dir, HOLDS_DIR, check_token(token))


def hold_log(log: PartitionLog, committed_end: Callable[[], int], token: str) -> LogHold:
    """Freeze the log below its committed end under `token` (module docstring)."""
    directory = hold_dir(log.directory, token)
    expire_holds(log.directory, keep=token)
    release_hold(log.directory, token)  # this backup holding the log again replaces its hold
    with log.maintenance_lock:
        cut = min(committed_end(), log.high_watermark)
        files = committed_segments(log.directory, cut)
        try:
            os.makedirs(directory, exist_ok=False)
            for name, _ in files:
                os.link(os.path.join(log.directory, name), os.path.join(directory, _held_name(name)))
            snapshots = [(o, p) for o, p in list_snapshots(log.directory) if o <= cut]
            held = [(_held_name(name), size) for name, size in files]
            if snapshots:
                offset, path = snapshots[-1]
                os.link(path, os.path.join(directory, snapshot_file_name(offset)))
                held.append((snapshot_file_name(offset), os.path.getsize(path)))
        except OSError as exc:
            shutil.rmtree(directory, ignore_errors=True)
            raise LogError(f"{log.directory}: cannot hold the log for a backup: {exc}") from exc
        epochs = tuple((epoch, start) for epoch, start in log.epoch_entries() if start < cut)
        return LogHold(cut, tuple(held), epochs, log.leader_epoch)


def release_hold(log_dir: str, token: str) -> None:
    shutil.rmtree(hold_dir(log_dir, token), ignore_errors=True)


def expire_holds(log_dir: str, keep: str = "", now_s: float | None = None) -> list[str]:
    """Remove the holds older than `HOLD_MAX_AGE_S` (a backup that died holding them)."""
    root = os.path.join(log_dir, HOLDS_DIR)
    now_s = time.time() if now_s is None else now_s
    removed = []
    for name in os.listdir(root) if os.path.isdir(root) else ():
        path = os.path.join(root, name)
        if name != keep and now_s - os.path.getmtime(path) > HOLD_MAX_AGE_S:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


def committed_segments(directory: str, end: int) -> list[tuple[str, int]]:
    """(name, bytes) of the segments of `directory` holding batches below offset `end`."""
    segments = list_dir(directory).segments
    files: list[tuple[str, int]] = []
    for segment, following in zip(segments, [*segments[1:], None]):
        if segment.base_offset >= end:
            break
        if following is not None and following.base_offset <= end:
            size = os.path.getsize(segment.path)
        else:
            # Hops headers of batches ending at or below `end`: all durable, so all complete.
            size, _ = seek_offset(segment.path, end, segment.base_offset)
        files.append((os.path.basename(segment.path), size))
    return files


def _held_name(name: str) -> str:
    """A segment's name in a hold: `<base>.log`, also for a swap left by an interrupted compaction."""
    return segment_file_name(int(name[:20]))
