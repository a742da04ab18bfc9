"""Benchmark of the Kafka gateway: `python -m bench.gateway`.

Starts an embedded local Ray cluster and the service (fsync on, initial
rebalance delay 0), and a gateway in a process of its own on 127.0.0.1 (as
a broker is a process apart from its clients), then measures the same
requests three ways, in alternating rounds of one run:
- through the gateway: aiokafka's low-level client (`AIOKafkaClient.send`,
  OffsetCommit v3 and Heartbeat v1, the versions aiokafka negotiates), one
  client per caller by default, as many consumers would be: a broker, and
  the gateway, serve each connection one request at a time;
- direct: the same clients and requests to the Kafka listener inside the
  partition leader that FindCoordinator names (gateway.direct): no Ray call;
- through Ray handles: `actors.Client`'s async methods from this process
  (the baseline: what a Python caller gets).
Figures: OffsetCommit (1 partition) and Heartbeat requests/s with
`--callers` concurrent callers, as a ratio to the Ray handles' rate, and
the p50 latency of one caller at a time each way, whose difference to Ray
handles' is the Kafka path's added latency per request. Heartbeats and commits come from one
member of one Stable group, so every request is answered NONE (checked).
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
from collections.abc import Awaitable, Callable

import ray
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.protocol.group import HeartbeatRequest

from actors.client.client import Client
from actors.core.settings import DEFAULT_NAMESPACE
from bench.embedded import embedded_service
from bench.table import Row, print_table
from coordinator import CoordinatorConfig, Errors
from coordinator.messages import JoinGroupRequest, SyncGroupRequest

GROUP = "bench-gateway"
TOPIC = "bench"
GATEWAY_NODE_ID = 0
GROUP_COORDINATOR = 0  # FindCoordinator's key type of a group
# The Kafka client's ways beside Ray handles: through the gateway, straight to the leader's listener.
KAFKA_WAYS = {"gateway": "the gateway", "direct": "the leader's listener"}
SESSION_MS = 300_000
Call = Callable[[int], Awaitable[None]]


# ------------------------------------------------------------ the gateway process


def serve_gateway(address: str, namespace: str, port_file: str) -> None:
    """The gateway process: serve until killed, its port written to `port_file`."""
    import actors
    from gateway.server import Gateway

    async def serve() -> None:
        gateway = Gateway(actors.connect(address, namespace), node_id=GATEWAY_NODE_ID)
        _, port = await gateway.start("127.0.0.1", 0)
        with open(port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.rename(port_file + ".tmp", port_file)
        await gateway.serve_forever()

    asyncio.run(serve())


def start_gateway_process(namespace: str) -> tuple[subprocess.Popen[bytes], int]:
    port_file = os.path.join(tempfile.mkdtemp(prefix="raygroups-bench-gw-"), "port")
    address = ray.get_runtime_context().gcs_address
    command = [sys.executable, "-m", "bench.gateway", "--serve", address, namespace, port_file]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("the gateway process did not start")
        time.sleep(0.1)
    with open(port_file) as f:
        return process, int(f.read())


# ------------------------------------------------------------ the two ways


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


def ray_calls(client: Client, member: str, generation: int) -> dict[str, Call]:
    async def commit(i: int) -> None:
        response = await client.commit_offsets_async(GROUP, {(TOPIC, 0): i}, generation, member)
        assert response.partitions[0].error is Errors.NONE, response

    async def heartbeat(i: int) -> None:
        response = await client.heartbeat_async(GROUP, generation, member)
        assert response.error is Errors.NONE, response

    return {"OffsetCommit": commit, "Heartbeat": heartbeat}


def kafka_calls(clients: list[AIOKafkaClient], member: str, generation: int, node_id: int) -> dict[str, Call]:
    """The requests sent to Kafka node `node_id`: the gateway, or the leader's listener."""

    async def commit(i: int) -> None:
        request = OffsetCommitRequest(GROUP, generation, member, -1, [(TOPIC, [(0, i, "")])])
        response = await clients[i % len(clients)].send(node_id, request)
        assert response.topics[0][1][0][1] == 0, response

    async def heartbeat(i: int) -> None:
        response = await clients[i % len(clients)].send(node_id, HeartbeatRequest(GROUP, generation, member))
        assert response.error_code == 0, response

    return {"OffsetCommit": commit, "Heartbeat": heartbeat}


