"""Memory of a partition's state per group and per committed offset: `python -m bench.capacity`.

For docs/capacity.md. Drives one `OffsetPartition` in this process (no Ray:
the same request path, `handle_batch`, and a real log with fsync) and reads
the process's resident memory after a full collection:
- classic groups of one member each (JoinGroup with the KIP-394 round, then
  SyncGroup), `--groups` of them;
- committed offsets: the same number of groups of offsets only (consumers
  with `assign()`) commit one partition each, then `--offsets` more each.
Each figure is the growth of RSS over the partition before the step, per
group or per offset; the state a partition replica holds is the same on
every replica (followers keep a hot copy). With `--actors`: the resident
(RSS) and private (USS) memory of an idle partition leader of an embedded
service (its Kafka listener started, no client connected) and of a standby,
against a bare Ray actor's, the baseline, once they settled (`SETTLE_S` and a
second after the leaders serve: the free heap returned, `actors.core.heap`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import psutil  # type: ignore[import-untyped]
import ray

from actors.controller.cluster_view import PARTITION_ACTOR_PREFIX
from actors.controller.standbys import STANDBY_EPOCH
from actors.core.heap import SETTLE_S
from actors.core.settings import ServiceSettings
from actors.partition.actor import OffsetPartition
from actors.partition.batches import answer_in_process
from bench.actors import SUB
from bench.embedded import PARTITIONS, embedded_service
from bench.table import print_figures, progress
from coordinator import CoordinatorConfig, Errors
from coordinator.messages import (
    JoinGroupRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    SyncGroupRequest,
)

SESSION_MS = 600_000  # nobody expires during the run (below group.max.session.timeout.ms)
CHUNK = 2_000  # requests per batch, as a coalescing client sends them


def rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


async def send(partition: OffsetPartition, requests: list[Any]) -> list[Any]:
    """Each request's answer, in order, through `handle_batch` in chunks."""
    answers: list[Any] = []
    for chunk in chunks(requests):
        answers += await answer_in_process(partition, chunk)
    return answers


