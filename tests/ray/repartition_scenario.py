"""Growing the offsets partition count of a replicated service (RF 3) under load, with the
controller and a source partition's leader killed midway (issue 46's crash safety).

Run in its own process: `python -m tests.ray.repartition_scenario CASE [SEED]`, CASE one of:
- `kills`: 4 partitions grow to 8 while groups of every partition commit; once the first
  source has switched (the others hand off concurrently), a source's leader is killed (a
  follower takes over with its hot copy; a handoff under way is retried with it) and the
  controller with it (Ray restarts it; it resumes the recorded plan). The repartition
  finishes by itself; every acknowledged commit is where its group now lives. Then it
  shrinks back to 4 under the same load: every replica of partitions 4..7 is retired.
- `precopy-kills`: the same with every source pre-copied (`precopy_min_groups` 1,
  docs/design-precopy.md): the kills land while the other sources copy or are frozen for
  their last delta; each resumes with a new copy session.
Exits non-zero if a check fails, after a line `CHECK FAILED: <check>: <why>` on stdout (with
each committing group's state where the check concerns them).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import glob
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import ray
from ray.cluster_utils import Cluster

import actors
from actors.controller.repartition import RepartitionRefused
from actors.core.settings import CONTROLLER_NAME
from actors.demo.sim_cluster import fully_replicated, wait_for

from tests.ray.cluster_support import run_case
from tests.ray.fault_scenario import GroupLoad
from tests.ray.replication_scenario import NAMESPACE, check_nothing_lost, groups_on, settings_for, start_load


def kills(cluster: Cluster, data_dir: str, precopy_min_groups: int | None = None) -> None:
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    rng = random.Random(seed)
    settings = settings_for(data_dir)
    if precopy_min_groups is not None:
        settings = dataclasses.replace(settings, precopy_min_groups=precopy_min_groups)
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    loads, stop, thread = start_load([g for p in range(4) for g in groups_on(client, p, 2)])
    with check("every group committed", loads):
        wait_for("every group committed", lambda: all(load.acked > 0 for load in loads))
    bulk = fill(client, 4_000)  # enough state that the handoffs take a while to kill into
    controller = ray.get_actor(CONTROLLER_NAME, namespace=NAMESPACE)
    with check("the grow 4 -> 8 started"):
        when_fit(lambda: client.repartition(8, wait=False))
    wait_for("a source switched", lambda: client.repartition_status().get("switched", 8) >= 1, 120)
    time.sleep(rng.uniform(0, 0.05))
    status = client.repartition_status()
    source = rng.randrange(4)
    ray.kill(client.leader(source), no_restart=True)  # the others' handoffs are under way
    ray.kill(controller, no_restart=False)
    wait_for("the controller back", lambda: bool(ray.get(controller.stats.remote(), timeout=5)))
    with check("the grow finished by itself"):
        wait_for("the repartition done", lambda: not client.repartition_status()["running"], 180)
    client.refresh()
    wait_for("every partition fully replicated", lambda: fully_replicated(client), 120)
    with check("every group commits at its new partition after the grow", loads):
        wait_until_each_commits(loads)
    with check("the grow's count"):
        assert client.num_partitions == 8 and client.repartition_status()["partitions"] == 8
    with check("every bulk group's offset after the grow"):
        check_bulk(client, bulk)
    with check("the shrink 8 -> 4"):
        shrunk = when_fit(lambda: client.repartition(4))  # and back, under load: 4..7 merge and retire
        assert client.num_partitions == 4
        assert ("copy_rounds" in shrunk) == bool(precopy_min_groups), f"the handoffs taken: {shrunk}"
    with check("every group commits at its partition again after the shrink", loads):
        wait_until_each_commits(loads)
    stop.set()
    thread.join(timeout=30)
    with check("no acknowledged commit lost", loads):
        total = check_nothing_lost(loads)
    with check("every bulk group's offset after the shrink"):
        check_bulk(client, bulk)
    with check("every replica of partitions 4..7 retired"):
        retired = glob.glob(os.path.join(data_dir, "nodes", "*", "retired-v2-offsets-*"))
        assert len(retired) == 4 * 3, retired
    how = "pre-copied" if precopy_min_groups else "fenced"
    print(f"grew 4 -> 8 ({how}) with the controller and partition {source}'s leader killed midway, "
          f"then shrank to 4 (at the kill: {status}); {len(loads) + len(bulk)} groups; {total} commits "
          "acknowledged, none lost", flush=True)


@contextlib.contextmanager
def check(name: str, loads: list[GroupLoad] | None = None) -> Iterator[None]:
    """One of the scenario's checks: if it fails, say which and why on stdout (the test shows
    its tail), with each group's load where it has one, before the error ends the run."""
    try:
        yield
    except BaseException as exc:
        print(f"CHECK FAILED: {name}: {exc!r:.2000}", flush=True)
        for load in loads or []:
            print(f"  {load.group}: acked {load.acked}, attempted {load.attempted}, "
                  f"{load.errors} errors, last {load.last_error or '-'}", flush=True)
        raise


def when_fit(start: Callable[[], dict[str, Any]], timeout_s: float = 120.0) -> dict[str, Any]:
    """Start a repartition, once the service can take one: a partition between two leaders
    (a leader too starved to answer its probes on this shared host is replaced) refuses it,
    changing nothing, and the operator asks again."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return start()
        except (RepartitionRefused, ray.exceptions.RayTaskError) as exc:  # Ray's wraps the refusal
            if "cannot take writes" not in str(exc) or time.monotonic() > deadline:
                raise
            print(f"refused for now, asked again: {exc}", flush=True)
            time.sleep(0.5)


def wait_until_each_commits(loads: list[GroupLoad]) -> None:
    """Every group has a commit acknowledged after this call began (at its partition now)."""
    seen = {load.group: load.acked for load in loads}
    wait_for("every group commits anew", lambda: all(load.acked > seen[load.group] for load in loads), 60)


def check_bulk(client: actors.Client, bulk: list[str]) -> None:
    fetched = asyncio.run(fetch_all(client, bulk))
    wrong = {g: o for g, o in fetched.items() if o != 7}
    assert not wrong, f"{len(wrong)} bulk groups without their offset 7: {list(wrong.items())[:5]}"


async def commit_all(client: actors.Client, groups: list[str]) -> None:
    await asyncio.gather(*(client.commit_offsets_async(g, {("bulk", 0): 7}) for g in groups))


async def fetch_all(client: actors.Client, groups: list[str]) -> dict[str, int]:
    answers = await asyncio.gather(*(client.fetch_offsets_async(g, [("bulk", 0)]) for g in groups))
    return {g: a.offsets().get(("bulk", 0), -1) for g, a in zip(groups, answers, strict=True)}


def fill(client: actors.Client, count: int) -> list[str]:
    """`count` offsets-only groups, each committed once (offset 7), acknowledged."""
    groups = [f"bulk-{i}" for i in range(count)]
    asyncio.run(commit_all(client, groups))
    return groups


CASES: dict[str, Callable[[Cluster, str], None]] = {
    "kills": kills, "precopy-kills": lambda cluster, data_dir: kills(cluster, data_dir, 1),
}


def main() -> int:
    return run_case(CASES, NAMESPACE, "raygroups-repartition-")


if __name__ == "__main__":
    sys.exit(main())
