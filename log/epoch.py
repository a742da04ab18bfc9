"""The partition directory's leader epoch: the highest epoch that wrote to it.

Rules: the file `leader-epoch` holds one JSON object
`{"version": 1, "leader_epoch": N}` and is replaced atomically (see
`fsutil.atomic_write`), so it is either the old or the new epoch, never
torn. A missing file means no leader has written yet (epoch -1). An
unreadable file is refused rather than guessed: fencing must not fail open.
"""

from __future__ import annotations

import json
import os
from typing import BinaryIO

from log.errors import CorruptLogError, FencedEpochError
from log.fsutil import atomic_write

EPOCH_FILE = "leader-epoch"
EPOCH_FILE_VERSION = 1
NO_EPOCH = -1


def read_leader_epoch(directory: str) -> int:
    path = os.path.join(directory, EPOCH_FILE)
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except FileNotFoundError:
        return NO_EPOCH
    return _parse(path, raw)


class EpochWatch:
    """`read_leader_epoch` for a writer that checks it after every fsync,
    re-reading the file only when it was replaced.

    The file last read is held open, so its inode cannot be reused: while
    the path still names that inode, the content is the same (the file is
    only ever replaced whole). A stat instead of an open, read and parse.
    """

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, EPOCH_FILE)
        self._held: tuple[BinaryIO, os.stat_result] | None = None
        self._epoch = NO_EPOCH

    def read(self) -> int:
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            self.close()
            return NO_EPOCH
        if self._held is not None and os.path.samestat(named, self._held[1]):
            return self._epoch
        self.close()
        file = open(self.path, "rb")  # held open: see the class docstring
        try:
            held = os.fstat(file.fileno())
            self._epoch = _parse(self.path, file.read())
        except BaseException:
            file.close()
            raise
        self._held = (file, held)
        return self._epoch

    def close(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held[0].close()


def _parse(path: str, raw: bytes) -> int:
    try:
        data = json.loads(raw)
        epoch = data["leader_epoch"]
        if data["version"] != EPOCH_FILE_VERSION or type(epoch) is not int:
            raise ValueError(f"unexpected content {data!r}")
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptLogError(path, 0, None, f"unreadable leader epoch file: {exc}") from exc
    return epoch


def write_leader_epoch(directory: str, leader_epoch: int, fsync: bool = True) -> None:
    data = json.dumps({"version": EPOCH_FILE_VERSION, "leader_epoch": leader_epoch}).encode()
    atomic_write(os.path.join(directory, EPOCH_FILE), data, fsync)


def fence(directory: str, leader_epoch: int, fsync: bool = True) -> int:
    """Refuse a lower epoch than the directory's; record a higher one.

    Returns the epoch now recorded.
    """
    current = read_leader_epoch(directory)
    if leader_epoch < current:
        raise FencedEpochError(leader_epoch, current)
    if leader_epoch > current:
        write_leader_epoch(directory, leader_epoch, fsync)
    return leader_epoch