# ------------------------------------------------------------ measuring


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


async def measure(ways: dict[str, dict[str, Call]], args: argparse.Namespace) -> list[Row]:
    done: dict[tuple[str, str], list[tuple[int, float]]] = {}
    timed: dict[tuple[str, str], list[float]] = {}
    for name in ("OffsetCommit", "Heartbeat"):
        for calls in ways.values():  # warm-up: connections, routing, code paths
            await rate(calls[name], args.callers * 4, args.callers)
        for _ in range(args.rounds):
            for way, calls in ways.items():
                done.setdefault((way, name), []).append(await rate(calls[name], args.calls, args.callers))
                timed.setdefault((way, name), []).extend(await latencies(calls[name], args.latency_calls))
    return rows(done, timed, args.callers, args.connections)


def rows(
    done: dict[tuple[str, str], list[tuple[int, float]]],
    timed: dict[tuple[str, str], list[float]],
    callers: int,
    connections: int,
) -> list[Row]:
    table: list[Row] = []
    for name in ("OffsetCommit", "Heartbeat"):
        per_s = {
            way: sum(n for n, _ in runs) / sum(s for _, s in runs)
            for (way, n_), runs in done.items()
            if n_ == name
        }
        p50 = {way: statistics.median(t) * 1000 for (way, n_), t in timed.items() if n_ == name}
        baseline = Row(f"{name} via Ray handles, {callers} callers", per_s["ray"], "req/s", 1.0, "baseline")
        table.append(baseline)
        for way, what in KAFKA_WAYS.items():
            table.append(Row(
                f"{name} via {what} (aiokafka), {callers} callers, {connections} connections",
                per_s[way],
                "req/s",
                per_s[way] / per_s["ray"],
            ))
        table.append(Row(f"{name} p50, one caller, Ray handles", p50["ray"], "ms"))
        for way, what in KAFKA_WAYS.items():
            table += [
                Row(f"{name} p50, one caller, {what}", p50[way], "ms", p50[way] / p50["ray"]),
                Row(f"{name}: {what}'s added latency (p50)", p50[way] - p50["ray"], "ms"),
            ]
    return table


async def run(args: argparse.Namespace, client: Client, port: int) -> list[Row]:
    member, generation = await join_member(client)
    kafka = [
        AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{port}", client_id=f"bench-{c}")
        for c in range(args.connections)
    ]
    try:
        for k in kafka:
            await k.bootstrap()
        # FindCoordinator names the leader's listener; its Metadata listed it (gateway.direct).
        listener = await kafka[0].coordinator_lookup(GROUP_COORDINATOR, GROUP)
        assert listener != GATEWAY_NODE_ID, "FindCoordinator named the gateway: no direct path"
        ways = {
            "ray": ray_calls(client, member, generation),
            "gateway": kafka_calls(kafka, member, generation, GATEWAY_NODE_ID),
            "direct": kafka_calls(kafka, member, generation, listener),
        }
        return await measure(ways, args)
    finally:
        for k in kafka:
            await k.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=4_000, help="requests per throughput round")
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument(
        "--connections",
        type=int,
        default=None,
        help="aiokafka clients, one connection each (default: one per caller)",
    )
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two ways")
    parser.add_argument("--latency-calls", type=int, default=300, help="one-at-a-time requests per round")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few calls, one round")
    parser.add_argument(
        "--serve", nargs=3, metavar=("ADDRESS", "NAMESPACE", "PORT_FILE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.serve:
        serve_gateway(*args.serve)
        return
    args.connections = args.connections or args.callers
    if args.quick:
        args.calls, args.rounds, args.latency_calls = 400, 1, 50
    config = CoordinatorConfig(group_initial_rebalance_delay_ms=0)
    with embedded_service(num_cpus=2, config=config) as (client, _):
        process, port = start_gateway_process(DEFAULT_NAMESPACE)
        try:
            table = asyncio.run(run(args, client, port))
        finally:
            process.kill()
            process.wait()
    print_table("Kafka gateway vs Ray handles (one machine, fsync on)", table, "ratio to Ray")


if __name__ == "__main__":
    main()
