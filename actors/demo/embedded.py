"""The embedded demo: the README's main job.

On a local Ray cluster it starts the service, runs simulated producers and
three consumer groups of simulated consumers (Ray actors hosting
`GroupMember`s) that consume and commit, kills one consumer and one
partition actor mid-run, waits for the groups to recover and prints the
group table. The log, and the end offsets the producers reported, stay in
the data directory for the analytics that follow (`actors/cli/main.py`).

The producers (`DemoProducers`, a thread of the driver) append to each
topic partition at their own pace and report the end offsets to the topic
registry every `REPORT_INTERVAL_S`, as a producer-side adapter would; the
registry keeps them as history, so lag over time is measured against the
end of each time. A consumer reads only up to its partition's reported end,
at most `max_batch` messages per poll: `audit` (one consumer for six
partitions, small batches) falls behind while the others keep up.

`billing` uses the consumer group protocol (KIP-848, `group_protocol=
"consumer"`): the coordinator assigns its partitions with its `uniform`
assignor and its members reconcile incrementally; the others are classic
groups; `raygroups describe` shows both types alike.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Any

import ray
from rich.console import Console

from actors.cli.admin import DESCRIBE_COLUMNS, describe_rows
from actors.cli.tables import print_table
from actors.client.client import Client
from actors.core.settings import DEFAULT_NAMESPACE, EMBEDDED_PARTITIONS
from actors.member.api import CommitFailedError
from coordinator import CoordinatorConfig

console = Console(soft_wrap=True)  # lines are never broken by rich: piped, one line each


@dataclass(frozen=True)
class DemoGroup:
    group_id: str
    topic: str
    partitions: int
    consumers: int
    assignor: str
    max_batch: int  # messages a consumer reads per partition and poll, at most
    # "classic", or "consumer" (KIP-848): then `assignor` names the coordinator's assignor.
    group_protocol: str = "classic"


GROUPS = (
    DemoGroup("orders-app", "orders", 6, 3, "range", 40),
    DemoGroup("billing", "payments", 4, 2, "uniform", 40, group_protocol="consumer"),
    DemoGroup("audit", "orders", 6, 1, "roundrobin", 12),
)
# The demo's consumer groups heartbeat at this interval (the coordinator's), as its classic members do.
CONSUMER_HEARTBEAT_INTERVAL_MS = 500
CONSUMER_SESSION_TIMEOUT_MS = 6_000
TOPICS = {"orders": 6, "payments": 4}
# Messages a producer appends to a partition per report, at most (about 50 / s on average).
PRODUCED_MAX = 24
REPORT_INTERVAL_S = 0.25


class DemoProducers:
    """Simulated producers: every partition's end offset grows, reported to the registry
    every REPORT_INTERVAL_S from a thread, until `stop`."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.ends = {(topic, p): 0 for topic, count in TOPICS.items() for p in range(count)}
        self.reports = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> DemoProducers:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(REPORT_INTERVAL_S):
            for key in self.ends:
                self.ends[key] += random.randint(0, PRODUCED_MAX)
            self.client.set_end_offsets(self.ends)
            self.reports += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def demo_member(client: Any, group: DemoGroup, name: str) -> Any:
    """A started `GroupMember` of `group` named `name`, as the demos' consumers run it."""
    from actors.member.group_member import GroupMember

    if group.group_protocol == "consumer":
        return GroupMember(
            client=client,
            group_id=group.group_id,
            topics=[group.topic],
            group_protocol="consumer",
            group_remote_assignor=group.assignor,
            client_id=name,
            client_host="demo-host",
        ).start()
    return GroupMember(
        client=client,
        group_id=group.group_id,
        topics=[group.topic],
        topic_partitions={group.topic: group.partitions},
        assignors=(group.assignor,),
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        client_id=name,
        client_host="demo-host",
    ).start()


