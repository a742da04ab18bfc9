"""Ray's messages to the driver, kept out of a benchmark's figures, in a log file.

`ray.init` starts, in every driver and whatever `log_to_driver` says, a thread
(`ray._private.worker.listen_error_messages`) that prints on the driver's
stdout each error the cluster publishes to drivers. A crashed node of a
simulated cluster brings two kinds: its agents' "(raylet) Raylet is
terminated. Termination is unexpected ... Last 20 lines of the Raylet logs:"
with 20 lines of `<Ray's logs>/raylet.out` (the head's raylet log, which may
hold its "[state-dump]" lines), and the GCS's "(raylet) The node with node
id ... has been marked dead". bench.replication crashes nodes on purpose,
so it got several of these among its figures. `log_file` sends the
process's stdout to a log file while Ray runs and names that file on
stderr afterwards (with how many lines it holds, and even when the run
fails), so nothing Ray said is lost; the benchmark prints its progress on
stderr, and its figures after the block, to the real stdout. Tracebacks and
Python logging go to stderr as before.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator


def log_path(name: str) -> str:
    """A new file in the temporary directory: `<name>-<date>-<time>-<pid>.log`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(tempfile.gettempdir(), f"{name}-{stamp}-{os.getpid()}.log")


@contextlib.contextmanager
def log_file(name: str, path: str | None = None) -> Iterator[str]:
    """Everything printed on stdout inside the block (by any thread: Ray's
    listener among them) goes to `path` (default `log_path(name)`), which is
    named on stderr at the end; an empty file is removed. Yields the path."""
    path = path or log_path(name)
    log = open(path, "w", encoding="utf-8", buffering=1)
    try:
        with contextlib.redirect_stdout(log):
            yield path
    finally:
        log.close()
        report(name, path)


def report(name: str, path: str) -> None:
    """Name the log on stderr, with its line count; remove it if Ray said nothing."""
    lines = _count_lines(path)
    if lines:
        counted = f"{lines:,} line{'' if lines == 1 else 's'}"
        print(f"{name}: Ray's messages to the driver ({counted}): {path}", file=sys.stderr, flush=True)
    else:
        os.remove(path)


def _count_lines(path: str) -> int:
    with open(path, encoding="utf-8", errors="replace") as file:
        return sum(1 for _ in file)
