"""The embedded demo: the README's main job.

On a local Ray cluster it starts the service, runs three consumer groups of
simulated consumers (Ray actors hosting `GroupMember`s) that consume and
commit, kills one consumer and one partition actor mid-run, waits for the
groups to recover and prints the group table. The log stays in the data
directory for the analytics that follow.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Any

import ray
from rich.console import Console

from actors.admin_cli import DESCRIBE_COLUMNS, describe_rows, print_table
from actors.client import Client
from actors.member_types import CommitFailedError
from actors.settings import DEFAULT_NAMESPACE, EMBEDDED_PARTITIONS
from coordinator import CoordinatorConfig

console = Console()


@dataclass(frozen=True)
class DemoGroup:
    group_id: str
    topic: str
    partitions: int
    consumers: int
    assignor: str


GROUPS = (
    DemoGroup("orders-app", "orders", 6, 3, "range"),
    DemoGroup("billing", "payments", 4, 2, "cooperative-sticky"),
    DemoGroup("audit", "orders", 6, 1, "roundrobin"),
)


class DemoConsumer:
    """A simulated consumer: advances a position on each owned partition and commits."""

    def __init__(self, group: DemoGroup, name: str) -> None:
        from actors.member import GroupMember
        from actors.service import connect

        self.positions: dict[Any, int] = {}
        self.commits = 0
        self.member = GroupMember(
            client=connect(namespace=DEFAULT_NAMESPACE),
            group_id=group.group_id,
            topics=[group.topic],
            topic_partitions={group.topic: group.partitions},
            assignors=(group.assignor,),
            session_timeout_ms=6_000,
            heartbeat_interval_ms=500,
            client_id=name,
            client_host="demo-host",
        ).start()
        self._stop = threading.Event()
        threading.Thread(target=self._consume, daemon=True).start()

    def _consume(self) -> None:
        while not self._stop.wait(0.3):
            owned = self.member.poll()
            if not owned:
                continue
            for tp in owned:
                if tp not in self.positions:
                    committed = self.member.committed([tp]).get(tp)
                    self.positions[tp] = max(committed.offset, 0) if committed is not None else 0
                self.positions[tp] += random.randint(1, 20)
            try:
                self.member.commit({tp: self.positions[tp] for tp in owned})
                self.commits += 1
            except CommitFailedError:
                pass  # refused during a rebalance: the member rejoins by itself

    def stats(self) -> dict[str, Any]:
        return {"assigned": len(self.member.assignment()), "commits": self.commits}

    def positions_now(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): offset for tp, offset in self.positions.items()}

    def close(self) -> None:
        self._stop.set()
        self.member.close()


def run_demo(data_dir: str, seconds: float = 8.0) -> str:
    """Run the demo; returns the path of the end offsets it wrote for the analytics."""
    import actors

    shutil.rmtree(data_dir, ignore_errors=True)
    # A throwaway single-user cluster on loopback: no auth token file.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    actors.init_local_ray(num_cpus=4)
    console.rule("raygroups demo")
    client = actors.start(
        data_dir,
        num_partitions=EMBEDDED_PARTITIONS,
        coordinator_config=CoordinatorConfig(group_initial_rebalance_delay_ms=500),
    )
    console.print(f"service up: {client.num_partitions} offsets partitions, log in {data_dir}")
    consumer_class = ray.remote(num_cpus=0)(DemoConsumer)
    consumers = {
        (g.group_id, i): consumer_class.remote(g, f"{g.group_id}-c{i}")
        for g in GROUPS
        for i in range(g.consumers)
    }
    _wait_stable(client, [g.group_id for g in GROUPS])
    console.print("groups formed; consuming and committing ...")
    time.sleep(seconds / 2)

    victim = ("orders-app", 0)
    console.print(f"[bold red]killing consumer {victim[0]}-c{victim[1]}[/] (its session times out)")
    ray.kill(consumers.pop(victim), no_restart=True)
    partition = client.partition_for("billing")
    console.print(f"[bold red]killing offsets partition actor {partition}[/] (leader of 'billing')")
    ray.kill(client.leader(partition), no_restart=True)
    time.sleep(seconds / 2)
    _wait_stable(client, [g.group_id for g in GROUPS], expect_members={"orders-app": 2})
    console.print("groups recovered")
    status = {p["partition"]: p for p in client.status()}
    console.print(
        f"partition {partition} is back at epoch {status[partition]['epoch']}, state "
        f"{status[partition]['state']}"
    )
    print_table(
        "consumer groups after recovery",
        DESCRIBE_COLUMNS,
        describe_rows(client, [g.group_id for g in GROUPS]),
        as_json=False,
    )
    positions = ray.get([c.positions_now.remote() for c in consumers.values()])
    ray.get([c.close.remote() for c in consumers.values()])
    for c in consumers.values():
        ray.kill(c)
    return write_end_offsets(data_dir, positions)


def write_end_offsets(data_dir: str, positions: list[dict[tuple[str, int], int]]) -> str:
    """Simulated producers ran ahead of the consumers: the topics' end offsets."""
    ends: dict[str, dict[str, int]] = {}
    for group in GROUPS:
        for p in range(group.partitions):
            consumed = max((pos.get((group.topic, p), 0) for pos in positions), default=0)
            ends.setdefault(group.topic, {})[str(p)] = consumed + random.randint(0, 200)
    path = os.path.join(data_dir, "end-offsets.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(ends, f)
    return path


def _wait_stable(
    client: Client,
    group_ids: list[str],
    expect_members: dict[str, int] | None = None,
    timeout_s: float = 60.0,
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = client.describe_groups(group_ids)
        if all(
            d.state == "Stable" and (expect_members or {}).get(d.group_id, len(d.members)) == len(d.members)
            for d in described
        ):
            return
        time.sleep(0.25)
    raise RuntimeError(f"groups not stable after {timeout_s} s: {[(d.group_id, d.state) for d in described]}")
