"""Benchmark of the Kafka paths: `python -m bench.gateway`.

Starts an embedded local Ray cluster and the service (fsync on, initial
rebalance delay 0), and two gateways in a process of their own on 127.0.0.1
(as a broker is a process apart from its clients): one whose FindCoordinator
names the partition leaders' listeners (the default) and one that names
itself (`--no-direct`). Then it measures the same requests three ways, in
alternating rounds of one run:
- through the gateway: the Kafka client's requests go to the gateway, which
  makes a Ray call to the partition leader for each;
- direct: the same clients and requests to the Kafka listener inside the
  partition leader that FindCoordinator names (gateway.direct): no Ray call;
- through Ray handles: `actors.Client`'s async methods from this process
  (the baseline: what a Python caller gets).
Two Kafka clients, one connection per caller as many consumers would have
(a broker serves each connection one request at a time):
- aiokafka's low-level client (`AIOKafkaClient.send`: OffsetCommit v3 of 1
  and of 100 partitions and Heartbeat v1, the versions aiokafka negotiates)
  for the one member of one Stable group;
- confluent-kafka (librdkafka, C): a `Consumer` per caller, each committing
  1 or 100 partitions of its own group synchronously (`commit(offsets=...,
  asynchronous=False)`: an OffsetCommit with generation -1, as a consumer
  with `assign()` sends); a librdkafka consumer heartbeats only on its own,
  so it has no Heartbeat figure. The Ray baseline commits to the same groups.
Figures per client, request and way: requests/s with `--callers`
concurrent callers and as a ratio to Ray handles', p50 and p99 latency of
one caller at a time, and the CPU per request of the partition leaders'
processes during the rate rounds (the gateway's own process not counted).
Every request is checked answered NONE.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import psutil
import ray
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.protocol.group import HeartbeatRequest
from confluent_kafka import Consumer, TopicPartition

from actors.client.client import Client
from actors.core.settings import DEFAULT_NAMESPACE
from bench.embedded import embedded_service
from bench.table import print_figures
from coordinator import CoordinatorConfig, Errors
from coordinator.messages import JoinGroupRequest, SyncGroupRequest

GROUP = "bench-gateway"
TOPIC = "bench"
GATEWAY_NODE_ID = 0
GROUP_COORDINATOR = 0  # FindCoordinator's key type of a group
WIDE_COMMIT = 100  # partitions of the wide OffsetCommit
# The Kafka paths beside Ray handles: through the gateway, straight to the leader's listener.
WAYS = {"ray": "Ray handles", "gateway": "the gateway", "direct": "the leader's listener"}
SESSION_MS = 300_000
Call = Callable[[int], Awaitable[None]]
# Per request name, the call that sends request i.
Calls = dict[str, Call]


# ------------------------------------------------------------ the gateway processes


def serve_gateway(address: str, namespace: str, port_file: str, direct: str) -> None:
    """A gateway process: serve until killed, its port written to `port_file`."""
    import actors
    from gateway.server import Gateway

    async def serve() -> None:
        gateway = Gateway(
            actors.connect(address, namespace), node_id=GATEWAY_NODE_ID, direct=direct == "direct"
        )
        _, port = await gateway.start("127.0.0.1", 0)
        with open(port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.rename(port_file + ".tmp", port_file)
        await gateway.serve_forever()

    asyncio.run(serve())


def start_gateway_process(namespace: str, direct: bool) -> tuple[subprocess.Popen[bytes], int]:
    port_file = os.path.join(tempfile.mkdtemp(prefix="raygroups-bench-gw-"), "port")
    address = ray.get_runtime_context().gcs_address
    mode = "direct" if direct else "no-direct"
    command = [sys.executable, "-m", "bench.gateway", "--serve", address, namespace, port_file, mode]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("the gateway process did not start")
        time.sleep(0.1)
    with open(port_file) as f:
        return process, int(f.read())


# ------------------------------------------------------------ the calls


def offsets(i: int, partitions: int) -> dict[tuple[str, int], int]:
    return {(TOPIC, p): i for p in range(partitions)}


def requests(commit: Callable[[int], Call], heartbeat: Call | None = None) -> Calls:
    """The measured requests: commits of 1 and of `WIDE_COMMIT` partitions, and a heartbeat if any."""
    calls = {"OffsetCommit": commit(1), f"OffsetCommit x{WIDE_COMMIT}": commit(WIDE_COMMIT)}
    return calls if heartbeat is None else {**calls, "Heartbeat": heartbeat}


async def join_member(client: Client) -> tuple[str, int]:
    """(member id, generation) of the one member of a Stable GROUP."""
    join = JoinGroupRequest(
        GROUP, SESSION_MS, 60_000, "consumer", (("range", b""),), require_known_member_id=False
    )
    joined = await client.join_group_async(join)
    synced = await client.sync_group_async(
        SyncGroupRequest(
            GROUP, joined.generation_id, joined.member_id, assignments=((joined.member_id, b""),)
        )
    )
    assert joined.error is Errors.NONE and synced.error is Errors.NONE, (joined, synced)
    return joined.member_id, joined.generation_id


def ray_calls(client: Client, member: str, generation: int) -> Calls:
    """The Stable member's requests through Ray handles (the aiokafka family's baseline)."""

    def commit(partitions: int) -> Call:
        async def call(i: int) -> None:
            response = await client.commit_offsets_async(GROUP, offsets(i, partitions), generation, member)
            assert all(p.error is Errors.NONE for p in response.partitions), response

        return call

    async def heartbeat(i: int) -> None:
        response = await client.heartbeat_async(GROUP, generation, member)
        assert response.error is Errors.NONE, response

    return requests(commit, heartbeat)


def aiokafka_calls(clients: list[AIOKafkaClient], member: str, generation: int, node_id: int) -> Calls:
    """The same requests sent to Kafka node `node_id`: the gateway, or the leader's listener."""

    def commit(partitions: int) -> Call:
        async def call(i: int) -> None:
            request = OffsetCommitRequest(
                GROUP, generation, member, -1, [(TOPIC, [(p, i, "") for p in range(partitions)])]
            )
            response = await clients[i % len(clients)].send(node_id, request)
            assert all(error == 0 for _, error in response.topics[0][1]), response

        return call

    async def heartbeat(i: int) -> None:
        response = await clients[i % len(clients)].send(node_id, HeartbeatRequest(GROUP, generation, member))
        assert response.error_code == 0, response

    return requests(commit, heartbeat)


