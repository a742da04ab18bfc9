"""The JVM side of a Spark session: Java 17 check, JVM options, leftovers.

Owns what Spark needs from the machine's Java and what its JVMs leave
behind. Rules:
- Spark is started only on Java 17 or newer (`require_java17`): RayDP's
  Spark 3.5 JVMs are configured with the Java 17 module options below, and
  an older Java fails later with obscure errors. The `java` checked is the
  one Spark launches: `$JAVA_HOME/bin/java`, else `java` on PATH.
- `JAVA17_OPTIONS` are the `--add-opens` flags of stack-notes: without
  them Spark<->Ray conversion crashes an executor and the next job hangs.
- Leftovers: RayDP's JVMs copy Ray's Java library into `/tmp/ray/<ms>/`
  (about 40 MB each, never deleted; the path ignores Ray's temp dir) and
  killed executors leave `/tmp/liblz4-java-*.so`, `/tmp/libzstd-jni-*.so`
  and `/tmp/hsperfdata_<user>/<pid>`. A `JvmTracker` removes only files
  that a JVM of its own session maps in memory: JVMs started after the
  session began, descending from this process or from the local Ray
  node's processes. Linux only (`/proc`); elsewhere it finds nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field

JAVA_REQUIRED = 17
_OPENED_PACKAGES = (
    "java.lang", "java.lang.invoke", "java.io", "java.net", "java.nio", "java.math", "java.text",
    "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs",
    "sun.security.action", "sun.util.calendar",
)
JAVA17_OPTIONS = " ".join(
    ["-XX:+IgnoreUnrecognizedVMOptions"]
    + [f"--add-opens=java.base/{name}=ALL-UNNAMED" for name in _OPENED_PACKAGES]
)
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')
_JVM_TMP = "/tmp"
# Mapped paths a session's JVMs leave behind -> what to delete.
_RAY_LIB_DIR = re.compile(rf"^({_JVM_TMP}/ray/\d+)/[^/]+$")
_NATIVE_LIB = re.compile(rf"^{_JVM_TMP}/(liblz4-java-\d+\.so|libzstd-jni-[\d.]+-\d+\.so|snappy-[^/]+\.so)$")
_PERF_DATA = re.compile(rf"^{_JVM_TMP}/hsperfdata_[^/]+/\d+$")


class JavaVersionError(RuntimeError):
    """No Java, or a Java older than 17, where Spark must start."""


def java_executable() -> str | None:
    """The `java` Spark launches: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def parse_java_major(version_output: str) -> int | None:
    """Major version from `java -version` output: '1.8.0_392' -> 8, '17.0.15' -> 17."""
    match = _VERSION.search(version_output)
    if match is None:
        return None
    major = int(match[1])
    return int(match[2] or 0) if major == 1 else major


def require_java17() -> str:
    """The java executable, or JavaVersionError if it is missing or older than 17."""
    java = java_executable()
    if java is None:
        raise JavaVersionError(
            f"Java {JAVA_REQUIRED} is required for Spark, but no `java` was found "
            "(set JAVA_HOME or put Java 17 on PATH)"
        )
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        message = f"Java {JAVA_REQUIRED} is required for Spark; running {java} failed: {exc}"
        raise JavaVersionError(message) from exc
    major = parse_java_major(done.stderr + done.stdout)
    if major is None or major < JAVA_REQUIRED:
        found = "an unknown version" if major is None else f"Java {major}"
        raise JavaVersionError(f"Java {JAVA_REQUIRED} is required for Spark; {java} is {found}")
    return java


# ------------------------------------------------------------ leftovers


@dataclass(frozen=True, slots=True)
class ProcInfo:
    pid: int
    ppid: int
    start_s: float
    is_java: bool
    cmdline: str


def _boot_time_s() -> float:
    with open("/proc/stat") as file:
        for line in file:
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def list_processes() -> dict[int, ProcInfo]:
    """Every live process (not zombies) with its parent and start time."""
    if not os.path.isdir("/proc"):
        return {}
    ticks, boot = os.sysconf("SC_CLK_TCK"), _boot_time_s()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as file:
                argv = file.read().split(b"\0")
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        is_java = os.path.basename(argv[0]).decode(errors="replace") == "java"
        cmdline = b" ".join(argv).decode(errors="replace")
        start_s = boot + int(fields[19]) / ticks
        found[int(name)] = ProcInfo(int(name), int(fields[1]), start_s, is_java, cmdline)
    return found


def mapped_leftovers(pid: int) -> set[str]:
    """Temp files and dirs that JVM `pid` maps and that outlive it."""
    try:
        with open(f"/proc/{pid}/maps") as file:
            lines = file.read().splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        # address perms offset dev inode [path]; a file deleted meanwhile ends in " (deleted)".
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].removesuffix(" (deleted)")
        if match := _RAY_LIB_DIR.match(path):
            found.add(match[1])
        elif _NATIVE_LIB.match(path):
            found.update((path, path + ".lck"))
        elif _PERF_DATA.match(path):
            found.add(path)
    return found


def session_jvms(processes: dict[int, ProcInfo], roots: set[int], since_s: float) -> list[int]:
    """JVMs started at or after `since_s` that descend from one of `roots`."""
    found = []
    for info in processes.values():
        if not info.is_java or info.start_s < since_s:
            continue
        pid, seen = info.pid, set()
        while pid in processes and pid not in seen:
            if pid in roots:
                found.append(info.pid)
                break
            seen.add(pid)
            pid = processes[pid].ppid
    return sorted(found)


@dataclass
class JvmTracker:
    """The JVMs of one Spark session and the temp files they leave behind."""

    # Where the local Ray node keeps its session: its processes are roots too.
    ray_session_dir: str | None = None
    started_s: float = field(default_factory=time.time)
    pids: set[int] = field(default_factory=set)
    leftovers: set[str] = field(default_factory=set)

    def collect(self) -> list[int]:
        """Record the session's live JVMs and what they map; call before stopping Spark."""
        processes = list_processes()
        roots = {os.getpid()}
        if self.ray_session_dir:
            roots.update(p.pid for p in processes.values() if self.ray_session_dir in p.cmdline)
        # Process start times are whole clock ticks: allow one second of rounding.
        jvms = session_jvms(processes, roots, self.started_s - 1.0)
        self.pids.update(jvms)
        for pid in jvms:
            self.leftovers.update(mapped_leftovers(pid))
        return jvms

    def alive(self) -> list[int]:
        processes = list_processes()
        return sorted(pid for pid in self.pids if pid in processes and processes[pid].is_java)

    def wait_exit(self, timeout_s: float) -> list[int]:
        """Wait for the recorded JVMs to exit; returns those still alive."""
        deadline = time.monotonic() + timeout_s
        while (alive := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return alive

    def remove_leftovers(self) -> list[str]:
        """Delete recorded leftovers created since the session began; returns what went."""
        removed = []
        for path in sorted(self.leftovers):
            try:
                if os.stat(path).st_mtime < self.started_s - 1.0:
                    continue
                if os.path.isdir(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
            except FileNotFoundError:
                continue
            removed.append(path)
        return removed
