"""Benchmark of `raygroups report` end to end: `python -m bench.report [--records 1000000,10000000]
[--executor-cores 1]`.

For each size: writes a log of that many records over 10,000 groups (the
`bench.spark` log: group metadata, then rounds of offset commits, 8
partition directories), then runs `raygroups report --data-dir DIR --out
OUT` as a user would, in its own process (its own local Ray and RayDP, one
executor), and measures its wall time, rows/s, each stage's time (from the
command's progress lines: starting Spark, reading the log, the tables, each
written as CSV and Parquet as it comes, then the plots and the page), and
the peak resident memory of the command's Python process and of its Spark
driver JVM (polled every 50 ms; the executors are Ray actors, not counted).
Each size's time per record is printed as a ratio to the smallest size's
(1.0: linear growth). Progress goes to stderr, the figures to stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

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
    # Seconds from the start to each stage's first line on stderr (the command's progress).
    stages: dict[str, float]


# The command's progress lines (piped stderr) that start each stage.
STAGES = {
    "start": "starting Spark",
    "read": "reading the offsets log",
    # Each table's CSV and Parquet are written as it comes, during "tables".
    "tables": "computing the report's tables",
    "plots": "drawing plots",
}


def stage_times(stderr: Any, started: float, lines: list[str]) -> dict[str, float]:
    """Read `stderr` to its end, keeping its lines; when each stage's line came."""
    seen: dict[str, float] = {}
    for line in stderr:
        lines.append(line)
        for stage, text in STAGES.items():
            if stage not in seen and text in line:
                seen[stage] = time.perf_counter() - started
    return seen


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


def run_report(records: int, executor_cores: int) -> Run:
    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-report-")
    try:
        progress(f"writing {records:,} records")
        write_log(data_dir, records, GROUPS)
        out = os.path.join(data_dir, "report")
        command = [os.path.join(os.path.dirname(sys.executable), "raygroups"), "report",
                   "--data-dir", data_dir, "--out", out, "--executor-cores", str(executor_cores)]
        progress(f"raygroups report over {records:,} records")
        started = time.perf_counter()
        process = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        lines: list[str] = []
        with ThreadPoolExecutor(1) as pool:
            stages = pool.submit(stage_times, process.stderr, started, lines)
            python_rss, jvm_rss = peak_memory(process)
            stdout = process.stdout.read() if process.stdout else ""
            process.wait()
            wall_s = time.perf_counter() - started
            stage_s = stages.result()
        stderr = "".join(lines)
        if process.returncode != 0:
            raise RuntimeError(f"raygroups report failed ({process.returncode}):\n{stderr[-3000:]}")
        read = [line for line in lines if line.startswith("read ")]
        progress(f"{wall_s:.1f} s; {read[-1].strip() if read else 'no read line'}")
        return Run(records, wall_s, python_rss, jvm_rss, stdout, {**stage_s, "end": wall_s})
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
            *stage_rows(run, size),
            Row(f"  driver peak RSS, Python, {size}", run.python_rss / 2**20, "MiB"),
            Row(f"  driver peak RSS, Spark driver JVM, {size}", run.jvm_rss / 2**20, "MiB"),
        ]
    return out


def stage_rows(run: Run, size: str) -> list[Row]:
    """How long each stage took: from its first progress line to the next stage's."""
    marks = sorted(run.stages.items(), key=lambda item: item[1])
    return [Row(f"  {stage}, {size}", end - begin, "s")
            for (stage, begin), (_, end) in zip(marks, marks[1:])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", default="1000000,10000000", help="comma-separated log sizes")
    parser.add_argument("--executor-cores", type=int, default=1, help="the executor's cores")
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.records.split(","))
    runs = [run_report(size, args.executor_cores) for size in sizes]
    title = f"raygroups report over a {GROUPS:,}-group log, one executor of {args.executor_cores} core(s)"
    print_table(title, rows(runs), "x time per record of the smallest")


if __name__ == "__main__":
    main()
