"""An injectable failing disk for the log and actor tests, without mounts: while armed, the
OS calls the log makes on files under one directory raise OSError (ENOSPC,
EIO, EROFS, ...), as a full, broken or read-only disk's would.

It patches `os` (and the log's own aliases of it, such as
`log.partition._fdatasync`) through pytest's monkeypatch, so the patches
are undone after the test. Calls on descriptors or paths outside the
directory pass through. Which file a descriptor belongs to is read from
/proc/self/fd, so descriptors opened before arming count too (Linux only).

The data a write put in a file before a failed fsync stays in the file:
that is the page cache a real kernel keeps after a failed fsync (the
"fsyncgate" lesson) and which may never have reached the disk. A log that
recovers from those bytes after the failure trusts what was never durable.

    disk = FailingDisk(monkeypatch, tmp_path)
    disk.fail(errno.EIO, ops={"fsync"}, times=1)   # the next fsync under tmp_path fails
"""

from __future__ import annotations

import errno as errno_module
import os
from collections.abc import Callable, Iterable
from typing import Any

import pytest

# Every kind of call the layer can fail.
OPS = frozenset({"write", "fsync", "open", "rename", "truncate", "mkdir"})
# The log modules that bind an os function to a name of their own at import.
_ALIASES = (("log.partition", "_fdatasync", "fsync"),)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class FailingDisk:
    """The failing-disk layer for files under `root` (module docstring)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: str | os.PathLike[str]) -> None:
        self.root = os.path.realpath(root)
        self._errno: int | None = None
        self._ops: frozenset[str] = frozenset()
        self._left: int | None = None
        # (op, path) of every call that was made to fail.
        self.failures: list[tuple[str, str]] = []
        self._install(monkeypatch)

    # ------------------------------------------------------------ control

    def fail(self, error: int, ops: Iterable[str] = OPS, times: int | None = None) -> None:
        """From now on, the calls of kinds `ops` under the root raise OSError(error);
        only the next `times` of them when given, then the disk works again."""
        unknown = set(ops) - OPS
        if unknown:
            raise ValueError(f"unknown ops {sorted(unknown)}; known: {sorted(OPS)}")
        self._errno, self._ops, self._left = error, frozenset(ops), times

    def full(self) -> None:
        """A full disk: writes and creating files fail with ENOSPC (fsync of written data still works)."""
        self.fail(errno_module.ENOSPC, {"write", "mkdir", "truncate"})

    def read_only(self) -> None:
        """A read-only filesystem: every modifying call fails with EROFS."""
        self.fail(errno_module.EROFS)

    def heal(self) -> None:
        self._errno, self._ops, self._left = None, frozenset(), None

    @property
    def armed(self) -> bool:
        return self._errno is not None

    # ---------------------------------------------------------- internals

    def _under(self, path: str | None) -> bool:
        return path is not None and (path == self.root or path.startswith(self.root + os.sep))

    @staticmethod
    def _fd_path(fd: int) -> str | None:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None

    @staticmethod
    def _abs(path: Any, dir_fd: int | None = None) -> str | None:
        if isinstance(path, int):
            return FailingDisk._fd_path(path)
        try:
            return os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return None

    def _check(self, op: str, path: str | None) -> None:
        if self._errno is None or op not in self._ops or not self._under(path):
            return
        self.failures.append((op, str(path)))
        error = self._errno
        if self._left is not None:
            self._left -= 1
            if self._left <= 0:
                self.heal()
        raise OSError(error, f"{os.strerror(error)} (injected by the failing-disk layer)", path)

    def _install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real: dict[str, Callable[..., Any]] = {
            name: getattr(os, name)
            for name in ("write", "fsync", "open", "rename", "replace", "ftruncate", "truncate", "mkdir")
        }
        real["fdatasync"] = getattr(os, "fdatasync", os.fsync)

        def write(fd: int, data: Any) -> int:
            self._check("write", self._fd_path(fd))
            return real["write"](fd, data)  # type: ignore[no-any-return]

        def fsync(fd: Any) -> None:
            number = fd if isinstance(fd, int) else fd.fileno()
            self._check("fsync", self._fd_path(number))
            real["fsync"](fd)

        def fdatasync(fd: Any) -> None:
            number = fd if isinstance(fd, int) else fd.fileno()
            self._check("fsync", self._fd_path(number))
            real["fdatasync"](fd)

        def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & _WRITE_FLAGS:
                self._check("open", self._abs(path))
            return real["open"](path, flags, *args, **kwargs)  # type: ignore[no-any-return]

        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            self._check("rename", self._abs(dst))
            real["rename"](src, dst, *args, **kwargs)

        def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            self._check("rename", self._abs(dst))
            real["replace"](src, dst, *args, **kwargs)

        def ftruncate(fd: int, length: int) -> None:
            self._check("truncate", self._fd_path(fd))
            real["ftruncate"](fd, length)

        def truncate(path: Any, length: int) -> None:
            self._check("truncate", self._abs(path))
            real["truncate"](path, length)

        def mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
            self._check("mkdir", self._abs(path))
            real["mkdir"](path, *args, **kwargs)

        patched = {
            "write": write, "fsync": fsync, "fdatasync": fdatasync, "open": open_, "rename": rename,
            "replace": replace, "ftruncate": ftruncate, "truncate": truncate, "mkdir": mkdir,
        }
        for name, function in patched.items():
            monkeypatch.setattr(os, name, function)
        for module, attribute, kind in _ALIASES:
            monkeypatch.setattr(f"{module}.{attribute}", fdatasync if kind == "fsync" else patched[kind])