def join(group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(group, SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="consumer",
                            protocols=(("range", SUB),), member_id=member_id, client_id="bench")


async def form_groups(partition: OffsetPartition, groups: list[str]) -> None:
    ids = await send(partition, [join(g) for g in groups])
    joined = await send(partition, [join(g, r.member_id) for g, r in zip(groups, ids)])
    if {r.error for r in joined} != {Errors.NONE}:
        raise RuntimeError(f"groups not joined: {sorted({r.error.name for r in joined})}")
    synced = await send(partition, [
        SyncGroupRequest(g, r.generation_id, r.member_id, assignments=((r.member_id, b"a"),))
        for g, r in zip(groups, joined)
    ])
    if {s.error for s in synced} != {Errors.NONE}:
        raise RuntimeError(f"groups not formed: {sorted({s.error.name for s in synced})}")


async def commit_offsets(partition: OffsetPartition, groups: list[str], partitions: range) -> None:
    answers = await send(partition, [
        OffsetCommitRequest(g, tuple(OffsetCommitPartition("t", p, 1_000 + p) for p in partitions))
        for g in groups
    ])
    errors = {p.error for a in answers for p in a.partitions}
    if errors != {Errors.NONE}:
        raise RuntimeError(f"commits refused: {sorted(e.name for e in errors)}")


async def measure(groups: int, offsets: int) -> list[tuple[str, ...]]:
    data_dir = tempfile.mkdtemp(prefix="raygroups-bench-capacity-")
    settings = ServiceSettings(
        data_dir=data_dir, num_partitions=1, maintenance_interval_s=3600,
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
    )
    partition = OffsetPartition(0, 1, settings)
    try:
        await partition.activate(-1)
        await partition.wait_active(30.0)
        base = rss()
        started = time.perf_counter()
        await form_groups(partition, [f"members-{i}" for i in range(groups)])
        with_groups = rss()
        progress(f"{groups:,} groups of one member formed in {time.perf_counter() - started:.1f} s")
        committers = [f"offsets-{i}" for i in range(groups)]
        await commit_offsets(partition, committers, range(1))
        with_committers = rss()
        started = time.perf_counter()
        await commit_offsets(partition, committers, range(1, 1 + offsets))
        with_offsets = rss()
        progress(f"{groups * offsets:,} offsets committed in {time.perf_counter() - started:.1f} s")
    finally:
        await partition.unload(partition.epoch)
        shutil.rmtree(data_dir, ignore_errors=True)
    mib, members, committing, more = 2**20, with_groups - base, with_committers - with_groups, \
        with_offsets - with_committers
    return [
        (f"{groups:,} groups of one member (classic)", f"{members / mib:,.0f} MiB",
         f"{members / groups / 1024:.2f} KiB per group"),
        (f"{groups:,} groups of offsets only, 1 offset each", f"{committing / mib:,.0f} MiB",
         f"{committing / groups / 1024:.2f} KiB per group"),
        (f"{groups * offsets:,} more offsets ({offsets} per group)", f"{more / mib:,.0f} MiB",
         f"{more / (groups * offsets):.0f} B per offset"),
    ]


@ray.remote(num_cpus=0)
class BareActor:
    def pid(self) -> int:
        return os.getpid()


def memory_of(pid: int) -> tuple[int, int]:
    info = psutil.Process(pid).memory_full_info()
    return int(info.rss), int(info.uss)


def ready_leaders(client: Any, deadline_s: float = 60.0) -> list[Any]:
    """Every partition's leader once it serves, with its Kafka listener started."""
    deadline = time.monotonic() + deadline_s
    while True:
        client.refresh()
        leaders = [client.leader(p) for p in range(PARTITIONS)]
        if None not in leaders:
            states = ray.get([leader.wait_active.remote(30.0) for leader in leaders])
            if set(states) == {"ACTIVE"}:
                ray.get([leader.kafka_listener.remote() for leader in leaders])
                return leaders
        if time.monotonic() > deadline:
            raise RuntimeError(f"partitions not all led after {deadline_s:.0f} s")
        time.sleep(0.1)


def standby(deadline_s: float = 60.0) -> Any:
    """A started standby partition actor (the controller keeps `standby_actors` of them)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for name in ray.util.list_named_actors():
            if name.startswith(PARTITION_ACTOR_PREFIX):
                handle: Any = ray.get_actor(name)
                if ray.get(handle.ping.remote()) == STANDBY_EPOCH:
                    return handle
        time.sleep(0.1)
    raise RuntimeError(f"no standby started after {deadline_s:.0f} s")


def actor_memory() -> list[tuple[str, ...]]:
    """An idle partition actor's RSS and USS, leader (its Kafka listener started) and
    standby, against a bare Ray actor's."""
    with embedded_service(2, CoordinatorConfig(group_initial_rebalance_delay_ms=0)) as (client, _):
        pids = [ray.get(leader.info.remote())["pid"] for leader in ready_leaders(client)]
        spare_pid = ray.get(standby().info.remote())["pid"]
        time.sleep(SETTLE_S + 1)  # the replicas' settling trim, as an idle actor has it
        leaders = [memory_of(pid) for pid in pids]
        spare = memory_of(spare_pid)
        bare = BareActor.remote()  # type: ignore[attr-defined]
        bare_rss, bare_uss = memory_of(ray.get(bare.pid.remote()))
    rss = statistics.median(rss for rss, _ in leaders)
    uss = statistics.median(uss for _, uss in leaders)
    mib = 2**20
    return [
        ("a bare Ray actor (baseline)", f"{bare_rss / mib:,.0f} MiB", f"{bare_uss / mib:,.1f} MiB", "1.00"),
        (f"an idle partition leader, Kafka listener on (median of {PARTITIONS})", f"{rss / mib:,.0f} MiB",
         f"{uss / mib:,.1f} MiB", f"{uss / bare_uss:.2f}"),
        ("a standby partition actor", f"{spare[0] / mib:,.0f} MiB", f"{spare[1] / mib:,.1f} MiB",
         f"{spare[1] / bare_uss:.2f}"),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", default="10000,100000", help="comma-separated group counts, one run each")
    parser.add_argument("--offsets", type=int, default=10, help="committed partitions per offsets-only group")
    parser.add_argument("--actors", action="store_true", help="also an idle partition actor's memory")
    args = parser.parse_args(argv)
    if args.actors:
        print_figures("an idle partition actor's memory (embedded service)",
                      ("process", "RSS", "USS", "USS ratio"), actor_memory())
    rows: list[tuple[str, ...]] = []
    for groups in (int(n) for n in args.groups.split(",")):
        rows += asyncio.run(measure(groups, args.offsets))
    print_figures("a partition's memory per group and per committed offset (RSS growth, one process)",
                  ("state", "RSS growth", "per unit"), rows)


if __name__ == "__main__":
    main()