def simple_ray_calls(client: Client, groups: Sequence[str]) -> Calls:
    """Commits of caller i's own group through Ray handles (the confluent-kafka family's baseline)."""

    def commit(partitions: int) -> Call:
        async def call(i: int) -> None:
            response = await client.commit_offsets_async(groups[i % len(groups)], offsets(i, partitions))
            assert all(p.error is Errors.NONE for p in response.partitions), response

        return call

    return requests(commit)


def confluent_consumers(port: int, groups: Sequence[str]) -> list[Consumer]:
    """A librdkafka consumer per group, bootstrapped at the gateway on `port`."""
    return [
        Consumer({
            "bootstrap.servers": f"127.0.0.1:{port}", "group.id": group, "enable.auto.commit": False,
            "client.id": f"bench-{group}", "log_level": 3,
        })
        for group in groups
    ]


def confluent_calls(consumers: Sequence[Consumer], executor: ThreadPoolExecutor) -> Calls:
    """Synchronous commits of caller i's group from its own consumer, on a thread of `executor`."""

    def commit_now(i: int, partitions: int) -> None:
        done = consumers[i % len(consumers)].commit(
            offsets=[TopicPartition(TOPIC, p, i) for p in range(partitions)], asynchronous=False
        )
        assert done is not None and not any(tp.error for tp in done), done

    def commit(partitions: int) -> Call:
        async def call(i: int) -> None:
            await asyncio.get_running_loop().run_in_executor(executor, commit_now, i, partitions)

        return call

    return requests(commit)


# ------------------------------------------------------------ measuring


class LeadersCpu:
    """CPU seconds the partition leaders' processes used (user + system)."""

    def __init__(self, client: Client):
        pids = {row["pid"] for row in client.status()}
        self.processes = [psutil.Process(pid) for pid in pids]

    def seconds(self) -> float:
        return sum(t.user + t.system for t in (p.cpu_times() for p in self.processes))


async def rate(call: Call, calls: int, callers: int) -> tuple[int, float]:
    """(calls made, seconds) with `callers` coroutines; caller w makes calls w, w + callers, ..."""

    async def caller(w: int) -> None:
        for i in range(w, calls, callers):
            await call(i)

    started = time.perf_counter()
    await asyncio.gather(*(caller(w) for w in range(callers)))
    return calls, time.perf_counter() - started


async def latencies(call: Call, calls: int) -> list[float]:
    """Seconds of each of `calls` calls made one at a time."""
    taken = []
    for i in range(calls):
        started = time.perf_counter()
        await call(i)
        taken.append(time.perf_counter() - started)
    return taken


