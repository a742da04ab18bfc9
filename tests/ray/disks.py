"""Disk faults for simulated nodes: each node's directory `<data_dir>/nodes/<name>`
(actors/demo/sim_cluster.py, `named=True`) is a small filesystem of its own that a
test fills to ENOSPC, makes read-only, and heals.

Needs root on Linux (mount, loop devices). `disk_rig_missing()` says why the
rig cannot run here; `require_disk_rig()` fails a test for that reason (the
disk-fault tests never pass by skipping).

Two kinds of node filesystem:
- "ext4" (the default): an ext4 image (1 KiB blocks, no journal, no reserved
  blocks) on a loop device, the images on one tmpfs of the rig's so fsync
  costs memory copies. `read_only` takes ext4's `errors=remount-ro` path
  (`/sys/fs/ext4/<dev>/trigger_fs_error`): the kernel makes the filesystem
  read-only at once, files open for writing included, as on a real disk
  error; every write then fails with EROFS. That state is sticky (ext4's
  emergency_ro survives `mount -o remount,rw`), so `heal` does what an
  operator does: detach the broken mount (lazily: the replica may still hold
  files on it, which keep failing, so the process must reopen its log),
  check a copy of the image with e2fsck and mount it in the same place.
  What the old mount held only in the page cache is gone, as after a real
  disk failure; what was fsynced is there.
- "tmpfs": `fill` and `heal` only in practice: `mount -o remount,ro` fails
  with EBUSY while any file is open for writing (a live log always holds its
  active segment open), so `read_only` raises DiskBusyError then.

`fill` writes a filler file until ENOSPC; `heal` deletes it and makes the
filesystem writable again. `node_disks(...)` mounts one filesystem per node
name under a new root and always unmounts everything on the way out, even
after an error; `release_root(root)` cleans up after a process that was
killed before it could (the tests call it after every scenario process).

Use:
    with node_disks(["head", "worker-1", ...]) as disks:
        with simulated_cluster(..., data_dir=disks.data_dir, named=True) as (cluster, _):
            ...
            disks.fill("worker-1"); ...; disks.heal("worker-1")
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

ROOT_PREFIX = "raygroups-disks-"
DEFAULT_SIZE_MIB = 32
FILLER = ".raygroups-filler"
IMAGES = "images"
KINDS = ("ext4", "tmpfs")
_TOOLS = {"tmpfs": ("mount", "umount"), "ext4": ("mount", "umount", "losetup", "mkfs.ext4", "e2fsck")}
_CHUNK = 1 << 20


class DiskRigError(RuntimeError):
    """The rig could not do what it was asked (a mount, a fill, the cleanup)."""


class DiskBusyError(DiskRigError):
    """`mount -o remount,ro` refused: a file on that filesystem is open for writing."""


_missing_cache: dict[str, str | None] = {}


def disk_rig_missing(kind: str = "ext4") -> str | None:
    """Why the rig of this kind cannot run on this machine, or None when it can
    (checked once per process, with a real trial mount)."""
    if kind not in _missing_cache:
        _missing_cache[kind] = _check(kind)
    return _missing_cache[kind]


def _check(kind: str) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"the disk-fault rig needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "the disk-fault rig needs root (it mounts filesystems)"
    missing = [tool for tool in _TOOLS[kind] if shutil.which(tool) is None]
    if missing:
        return f"the disk-fault rig ({kind}) needs {', '.join(missing)} (apt-get install mount e2fsprogs)"
    if kind == "ext4" and not os.path.exists("/dev/loop-control"):
        return "the disk-fault rig (ext4) needs loop devices (/dev/loop-control is missing)"
    root = tempfile.mkdtemp(prefix=ROOT_PREFIX + "check-")
    try:
        with node_disks(["probe"], size_mib=2, kind=kind, root=root) as disks:
            disks.fill("probe")
            disks.heal("probe")
    except (DiskRigError, OSError) as exc:
        return f"the disk-fault rig ({kind}) cannot mount here: {exc}"
    finally:
        release_root(root)
    return None


def require_disk_rig(kind: str = "ext4") -> None:
    """In a pytest test: fail, naming why, when the rig cannot run here (it needs root
    and loop devices, as CI and these machines have); never a skip standing in for
    the disk-fault tests."""
    import pytest

    reason = disk_rig_missing(kind)
    if reason is not None:
        pytest.fail(f"{reason} (the disk-fault tests need root and mount/losetup)")


# ------------------------------------------------------------------ mounts


def _unescape(path: str) -> str:
    """A mount point as /proc/self/mountinfo writes it (octal escapes) made plain."""
    return path.encode().decode("unicode_escape")


def mounts_under(root: str) -> list[str]:
    """Every mount point at or under `root`, deepest first."""
    root = os.path.realpath(root)
    found = []
    with open("/proc/self/mountinfo") as file:
        for line in file:
            point = _unescape(line.split()[4])
            if point == root or point.startswith(root + os.sep):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def loops_under(root: str) -> list[str]:
    """Loop devices whose backing file is under `root` (deleted files included)."""
    root = os.path.realpath(root)
    done = subprocess.run(
        ["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
        capture_output=True, text=True, check=False,
    )
    found = []
    for line in done.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().removesuffix(" (deleted)").startswith(root + os.sep):
            found.append(parts[0])
    return found


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DiskRigError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def _unmount(point: str) -> None:
    """Unmount `point`; lazily when something still holds a file on it."""
    if subprocess.run(["umount", point], capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def release_root(root: str, timeout_s: float = 10.0) -> list[str]:
    """Unmount everything under `root`, detach its loop devices and delete it;
    what is still left (mount points and loop devices), empty when all is clean.
    Safe to call on a root already released."""
    if not os.path.exists(root):
        return []
    images = os.path.join(os.path.realpath(root), IMAGES)
    # The nodes' filesystems first: each frees its loop device (attached with autoclear),
    # whose backing file is on the images tmpfs, unmounted last.
    for point in mounts_under(root):
        if point != images:
            _unmount(point)
    deadline = time.monotonic() + timeout_s
    while True:
        loops = loops_under(root)
        for device in loops:
            subprocess.run(["losetup", "--detach", device], capture_output=True, check=False)
        if not loops or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for point in mounts_under(root):
        _unmount(point)
    left = mounts_under(root) + loops
    if not mounts_under(root):
        shutil.rmtree(root, ignore_errors=True)
    return left


# ------------------------------------------------------------------- disks


@dataclass
class _Disk:
    name: str
    path: str
    image: str | None = None
    device: str | None = None
    filled: bool = False
    read_only: bool = False
    generation: int = 0


class NodeDisks:
    """One small filesystem per node name at `<data_dir>/nodes/<name>` (module docstring)."""

    def __init__(self, root: str, size_mib: int = DEFAULT_SIZE_MIB, kind: str = "ext4") -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.root = os.path.realpath(root)
        self.size_mib = size_mib
        self.kind = kind
        self.data_dir = os.path.join(self.root, "data")
        self._images = os.path.join(self.root, IMAGES)
        self._disks: dict[str, _Disk] = {}
        os.makedirs(self.data_dir, exist_ok=True)
        if kind == "ext4":
            os.makedirs(self._images, exist_ok=True)
            # Room for every node's image twice over (a read-only heal copies one); tmpfs
            # takes memory only for what is written.
            _run("mount", "-t", "tmpfs", "-o", f"size={64 * size_mib}m,mode=0700", "tmpfs", self._images)

    def path(self, name: str) -> str:
        return os.path.join(self.data_dir, "nodes", name)

    def names(self) -> list[str]:
        return list(self._disks)

    def mount(self, name: str) -> str:
        """Mount an empty filesystem for node `name`; its directory."""
        if name in self._disks:
            raise DiskRigError(f"node {name}'s disk is mounted already")
        disk = _Disk(name, self.path(name))
        os.makedirs(disk.path, exist_ok=True)
        self._disks[name] = disk
        if self.kind == "tmpfs":
            _run("mount", "-t", "tmpfs", "-o", f"size={self.size_mib}m,mode=0755", "tmpfs", disk.path)
        else:
            disk.image = self._image_path(disk)
            with open(disk.image, "wb") as file:
                file.truncate(self.size_mib << 20)
            _run("mkfs.ext4", "-q", "-F", "-b", "1024", "-m", "0", "-O", "^has_journal", disk.image)
            self._attach(disk)
        return disk.path

    def _image_path(self, disk: _Disk) -> str:
        return os.path.join(self._images, f"{disk.name}.{disk.generation}.img")

    def _attach(self, disk: _Disk) -> None:
        assert disk.image is not None
        disk.device = _run("losetup", "--find", "--show", disk.image).stdout.strip()
        try:
            _run("mount", "-t", "ext4", "-o", "errors=remount-ro", disk.device, disk.path)
        finally:
            # Detaching a mounted loop device marks it to go with its last user: the
            # unmount frees it, even one done by `release_root` after a killed process.
            subprocess.run(["losetup", "--detach", disk.device], capture_output=True, check=False)

    def _disk(self, name: str) -> _Disk:
        try:
            return self._disks[name]
        except KeyError:
            raise DiskRigError(f"no disk mounted for node {name!r} (mounted: {self.names()})") from None

    # --------------------------------------------------------------- faults

    def fill(self, name: str) -> int:
        """Fill node `name`'s filesystem until ENOSPC with a filler file; the bytes written."""
        disk = self._disk(name)
        written = 0
        fd = os.open(os.path.join(disk.path, FILLER), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        disk.filled = True
        try:
            chunk = _CHUNK
            while chunk:
                try:
                    written += os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    chunk //= 4
            try:
                os.fsync(fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
        finally:
            os.close(fd)
        return written

    def read_only(self, name: str) -> None:
        """Make node `name`'s filesystem read-only now, files open for writing included
        (ext4); tmpfs raises DiskBusyError while a file is open for writing there."""
        disk = self._disk(name)
        if self.kind == "tmpfs":
            done = subprocess.run(["mount", "-o", "remount,ro", disk.path], capture_output=True, text=True)
            if done.returncode != 0:
                raise DiskBusyError(
                    f"mount -o remount,ro {disk.path}: {done.stderr.strip()} (a file open for writing "
                    "keeps a tmpfs writable: use the ext4 kind)"
                )
        else:
            assert disk.device is not None
            trigger = f"/sys/fs/ext4/{os.path.basename(disk.device)}/trigger_fs_error"
            with open(trigger, "w") as file:
                file.write("raygroups disk-fault rig: read_only")
        disk.read_only = True
        if not self.is_read_only(name):
            raise DiskRigError(f"node {name}'s filesystem did not go read-only: {self.options(name)}")

    def heal(self, name: str) -> None:
        """Undo `fill` and `read_only`: node `name`'s filesystem is writable with room again."""
        disk = self._disk(name)
        if disk.read_only:
            if self.kind == "tmpfs":
                _run("mount", "-o", "remount,rw", disk.path)
            else:
                self._replace_broken_mount(disk)
            disk.read_only = False
        if disk.filled:
            try:
                os.unlink(os.path.join(disk.path, FILLER))
            except FileNotFoundError:
                pass
            disk.filled = False

    def _replace_broken_mount(self, disk: _Disk) -> None:
        """Detach a read-only ext4 mount and mount a checked copy of its image in its place."""
        assert disk.image is not None and disk.device is not None
        _unmount(disk.path)
        old = disk.image
        disk.generation += 1
        disk.image = self._image_path(disk)
        shutil.copyfile(old, disk.image)
        os.unlink(old)
        # An operator's fsck: exit codes 0-3 mean clean or repaired.
        checked = subprocess.run(["e2fsck", "-f", "-y", disk.image], capture_output=True, text=True)
        if checked.returncode >= 4:
            raise DiskRigError(f"e2fsck of node {disk.name}'s image failed: {checked.stdout[-500:]}")
        self._attach(disk)

    def heal_all(self) -> None:
        for name in self._disks:
            self.heal(name)

    def wipe(self, name: str) -> None:
        """Heal node `name`'s disk and delete everything on it (a fresh, empty disk)."""
        self.heal(name)
        path = self._disk(name).path
        for entry in os.listdir(path):
            target = os.path.join(path, entry)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            else:
                os.unlink(target)

    # ------------------------------------------------------------ inspection

    def options(self, name: str) -> list[str]:
        """The mount options of node `name`'s filesystem (from /proc/self/mountinfo)."""
        path = os.path.realpath(self._disk(name).path)
        options: list[str] = []
        with open("/proc/self/mountinfo") as file:
            for line in file:
                fields = line.split()
                if _unescape(fields[4]) == path:
                    # Per-mount options, then (after " - fstype source") the superblock's.
                    options = fields[5].split(",") + line.split(" - ", 1)[1].split()[2].split(",")
        return options

    def is_read_only(self, name: str) -> bool:
        options = self.options(name)
        return "ro" in options or "emergency_ro" in options

    def state(self, name: str) -> str:
        disk = self._disk(name)
        faults = [what for what, on in (("full", disk.filled), ("read-only", disk.read_only)) if on]
        return "+".join(faults) or "ok"

    # --------------------------------------------------------------- cleanup

    def unmount_all(self) -> None:
        """Unmount every node's filesystem and the rig's own; raise DiskRigError if a
        mount or loop device is left (after trying everything)."""
        for disk in self._disks.values():
            _unmount(disk.path)
        left = release_root(self.root)
        self._disks.clear()
        if left:
            raise DiskRigError(f"the disk-fault rig left mounts or loop devices behind: {left}")


@contextmanager
def node_disks(
    names: Iterable[str],
    size_mib: int = DEFAULT_SIZE_MIB,
    kind: str = "ext4",
    root: str | None = None,
) -> Iterator[NodeDisks]:
    """A NodeDisks under `root` (a new temporary directory when None) with one
    filesystem mounted per name; everything unmounted and deleted on the way out."""
    path = root or os.path.join(tempfile.gettempdir(), f"{ROOT_PREFIX}{uuid.uuid4().hex[:12]}")
    os.makedirs(path, exist_ok=True)
    disks: NodeDisks | None = None
    try:
        disks = NodeDisks(path, size_mib, kind)
        for name in names:
            disks.mount(name)
        yield disks
    finally:
        if disks is not None:
            disks.unmount_all()
        else:
            left = release_root(path)
            if left:
                raise DiskRigError(f"the disk-fault rig left mounts or loop devices behind: {left}")
