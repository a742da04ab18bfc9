"""Everything around Spark that runs without it: end-offset files, the Java 17
check, session settings, JVM leftover tracking and the CLI's input checks.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.cli.tables import print_table
from log.segment import list_dir
from spark_bridge import cli, spark_session
from spark_bridge.end_offsets import EndOffsetsError, load_end_offsets
from spark_bridge.jvm import (
    JAVA17_OPTIONS,
    JavaVersionError,
    JvmTracker,
    ProcInfo,
    mapped_leftovers,
    parse_java_major,
    require_java17,
    session_jvms,
)
from spark_bridge.spark_session import JAVA_OPTION_KEYS, active_session, session, spark_configs

from tests.spark.test_columnar_rows import write_generated

# ------------------------------------------------------------ end offsets


def test_end_offsets_from_a_json_object(tmp_path: Path) -> None:
    path = tmp_path / "ends.json"
    path.write_text(json.dumps({"orders": {"0": 40, "1": 30}, "payments": {"0": 3}}))

    assert load_end_offsets(path) == {("orders", 0): 40, ("orders", 1): 30, ("payments", 0): 3}


def test_end_offsets_from_a_json_list_and_a_csv(tmp_path: Path) -> None:
    listed = tmp_path / "ends.json"
    listed.write_text(json.dumps([
        {"topic": "orders", "partition": 0, "log_end_offset": 40},
        {"topic": "orders", "topic_partition": 1, "end_offset": 30},
    ]))
    table = tmp_path / "ends.csv"
    table.write_text("topic,partition,log_end_offset\norders,0,40\norders,1,30\n")

    assert load_end_offsets(listed) == load_end_offsets(table) == {("orders", 0): 40, ("orders", 1): 30}


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bad.json", "{not json"),
        ("shape.json", '{"orders": 5}'),
        ("row.json", '[{"topic": "orders"}]'),
        ("bad.csv", "topic,partition\norders,x\n"),
        ("scalar.json", "7"),
    ],
)
def test_unreadable_end_offsets_are_refused(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(EndOffsetsError, match=name):
        load_end_offsets(path)


# ------------------------------------------------------------------ java


def fake_java(home: Path, version_line: str) -> None:
    """A `java` under `home/bin` that prints `version_line` as `java -version` does."""
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('openjdk version "11.0.2" 2019-01-15', 11),
        ("no version here", None),
    ],
)
def test_java_major_version(output: str, major: int | None) -> None:
    assert parse_java_major(output) == major


def test_java_older_than_17_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))

    with pytest.raises(JavaVersionError, match="Java 17 is required.*Java 11"):
        require_java17()


def test_missing_java_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    # As in a fresh process, whether or not an earlier test started the run's shared session.
    monkeypatch.setattr(spark_session, "_active", None)

    with pytest.raises(JavaVersionError, match="Java 17 is required"):
        session()
    assert active_session() is None


def test_java_17_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))

    assert require_java17() == str(tmp_path / "bin" / "java")


# --------------------------------------------------------------- settings


def test_java_options_reach_driver_executors_and_app_master() -> None:
    user = {"spark.executor.extraJavaOptions": "-Xss4m", "spark.sql.shuffle.partitions": "7"}
    conf = spark_configs(2, user)

    assert "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED" in JAVA17_OPTIONS
    assert JAVA17_OPTIONS.count("--add-opens=") == 14
    assert set(JAVA_OPTION_KEYS) == {
        "spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions",
        "spark.ray.raydp_app_master.extraJavaOptions",
    }
    # C1 only where Spark plans and schedules; the executors, running every row, keep C2.
    # Arrow Java's checks are off where Spark reads Arrow.
    unchecked = "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"
    assert conf["spark.driver.extraJavaOptions"] == f"{JAVA17_OPTIONS} -XX:TieredStopAtLevel=1 {unchecked}"
    assert conf["spark.ray.raydp_app_master.extraJavaOptions"] == JAVA17_OPTIONS + " -XX:TieredStopAtLevel=1"
    assert conf["spark.executor.extraJavaOptions"] == f"{JAVA17_OPTIONS} {unchecked} -Xss4m"
    # A user's JIT choice comes last, so it wins.
    assert spark_configs(2, {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4"})[
        "spark.driver.extraJavaOptions"
    ].endswith(f"-XX:TieredStopAtLevel=1 {unchecked} -XX:TieredStopAtLevel=4")
    assert conf["spark.sql.shuffle.partitions"] == "7"
    assert spark_configs(2, None)["spark.sql.shuffle.partitions"] == "4"
    # Adaptive execution is off unless the user turns it on.
    assert spark_configs(2, None)["spark.sql.adaptive.enabled"] == "false"
    assert spark_configs(2, {"spark.sql.adaptive.enabled": "true"})["spark.sql.adaptive.enabled"] == "true"


# -------------------------------------------------------------- leftovers


def test_session_jvms_are_java_descendants_started_since_the_session() -> None:
    processes = {
        1: ProcInfo(1, 0, 0.0, False, "init"),
        10: ProcInfo(10, 1, 100.0, False, "python driver"),
        11: ProcInfo(11, 10, 150.0, True, "java driver"),
        12: ProcInfo(12, 10, 150.0, False, "raylet --session_dir=/tmp/ray/session_x"),
        13: ProcInfo(13, 12, 160.0, True, "java executor"),
        14: ProcInfo(14, 1, 160.0, True, "java someone else's"),
        15: ProcInfo(15, 10, 90.0, True, "java older than the session"),
    }

    assert session_jvms(processes, {10}, 120.0) == [11, 13]


def test_a_killed_jvm_of_this_process_is_found_and_its_leftovers_removed(tmp_path: Path) -> None:
    (tmp_path / "Sleep.java").write_text(
        "class Sleep { public static void main(String[] a) throws Exception { Thread.sleep(60000); } }"
    )
    tracker = JvmTracker(started_s=time.time())
    java = subprocess.Popen(["java", "-XX:+UsePerfData", str(tmp_path / "Sleep.java")])
    try:
        # The JVM maps its perf-data file as soon as it runs.
        deadline = time.monotonic() + 30
        while not tracker.leftovers and time.monotonic() < deadline:
            tracker.collect()
            time.sleep(0.1)
        perf_data = f"/tmp/hsperfdata_{getpass.getuser()}/{java.pid}"
        assert tracker.pids == {java.pid} and perf_data in tracker.leftovers
    finally:
        # Killed, the JVM cannot delete its own perf-data file: the tracker must.
        java.kill()
        java.wait(30)
    assert tracker.wait_exit(5) == []
    assert os.path.exists(perf_data)
    assert tracker.remove_leftovers() == [perf_data] and not os.path.exists(perf_data)


def test_leftovers_are_removed_only_if_made_during_the_session(tmp_path: Path) -> None:
    old, new = tmp_path / "old.so", tmp_path / "new-dir"
    old.write_bytes(b"x")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    new.mkdir()
    (new / "lib.so").write_bytes(b"x")
    tracker = JvmTracker(started_s=time.time() - 60, leftovers={str(old), str(new), str(tmp_path / "gone")})

    assert tracker.remove_leftovers() == [str(new)]
    assert old.exists() and not new.exists()


def test_mapped_leftovers_of_a_process_without_any() -> None:
    assert mapped_leftovers(os.getpid()) == set()


# -------------------------------------------------------------------- cli


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="raygroups")
    cli.add_parsers(parser.add_subparsers(dest="command", required=True), print_table=print_table)
    return parser.parse_args(argv)


def test_cli_parsers_dispatch_to_the_commands() -> None:
    lag = parse(["lag", "orders-app", "--data-dir", "d", "--end-offsets", "e.json", "--json"])
    report = parse(["report", "--data-dir", "d", "--out", "o", "--local", "--executors", "2"])

    assert (lag.func, lag.groups, lag.data_dir, lag.end_offsets, lag.json) == (
        cli.lag_command, ["orders-app"], "d", "e.json", True
    )
    assert (report.func, report.out, report.local, report.executors) == (cli.report_command, "o", True, 2)
    assert cli.COMMANDS == {"lag": cli.lag_command, "report": cli.report_command}


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a Spark session fails the test (the CLI imports `session` when it runs)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command started Spark")

    monkeypatch.setattr(spark_session, "session", refuse)


def test_cli_refuses_a_missing_data_dir_without_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: None
) -> None:
    code = cli.lag_command(parse(["lag", "--data-dir", str(tmp_path / "none")]))

    assert code == cli.EXIT_BAD_INPUT
    assert "no offsets log directory" in capsys.readouterr().err


def test_cli_refuses_a_bad_end_offsets_file_without_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: None
) -> None:
    (tmp_path / "ends.json").write_text("[1, 2]")

    code = cli.report_command(
        parse(["report", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--end-offsets",
               str(tmp_path / "ends.json")])
    )

    assert code == cli.EXIT_BAD_INPUT
    assert "ends.json" in capsys.readouterr().err


def test_cli_refuses_a_corrupt_log_without_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: None
) -> None:
    directory = tmp_path / "offsets-0"
    write_generated(str(directory), 40, seed=5).close()
    first = list_dir(str(directory)).segments[0].path
    with open(first, "r+b") as file:  # a CRC mismatch mid-segment: the header scan finds it
        file.seek(60)
        byte = file.read(1)
        file.seek(60)
        file.write(bytes([byte[0] ^ 0xFF]))

    code = cli.report_command(parse(["report", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")]))

    assert code == cli.EXIT_BAD_INPUT
    assert f"error: corrupt offsets log: {first} at byte" in capsys.readouterr().err


def test_importing_the_cli_does_not_import_spark_or_ray() -> None:
    code = "import sys, spark_bridge.cli; print(sorted({'pyspark', 'ray', 'raydp'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]"
