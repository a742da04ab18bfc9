"""A simulated multi-node Ray cluster for the scenario scripts, which run in a
process of their own: the product's `actors.demo.sim_cluster.simulated_cluster`
(the replicated demo uses it too), here always with a temporary data
directory, removed afterwards; and `run_scenario`, how a test runs one."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import actors
from actors.demo.sim_cluster import simulated_cluster

__all__ = ["run_case", "run_scenario", "simulated_cluster"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_scenario(module: str, *args: str, timeout_s: float, note: str = "") -> str:
    """`python -m module args` from the repository root in a process of its own (a
    `Cluster` cannot share one with the session's Ray); its stdout. A failing run
    fails the test with `note` and the tail of its output."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, note + done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def run_case(
    cases: dict[str, Callable[[Any, str], None]], namespace: str, prefix: str, workers: int = 3
) -> int:
    """A scenario script's main: the case named on the command line, on a new simulated
    cluster of `workers` workers, the service stopped after it."""
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=sorted(cases))
    parser.add_argument("seed", nargs="?", type=int, default=0, help="for the cases that draw kill points")
    args = parser.parse_args()
    with simulated_cluster(workers=workers, namespace=namespace, prefix=prefix) as (cluster, data_dir):
        cases[args.case](cluster, data_dir)
        actors.stop(namespace)
    return 0
