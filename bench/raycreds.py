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
Rounds alternate (their order too), each figure pools its rounds. Printed:
calls/s, and the partition actor process's CPU per request (user + system,
the figure a shared machine disturbs least); the ratios are checked over
unchecked (1.0: free).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time

import psutil  # type: ignore[import-untyped]
import ray

import actors
from actors.client.client import Client
from actors.core.settings import KafkaListenerSettings
from bench.authz import acls, pooled
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
        lone_rate(checked, 20, offset)  # warm up: the credential verified, the groups made
        admin.refresh()  # the leader that served the warm-up
        partition = psutil.Process(ray.get(admin.leader(0).info.remote())["pid"])
        coalesced_rate(checked, 200, 50)
        lone = pooled(args.rounds, {"checked": lambda: lone_rate(checked, args.calls, offset),
                                    "unchecked": lambda: lone_rate(unchecked, args.calls, offset)}, partition)
        batched = pooled(args.rounds, {"checked": lambda: coalesced_rate(checked, args.batched, 50),
                                       "unchecked": lambda: coalesced_rate(unchecked, args.batched, 50)},
                         partition)
        rows = []
        for way, figures in (("lone sync calls", lone), ("coalesced, 50 coroutines", batched)):
            (rate, cpu), (base_rate, base_cpu) = figures["checked"], figures["unchecked"]
            rows.append([f"OffsetCommit, {way}: unchecked", f"{base_rate:.0f}", "1.00", f"{base_cpu:.0f}",
                         "1.00"])
            rows.append(["  with a credential, 1,002 ACLs", f"{rate:.0f}", f"{rate / base_rate:.3f}",
                         f"{cpu:.0f}", f"{cpu / base_cpu:.3f}"])
        columns = ("figure", "calls/s", "x unchecked", "partition CPU us/call", "x unchecked")
        print_figures("the Ray path's authorizer per request", columns, rows)
    finally:
        actors.stop()
        ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