async def measure(
    family: str, ways: dict[str, Calls], cpu: LeadersCpu, args: argparse.Namespace
) -> list[list[str]]:
    """Alternating rounds of every way, request by request: the family's table rows."""
    rows = []
    for name in ways["ray"]:
        done: dict[str, list[tuple[int, float, float]]] = {way: [] for way in ways}
        timed: dict[str, list[float]] = {way: [] for way in ways}
        for calls in ways.values():  # warm-up: connections, routing, code paths
            await rate(calls[name], args.callers * 4, args.callers)
        for _ in range(args.rounds):
            for way, calls in ways.items():
                before = cpu.seconds()
                n, seconds = await rate(calls[name], args.calls, args.callers)
                done[way].append((n, seconds, cpu.seconds() - before))
                timed[way].extend(await latencies(calls[name], args.latency_calls))
        per_s = {way: sum(n for n, _, _ in runs) / sum(s for _, s, _ in runs) for way, runs in done.items()}
        for way, runs in done.items():
            ms = sorted(t * 1000 for t in timed[way])
            rows.append([
                family, name, WAYS[way], f"{per_s[way]:,.0f}", f"{per_s[way] / per_s['ray']:.2f}",
                f"{statistics.median(ms):.2f}", f"{ms[int(len(ms) * 0.99) - 1]:.2f}",
                f"{sum(c for _, _, c in runs) / sum(n for n, _, _ in runs) * 1e6:.0f}",
            ])
    return rows


async def aiokafka_family(
    args: argparse.Namespace, client: Client, cpu: LeadersCpu, port: int
) -> list[list[str]]:
    member, generation = await join_member(client)
    kafka = [
        AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{port}", client_id=f"bench-{c}")
        for c in range(args.callers)
    ]
    try:
        for k in kafka:
            await k.bootstrap()
        # FindCoordinator names the leader's listener; its Metadata listed it (gateway.direct).
        listener = await kafka[0].coordinator_lookup(GROUP_COORDINATOR, GROUP)
        assert listener != GATEWAY_NODE_ID, "FindCoordinator named the gateway: no direct path"
        ways = {
            "ray": ray_calls(client, member, generation),
            "gateway": aiokafka_calls(kafka, member, generation, GATEWAY_NODE_ID),
            "direct": aiokafka_calls(kafka, member, generation, listener),
        }
        return await measure("aiokafka", ways, cpu, args)
    finally:
        for k in kafka:
            await k.close()


async def confluent_family(
    args: argparse.Namespace, client: Client, cpu: LeadersCpu, direct_port: int, gateway_port: int
) -> list[list[str]]:
    groups = [f"bench-confluent-{c}" for c in range(args.callers)]
    through_gateway = confluent_consumers(gateway_port, groups)
    direct = confluent_consumers(direct_port, groups)
    try:
        with ThreadPoolExecutor(args.callers) as executor:
            ways = {
                "ray": simple_ray_calls(client, groups),
                "gateway": confluent_calls(through_gateway, executor),
                "direct": confluent_calls(direct, executor),
            }
            return await measure("confluent-kafka", ways, cpu, args)
    finally:
        for consumer in [*through_gateway, *direct]:
            consumer.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=4_000, help="requests per throughput round")
    parser.add_argument("--callers", type=int, default=64, help="concurrent callers, a connection each")
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the three ways")
    parser.add_argument("--latency-calls", type=int, default=300, help="one-at-a-time requests per round")
    parser.add_argument(
        "--clients", default="aiokafka,confluent-kafka", help="Kafka clients measured (comma-separated)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: few calls, one round")
    parser.add_argument(
        "--serve", nargs=4, metavar=("ADDRESS", "NAMESPACE", "PORT_FILE", "MODE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.serve:
        serve_gateway(*args.serve)
        return
    if args.quick:
        args.calls, args.rounds, args.latency_calls = 400, 1, 50
    config = CoordinatorConfig(group_initial_rebalance_delay_ms=0)
    table: list[list[str]] = []
    with embedded_service(num_cpus=2, config=config) as (client, _):
        direct_process, direct_port = start_gateway_process(DEFAULT_NAMESPACE, direct=True)
        gateway_process, gateway_port = start_gateway_process(DEFAULT_NAMESPACE, direct=False)
        try:
            cpu = LeadersCpu(client)
            clients = args.clients.split(",")
            if "aiokafka" in clients:
                table += asyncio.run(aiokafka_family(args, client, cpu, direct_port))
            if "confluent-kafka" in clients:
                table += asyncio.run(confluent_family(args, client, cpu, direct_port, gateway_port))
        finally:
            for process in (direct_process, gateway_process):
                process.kill()
                process.wait()
    print_figures(
        f"Kafka paths vs Ray handles (one machine, fsync on; {args.callers} callers, "
        f"{args.rounds} rounds of {args.calls:,} calls; latency: one caller)",
        ("client", "request", "way", "req/s", "x Ray", "p50 ms", "p99 ms", "leader CPU us/req"),
        table,
    )


if __name__ == "__main__":
    main()
