"""Cost of the Ray path's credentials per request: `python -m bench.raycreds`.

Issue 49: what authorizing Ray callers costs on top of a request. One
service with `ray_credentials` on and 1,000 ACLs (bench/authz.py's) on a
local Ray cluster; the same OffsetCommit requests to the same partition
actor, in the same run, through two clients that differ only in the check:
- checked: a client presenting a credential of `User:bench` (`handle_wire`,
  `handle_batch`: the credential verified, each request checked against the
  ACLs);
- unchecked: a service component's client (`serve_wire`, `serve_batch`:
  the same request path without the check), the baseline.
Two ways of sending: lone sync calls, one at a time (a Ray call per request),
and coalesced async calls from many coroutines (one credential per batch).
Rounds alternate, each rate pools its rounds; the ratio is checked over
unchecked calls/s (1.0: free).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable

import ray

import actors
from actors.client.client import Client
from actors.core.settings import KafkaListenerSettings
from bench.authz import acls
from bench.table import print_figures
from coordinator import CoordinatorConfig, Errors


def lone_rate(client: Client, calls: int, offset: list[int]) -> tuple[int, float]:
    started = time.perf_counter()
    for _ in range(calls):
        offset[0] += 1
        response = client.commit_offsets("bench-lone", {("orders", 0): offset[0]})
        assert response.partitions[0].error is Errors.NONE, response
    return calls, time.perf_counter() - started


def coalesced_rate(client: Client, calls: int, concurrency: int) -> tuple[int, float]:
    async def worker(w: int) -> None:
        for i in range(calls // concurrency):
            response = await client.commit_offsets_async(f"bench-{w}", {("orders", 0): i})
            assert response.partitions[0].error is Errors.NONE, response

    async def run() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        return time.perf_counter() - started

    return calls // concurrency * concurrency, asyncio.run(run())


def pooled(rounds: int, ways: dict[str, Callable[[], tuple[int, float]]]) -> dict[str, float]:
    totals = {name: [0, 0.0] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            done, seconds = way()
            totals[name][0] += done
            totals[name][1] += seconds
    return {name: done / seconds for name, (done, seconds) in totals.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400, help="lone calls per round")
    parser.add_argument("--batched", type=int, default=4_000, help="coalesced calls per round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-")
    try:
        actors.init_local_ray(num_cpus=2)
        listener = KafkaListenerSettings(enabled=False)
        admin = actors.start(data_dir, num_partitions=1, kafka_listener=listener, ray_credentials=True,
                             coordinator_config=CoordinatorConfig(group_initial_rebalance_delay_ms=0))
        admin.create_acls(acls(1_000))
        checked = Client(admin.controller, credential=admin.issue_credential("User:bench", 3600))
        unchecked = Client(admin.controller, service=True)
        offset = [0]
        lone = pooled(args.rounds, {"checked": lambda: lone_rate(checked, args.calls, offset),
                                    "unchecked": lambda: lone_rate(unchecked, args.calls, offset)})
        batched = pooled(args.rounds, {"checked": lambda: coalesced_rate(checked, args.batched, 50),
                                       "unchecked": lambda: coalesced_rate(unchecked, args.batched, 50)})
        rows = []
        for way, rates in (("lone sync calls", lone), ("coalesced, 50 coroutines", batched)):
            rows.append([f"OffsetCommit, {way}: unchecked", f"{rates['unchecked']:.0f}", "1.00"])
            per_request_us = (1 / rates["checked"] - 1 / rates["unchecked"]) * 1e6
            rows.append([f"  with a credential and 1,002 ACLs ({per_request_us:+.0f} us/request)",
                         f"{rates['checked']:.0f}", f"{rates['checked'] / rates['unchecked']:.3f}"])
        print_figures("the Ray path's authorizer per request", ("figure", "calls/s", "x unchecked"), rows)
    finally:
        actors.stop()
        ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
