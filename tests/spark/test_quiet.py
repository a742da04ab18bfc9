"""spark_bridge.quiet: the analytics print their results and nothing of Spark's, the JVM's,
Ray Data's or py4j's own, unless --verbose; captured output comes back with a failure.

The capture and logger tests run no Spark; the command-line test runs `raygroups lag
--local` twice in a subprocess (plain local Spark, no Ray), quiet and --verbose."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_bridge.quiet import LOG4J2_PROPERTY, RAYDP_LOG4J_KEY, QuietJvm, quiet_python_logs
from spark_bridge.spark_session import _merged

from tests.spark.histories import HISTORY, write_history

CHILD = [sys.executable, "-c", "import sys; print('jvm says hi'); print('jvm warns', file=sys.stderr)"]


def test_child_processes_write_into_the_capture_and_the_fds_come_back(
    capfd: pytest.CaptureFixture[str],
) -> None:
    quiet = QuietJvm()
    try:
        with quiet.capture():
            subprocess.run(CHILD, check=True)
        assert capfd.readouterr() == ("", ""), "nothing reached this process's stdout or stderr"
        assert "jvm says hi" in quiet.text() and "jvm warns" in quiet.text()
        subprocess.run(CHILD, check=True)
        assert capfd.readouterr() == ("jvm says hi\n", "jvm warns\n"), "fds 1 and 2 restored"
        error = RuntimeError("Spark did not start")
        quiet.annotate(error)
        assert "jvm warns" in error.__notes__[0] and "--verbose" in error.__notes__[0]
    finally:
        quiet.close()
    assert not os.path.exists(quiet.log4j_path)


def test_the_quiet_log4j2_file_reaches_the_driver_in_both_modes() -> None:
    quiet = QuietJvm()
    try:
        assert "rootLogger.level = error" in Path(quiet.log4j_path).read_text()
        assert quiet.log4j_configs(raydp=True) == {RAYDP_LOG4J_KEY: quiet.log4j_path}
        local = quiet.log4j_configs(raydp=False)
        user = {"spark.driver.extraJavaOptions": "-Dmine=1", "spark.x": "y"}
        merged = _merged(local, user)
        assert merged["spark.driver.extraJavaOptions"] == f"{LOG4J2_PROPERTY}{quiet.log4j_path} -Dmine=1"
        assert merged["spark.x"] == "y"
    finally:
        quiet.close()


def test_python_loggers_are_quiet_inside_and_restored_after(caplog: pytest.LogCaptureFixture) -> None:
    data, ray_logger = logging.getLogger("ray.data"), logging.getLogger("ray")
    before = data.level
    with caplog.at_level(logging.INFO), quiet_python_logs():
        data.info("Starting execution of Dataset")
        data.warning("Progress bars disabled")
        ray_logger.warning("DeprecationWarning: `ray.worker.global_worker` is a private attribute")
        ray_logger.warning("a real warning")
        from ray.data import DataContext

        assert DataContext.get_current().enable_progress_bars is False
    assert [r.getMessage() for r in caplog.records] == ["a real warning"]
    assert data.level == before and not ray_logger.filters


@pytest.mark.spark
@pytest.mark.slow
def test_lag_prints_only_its_table_unless_verbose(tmp_path: Path) -> None:
    write_history(str(tmp_path), HISTORY)
    command = [sys.executable, "-m", "actors.cli.main", "lag", "--data-dir", str(tmp_path), "--local"]
    quiet = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    verbose = subprocess.run([*command, "--verbose"], capture_output=True, text=True, timeout=600, check=True)
    assert quiet.stdout == verbose.stdout and quiet.stdout.split("\n")[0].split()[0] == "GROUP"
    assert "WARN" in verbose.stderr, "Spark's own logging, shown with --verbose"
    noise = [line for line in quiet.stderr.splitlines() if "WARN " in line or "log level" in line]
    assert noise == [], quiet.stderr
    assert "LOG-END-OFFSET: highest committed offset" in quiet.stderr
