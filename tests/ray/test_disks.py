"""The disk-fault rig itself (tests/ray/disks.py), without Ray: a node's filesystem
fills to ENOSPC, heals, goes read-only under an open writer and back, and
nothing stays mounted afterwards, even after an error."""

from __future__ import annotations

import errno
import os
import tempfile

import pytest

from tests.ray.disks import (
    ROOT_PREFIX,
    DiskBusyError,
    NodeDisks,
    loops_under,
    mounts_under,
    node_disks,
    release_root,
    require_disk_rig,
)

pytestmark = [pytest.mark.chaos]


def _write(path: str, data: bytes = b"x" * 4096) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _append_until_error(fd: int) -> None:
    """Write through `fd` until a write fails (a full filesystem may first take what fits
    in the file's last block or page)."""
    for _ in range(64):
        os.write(fd, b"y" * 65536)


def _errno_of(call: object, *args: object) -> int | None:
    try:
        call(*args)  # type: ignore[operator]
    except OSError as exc:
        return exc.errno
    return None


def _assert_released(root: str) -> None:
    assert mounts_under(root) == []
    assert loops_under(root) == []
    assert not os.path.exists(root)


@pytest.mark.parametrize("kind", ["ext4", "tmpfs"])
def test_fill_until_enospc_then_heal(kind: str) -> None:
    require_disk_rig(kind)
    with node_disks(["worker-1", "worker-2"], size_mib=4, kind=kind) as disks:
        root = disks.root
        node = disks.path("worker-1")
        assert node == os.path.join(disks.data_dir, "nodes", "worker-1")
        assert len(mounts_under(root)) == (3 if kind == "ext4" else 2)
        writer = os.open(os.path.join(node, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(writer, b"before")
            assert disks.fill("worker-1") > 3 << 20
            assert disks.state("worker-1") == "full"
            assert _errno_of(_write, os.path.join(node, "new")) == errno.ENOSPC
            assert _errno_of(_append_until_error, writer) == errno.ENOSPC
            _write(os.path.join(disks.path("worker-2"), "other"))  # the other node's disk has room
            disks.heal("worker-1")
            assert disks.state("worker-1") == "ok"
            os.write(writer, b"y" * 65536)
            os.fsync(writer)
            _write(os.path.join(node, "new"))
        finally:
            os.close(writer)
    _assert_released(root)


def test_ext4_read_only_under_an_open_writer_then_heal() -> None:
    require_disk_rig("ext4")
    with node_disks(["worker-1"], size_mib=4) as disks:
        root = disks.root
        log = os.path.join(disks.path("worker-1"), "log")
        writer = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(writer, b"durable;")
            os.fsync(writer)
            disks.read_only("worker-1")
            assert disks.is_read_only("worker-1") and disks.state("worker-1") == "read-only"
            assert _errno_of(os.write, writer, b"lost") == errno.EROFS
            assert _errno_of(_write, os.path.join(disks.path("worker-1"), "new")) == errno.EROFS
            with open(log, "rb") as file:  # reads still work
                assert file.read() == b"durable;"
            disks.heal("worker-1")
            assert not disks.is_read_only("worker-1")
            # The broken mount's files keep failing: the owner must reopen them.
            assert _errno_of(os.write, writer, b"stale") == errno.EROFS
        finally:
            os.close(writer)
        _write(log, b"again")
        with open(log, "rb") as file:
            assert file.read() == b"durable;again"
        # Both faults at once, healed together.
        disks.fill("worker-1")
        disks.read_only("worker-1")
        assert disks.state("worker-1") == "full+read-only"
        disks.heal("worker-1")
        _write(os.path.join(disks.path("worker-1"), "after"))
    _assert_released(root)


def test_tmpfs_read_only_only_without_writers() -> None:
    require_disk_rig("tmpfs")
    with node_disks(["head"], size_mib=4, kind="tmpfs") as disks:
        path = os.path.join(disks.path("head"), "log")
        writer = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            with pytest.raises(DiskBusyError):
                disks.read_only("head")
        finally:
            os.close(writer)
        disks.read_only("head")
        assert _errno_of(_write, path) == errno.EROFS
        disks.heal("head")
        _write(path)


def test_everything_unmounted_after_an_error() -> None:
    require_disk_rig("ext4")
    root = tempfile.mkdtemp(prefix=ROOT_PREFIX)
    with pytest.raises(RuntimeError, match="boom"):
        with node_disks(["head", "worker-1"], size_mib=4, root=root) as disks:
            held = os.open(os.path.join(disks.path("head"), "held"), os.O_WRONLY | os.O_CREAT, 0o644)
            disks.fill("worker-1")
            disks.read_only("head")
            os.close(held)
            raise RuntimeError("boom")
    _assert_released(root)


def test_release_root_cleans_up_after_a_killed_process() -> None:
    require_disk_rig("ext4")
    root = tempfile.mkdtemp(prefix=ROOT_PREFIX)
    disks = NodeDisks(root, size_mib=4)  # never unmounted by its owner
    for name in ("head", "worker-1"):
        disks.mount(name)
    disks.read_only("worker-1")
    disks.heal("worker-1")
    assert mounts_under(root) and loops_under(root)
    assert release_root(root) == []
    _assert_released(root)