class DemoConsumer:
    """A simulated consumer: advances a position on each owned partition and commits."""

    def __init__(self, group: DemoGroup, name: str) -> None:
        from actors.client.connect import connect

        self.positions: dict[Any, int] = {}
        self.commits = 0
        self.max_batch = group.max_batch
        self.client = connect(namespace=DEFAULT_NAMESPACE)
        self.member = demo_member(self.client, group, name)
        self._stop = threading.Event()
        threading.Thread(target=self._consume, daemon=True).start()

    def _consume(self) -> None:
        while not self._stop.wait(0.3):
            owned = self.member.poll()
            if not owned:
                continue
            # What a fetch response would tell: how far each partition's log reaches.
            ends = self.client.end_offsets({tp.topic for tp in owned})
            for tp in owned:
                if tp not in self.positions:
                    committed = self.member.committed([tp]).get(tp)
                    self.positions[tp] = max(committed.offset, 0) if committed is not None else 0
                available = max(ends.get(tp, 0) - self.positions[tp], 0)
                self.positions[tp] += min(available, random.randint(self.max_batch // 2, self.max_batch))
            try:
                self.member.commit({tp: self.positions[tp] for tp in owned})
                self.commits += 1
            except CommitFailedError:
                pass  # refused during a rebalance: the member rejoins by itself

    def stats(self) -> dict[str, Any]:
        return {"assigned": len(self.member.assignment()), "commits": self.commits}

    def holding(self) -> tuple[bool, dict[tuple[str, int], tuple[str, str, str]]]:
        """(reconciled, {(topic, partition): (member id, host, client id)}) of this member."""
        member, config = self.member, self.member.config
        who = (member.member_id, config.client_host, config.client_id)
        return member.is_stable, {(tp.topic, tp.partition): who for tp in member.assignment()}

    def positions_now(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): offset for tp, offset in self.positions.items()}

    def close(self) -> None:
        self._stop.set()
        self.member.close()


def run_demo(data_dir: str, seconds: float = 8.0) -> Client:
    """Run the demo, leaving the service up with the run's log and end offsets; returns its client."""
    import actors

    shutil.rmtree(data_dir, ignore_errors=True)
    # A throwaway single-user cluster on loopback: no auth token file.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    actors.init_local_ray(num_cpus=4)
    console.rule("raygroups demo")
    client = actors.start(
        data_dir,
        num_partitions=EMBEDDED_PARTITIONS,
        # One local user: its consumers (Ray actors) connect without a credential, whatever
        # SASL users the environment names (docs/security.md, The default).
        ray_credentials=False,
        coordinator_config=CoordinatorConfig(
            group_initial_rebalance_delay_ms=500,
            group_consumer_heartbeat_interval_ms=CONSUMER_HEARTBEAT_INTERVAL_MS,
            group_consumer_session_timeout_ms=CONSUMER_SESSION_TIMEOUT_MS,
        ),
    )
    console.print(f"service up: {client.num_partitions} offsets partitions, log in {data_dir}")
    for topic, partitions in TOPICS.items():
        client.create_topic(topic, partitions)
    producers = DemoProducers(client).start()
    console.print(f"producers report end offsets of {', '.join(TOPICS)} every {REPORT_INTERVAL_S} s")
    consumer_class = ray.remote(num_cpus=0)(DemoConsumer)
    consumers = {
        (g.group_id, i): consumer_class.remote(g, f"{g.group_id}-c{i}")
        for g in GROUPS
        for i in range(g.consumers)
    }
    _wait_stable(client, consumers)
    console.print("groups formed (billing: KIP-848 protocol); consuming and committing ...")
    time.sleep(seconds / 2)

    victim = ("orders-app", 0)
    console.print(f"[bold red]killing consumer {victim[0]}-c{victim[1]}[/] (its session times out)")
    ray.kill(consumers.pop(victim), no_restart=True)
    partition = client.partition_for("billing")
    console.print(f"[bold red]killing offsets partition actor {partition}[/] (leader of 'billing')")
    ray.kill(client.leader(partition), no_restart=True)
    time.sleep(seconds / 2)
    _wait_stable(client, consumers, expect_members={"orders-app": 2})
    console.print("groups recovered")
    status = {p["partition"]: p for p in client.status()}
    console.print(
        f"partition {partition} is back at epoch {status[partition]['epoch']}, state "
        f"{status[partition]['state']}"
    )
    console.print("consumer groups after recovery (raygroups describe):")
    print_table("", DESCRIBE_COLUMNS, describe_rows(client, [g.group_id for g in GROUPS]), as_json=False)
    ray.get([c.close.remote() for c in consumers.values()])
    producers.stop()
    for c in consumers.values():
        ray.kill(c)
    console.print(f"consumers closed; the producers reported end offsets {producers.reports} times")
    return client


def print_lag(client: Client) -> None:
    """The demo's last table: `raygroups describe` of its groups, with each partition's lag."""
    console.print("\nconsumer lag at the end (raygroups describe), against the producers' last end offsets:")
    print_table("", DESCRIBE_COLUMNS, describe_rows(client, [g.group_id for g in GROUPS]), as_json=False)


Holders = dict[str, tuple[bool, dict[tuple[str, int], tuple[str, str, str]]]]


def _holders(consumers: dict[tuple[str, int], Any]) -> Holders:
    """Per consumer-protocol group: (every member reconciled, who holds which partition)."""
    held: Holders = {}
    consumer_groups = {g.group_id for g in GROUPS if g.group_protocol == "consumer"}
    keys = [key for key in consumers if key[0] in consumer_groups]
    for (group_id, _), (stable, holding) in zip(keys, ray.get([consumers[k].holding.remote() for k in keys])):
        was_stable, partitions = held.get(group_id, (True, {}))
        held[group_id] = (was_stable and stable, {**partitions, **holding})
    return held


def _wait_stable(
    client: Client,
    consumers: dict[tuple[str, int], Any],
    expect_members: dict[str, int] | None = None,
    timeout_s: float = 60.0,
) -> None:
    """Classic groups Stable with the members expected; consumer groups reconciled and complete."""
    classic = [g.group_id for g in GROUPS if g.group_protocol == "classic"]
    sizes = {g.group_id: g.partitions for g in GROUPS}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = client.describe_groups(classic)
        held = _holders(consumers)
        if all(
            d.state == "Stable" and (expect_members or {}).get(d.group_id, len(d.members)) == len(d.members)
            for d in described
        ) and all(stable and len(parts) == sizes[g] for g, (stable, parts) in held.items()):
            return
        time.sleep(0.25)
    raise RuntimeError(f"groups not stable after {timeout_s} s: {[(d.group_id, d.state) for d in described]}")
