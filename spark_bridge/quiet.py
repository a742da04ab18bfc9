"""Quiet analytics: what Spark, its JVMs, Ray Data and py4j print besides the results.

Quiet is the default of `raygroups lag` and `report`; `--verbose` leaves every
message as it was. Rules:
- Spark's driver JVM logs through log4j2 and, quiet, reads `LOG4J2_QUIET`:
  errors only, to stderr. RayDP hands the file to the driver as its
  `spark.log4j.config.file.name`, plain local Spark as a Java option
  (`log4j_configs`). The file lives as long as the session (`QuietJvm`).
- What a JVM prints before log4j2 is set up, or straight to its stdout and
  stderr (start-up warnings), no setting silences: the processes started
  inside `QuietJvm.capture()` inherit a temporary file as their stdout and
  stderr, for their lifetime, while this process's own `sys.stdout` and
  `sys.stderr` keep writing where they did (a progress spinner included).
  The captured text is added to the exception when Spark fails to start or a
  job fails, so nothing is lost when it matters.
- Python loggers, only while `quiet_python_logs()` runs (then restored):
  Ray Data's and py4j's below ERROR (Ray Data logs each dataset it runs),
  Ray Data's progress bars (the CLI shows its own progress), and Ray's
  deprecation warnings (RayDP reads `ray.worker`).
- The executors and RayDP's app master are Ray actors: their output goes to
  Ray's log files unless the driver asked Ray to forward it.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

LOG4J2_QUIET = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""
# RayDP's setting for the driver's log4j2 file, and the JVM property behind it.
RAYDP_LOG4J_KEY = "spark.log4j.config.file.name"
LOG4J2_PROPERTY = "-Dlog4j2.configurationFile="
# Python loggers raised to ERROR while quiet: Ray Data warns even that its bars are off.
QUIET_LOGGERS = ("ray.data", "py4j")
# The most of a JVM's captured output added to an exception.
CAPTURED_CHARS = 20_000


class QuietJvm:
    """The quiet log4j2 file and the capture of the JVMs' own output, for one session."""

    def __init__(self) -> None:
        handle, self.log4j_path = tempfile.mkstemp(prefix="raygroups-log4j2-", suffix=".properties")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(LOG4J2_QUIET)
        self.output: IO[bytes] = tempfile.TemporaryFile(prefix="raygroups-jvm-")

    def log4j_configs(self, raydp: bool) -> dict[str, str]:
        """Spark settings that make the driver read the quiet log4j2 file."""
        if raydp:
            return {RAYDP_LOG4J_KEY: self.log4j_path}
        return {"spark.driver.extraJavaOptions": LOG4J2_PROPERTY + self.log4j_path}

    @contextmanager
    def capture(self) -> Iterator[None]:
        """Child processes started in this block write their stdout and stderr to the capture."""
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        own = _keep_own_streams(saved)
        try:
            for fd in saved:
                os.dup2(self.output.fileno(), fd)
            yield
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
            _restore_streams(own)
            for copy in saved.values():
                os.close(copy)

    def text(self) -> str:
        """The end of what the JVMs wrote so far."""
        self.output.flush()
        size = self.output.seek(0, io.SEEK_END)
        self.output.seek(max(0, size - CAPTURED_CHARS))
        return self.output.read().decode(errors="replace")

    def annotate(self, exc: BaseException) -> None:
        """Add the JVMs' output to `exc`, shown with its traceback."""
        captured = self.text().strip()
        if captured:
            exc.add_note(f"Spark's JVM output (shown in full with --verbose):\n{captured}")

    def close(self) -> None:
        self.output.close()
        try:
            os.remove(self.log4j_path)
        except FileNotFoundError:
            pass


def _keep_own_streams(saved: dict[int, int]) -> dict[str, Any]:
    """Point sys.stdout/sys.stderr, where they write to fd 1/2, at copies of those fds."""
    replaced: dict[str, Any] = {}
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        try:
            writes_to_fd = stream.fileno() == fd
        except (AttributeError, OSError, ValueError):  # pytest's capture, a StringIO: not the fd
            writes_to_fd = False
        if writes_to_fd:
            encoding = getattr(stream, "encoding", None) or "utf-8"
            copy = open(saved[fd], "w", encoding=encoding, buffering=1, closefd=False)  # noqa: SIM115
            replaced[name] = stream
            setattr(sys, name, copy)
    return replaced


def _restore_streams(replaced: dict[str, Any]) -> None:
    for name, stream in replaced.items():
        getattr(sys, name).close()
        setattr(sys, name, stream)


@contextmanager
def quiet_python_logs() -> Iterator[None]:
    """Ray Data, py4j and Ray's deprecation warnings quiet while the block runs (module docstring)."""
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    deprecations = _DropDeprecations()
    ray_logger = logging.getLogger("ray")
    context = _ray_data_context()
    bars = context.enable_progress_bars if context is not None else None
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.ERROR))
    ray_logger.addFilter(deprecations)
    if context is not None:
        context.enable_progress_bars = False
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
        ray_logger.removeFilter(deprecations)
        if context is not None:
            context.enable_progress_bars = bars


class _DropDeprecations(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("DeprecationWarning:")


def _ray_data_context() -> Any:
    """Ray Data's context, if Ray Data is installed (the replica reader uses it)."""
    try:
        from ray.data import DataContext
    except ImportError:
        return None
    return DataContext.get_current()
