"""Benchmark of `raygroups report` end to end: `python -m bench.report [--records 1000000,10000000]`.

For each size: writes a log of that many records over 10,000 groups (the
`bench.spark` log: group metadata, then rounds of offset commits, 8
partition directories), then runs `raygroups report --data-dir DIR --out
OUT` as a user would, in its own process (its own local Ray and RayDP, one
executor), and measures its wall time, rows/s, and the peak resident memory
of the command's Python process and of its Spark driver JVM (polled every
50 ms; the executors are Ray actors, not counted). Each size's time per
record is printed as a ratio to the smallest size's (1.0: linear growth).
Progress goes to stderr, the figures to stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import psutil  # type: ignore[import-untyped]

from bench.spark import write_log
from bench.table import Row, print_table, progress

GROUPS = 10_000
POLL_S = 0.05


@dataclass(frozen=True)
class Run:
    records: int
    wall_s: float
    python_rss: int
    jvm_rss: int
    out: str


def peak_memory(process: psutil.Popen) -> tuple[int, int]:
    """Until `process` exits: the peak RSS of it and of its JVM child (the Spark driver)."""
    python_peak = jvm_peak = 0
    while process.poll() is None:
        try:
            python_peak = max(python_peak, process.memory_info().rss)
            for child in process.children(recursive=True):
                if child.name() == "java":
                    jvm_peak = max(jvm_peak, child.memory_info().rss)
        except psutil.Error:
            pass  # a child gone between listing and reading
        time.sleep(POLL_S)
    return python_peak, jvm_peak


def run_report(records: int) -> Run:
    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-report-")
    try:
        progress(f"writing {records:,} records")
        write_log(data_dir, records, GROUPS)
        out = os.path.join(data_dir, "report")
        command = [os.path.join(os.path.dirname(sys.executable), "raygroups"), "report",
                   "--data-dir", data_dir, "--out", out]
        progress(f"raygroups report over {records:,} records")
        started = time.perf_counter()
        process = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        python_rss, jvm_rss = peak_memory(process)
        stdout, stderr = process.communicate()
        wall_s = time.perf_counter() - started
        if process.returncode != 0:
            raise RuntimeError(f"raygroups report failed ({process.returncode}):\n{stderr[-3000:]}")
        read = [line for line in stderr.splitlines() if line.startswith("read ")]
        progress(f"{wall_s:.1f} s; {read[-1] if read else 'no read line'}")
        return Run(records, wall_s, python_rss, jvm_rss, stdout)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def rows(runs: list[Run]) -> list[Row]:
    base = runs[0]
    out = []
    for run in runs:
        per_record = run.wall_s / run.records
        growth = per_record / (base.wall_s / base.records)
        size = f"{run.records / 1e6:g} M records"
        out += [
            Row(f"raygroups report, {size}", run.wall_s, "s", growth,
                f"{run.records / run.wall_s:,.0f} rows/s end to end (with Spark's start)"),
            Row(f"  driver peak RSS, Python, {size}", run.python_rss / 2**20, "MiB"),
            Row(f"  driver peak RSS, Spark driver JVM, {size}", run.jvm_rss / 2**20, "MiB"),
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", default="1000000,10000000", help="comma-separated log sizes")
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.records.split(","))
    runs = [run_report(size) for size in sizes]
    print_table(f"raygroups report over a {GROUPS:,}-group log, one executor", rows(runs),
                "x time per record of the smallest")


if __name__ == "__main__":
    main()
