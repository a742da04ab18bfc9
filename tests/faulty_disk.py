"""A disk that fails on demand under one directory, in this process, without mounts.

`FaultyDisk(monkeypatch, root)` wraps the `os` calls the log writes with
(`write`, `fsync`, `fdatasync`, `ftruncate`, `open` for writing, `replace`,
`rename`, `unlink`) and the log's own `fdatasync` alias: while `broken`,
each call on a file under `root` raises `OSError(errno)` (ENOSPC by
default; EROFS, EIO or EDQUOT as the test asks); `fsync_only` breaks only
the fsyncs, so writes land in the page cache and never reach the disk, as
in PostgreSQL's "fsyncgate". Reads always work. Calls elsewhere (other
replicas' directories, pipes, sockets) pass through. The Ray tests use real
filesystems instead (tmpfs per simulated node).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

import pytest

import log.partition

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class FaultyDisk:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: str) -> None:
        self.root = os.path.realpath(root)
        self.error: int | None = None
        self.fsync_only = False
        self.failures = 0
        real_fdatasync = getattr(os, "fdatasync", os.fsync)
        for name in ("write", "fsync", "ftruncate"):
            monkeypatch.setattr(os, name, self._by_fd(getattr(os, name), fsync=name == "fsync"))
        fdatasync = self._by_fd(real_fdatasync, fsync=True)
        monkeypatch.setattr(os, "fdatasync", fdatasync, raising=False)
        monkeypatch.setattr(log.partition, "_fdatasync", fdatasync)
        for name in ("replace", "rename", "unlink"):
            monkeypatch.setattr(os, name, self._by_path(getattr(os, name)))
        real_open = os.open

        def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & _WRITE_FLAGS and not self.fsync_only:
                self._check(os.fspath(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", open_)

    def break_(self, error: int = errno.ENOSPC, fsync_only: bool = False) -> None:
        self.error, self.fsync_only = error, fsync_only

    def heal(self) -> None:
        self.error, self.fsync_only = None, False

    @property
    def broken(self) -> bool:
        return self.error is not None

    def _check(self, path: str, fsync: bool = False) -> None:
        if self.error is None or (self.fsync_only and not fsync):
            return
        if os.path.realpath(path).startswith(self.root + os.sep) or os.path.realpath(path) == self.root:
            self.failures += 1
            raise OSError(self.error, os.strerror(self.error), path)

    def _by_fd(self, real: Callable[..., Any], fsync: bool = False) -> Callable[..., Any]:
        def call(fd: int, *args: Any) -> Any:
            if self.error is not None:
                try:
                    path = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    path = ""
                self._check(path, fsync)
            return real(fd, *args)

        return call

    def _by_path(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(src: Any, *args: Any, **kwargs: Any) -> Any:
            self._check(os.fspath(src))
            return real(src, *args, **kwargs)

        return call
