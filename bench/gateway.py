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
For confluent-kafka also through Ray handles laid out as its consumers are
("Ray handles, threads in processes"): `--processes` Ray actors, a thread
per group in each, committing synchronously with `actors.Client`'s sync
methods (which coalesce a process's requests), so the Kafka client and the
Ray caller compare with the same processes and threads.
Two Kafka clients, one connection per caller as many consumers would have
(a broker serves each connection one request at a time):
- aiokafka's low-level client (`AIOKafkaClient.send`: OffsetCommit v3 of 1
  and of 100 partitions and Heartbeat v1, the versions aiokafka negotiates)
  for the one member of one Stable group;
- confluent-kafka (librdkafka, C): a `Consumer` per caller, each committing
  1 or 100 partitions of its own group synchronously (`commit(offsets=...,
  asynchronous=False)`: an OffsetCommit with generation -1, as a consumer
  with `assign()` sends), from a thread each in `--processes` worker
  processes per way (as real consumers run, apart from this process); a
  librdkafka consumer heartbeats only on its own, so it has no Heartbeat
  figure. The Ray baseline commits to the same groups.
Figures per client, request and way: requests/s with `--callers`
concurrent callers and as a ratio to Ray handles' (for confluent-kafka
also to Ray handles laid out as its consumers), p50 and p99 latency of
one caller at a time, and the CPU per request of the partition leaders'
processes during the rate rounds (the gateway's own process not counted).
Every request is checked answered NONE.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from multiprocessing.connection import Connection
from typing import Any, Protocol

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
WAYS = {
    "ray": "Ray handles",
    "ray-threads": "Ray handles, threads in processes",
    "gateway": "the gateway",
    "direct": "the leader's listener",
}
SESSION_MS = 300_000
Call = Callable[[int], Awaitable[None]]
# Per request name, the call that sends request i.
Calls = dict[str, Call]


class Way(Protocol):
    """One way of sending a family's requests: rounds of `calls` with `callers` at once, and
    the latencies of `calls` made one at a time."""

    async def rate(self, name: str, calls: int, callers: int) -> tuple[int, float]: ...

    async def latencies(self, name: str, calls: int) -> list[float]: ...


# ------------------------------------------------------------ the gateway processes


def serve_gateway(address: str, namespace: str, port_file: str, direct: str) -> None:
    """A gateway process: serve until killed, its port written to `port_file`; on the loop
    `raygroups gateway` runs on (`actors.core.loops`)."""
    import actors
    from actors.core import loops
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

    loops.run(serve())


def start_gateway_process(namespace: str, direct: bool) -> tuple[subprocess.Popen[bytes], int]:
    """A gateway in a process of its own, and its port (which it writes to a file, removed once read)."""
    with tempfile.TemporaryDirectory(prefix="raygroups-bench-gw-") as port_dir:
        port_file = os.path.join(port_dir, "port")
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


def commit_partitions(name: str) -> int:
    """The partitions a commit named by `requests` carries."""
    return WIDE_COMMIT if name == f"OffsetCommit x{WIDE_COMMIT}" else 1


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
            group = groups[i % len(groups)]
            check_committed(await client.commit_offsets_async(group, offsets(i, partitions)))

        return call

    return requests(commit)


def check_committed(response: Any) -> None:
    """A Ray handle's OffsetCommit answer: every partition NONE."""
    assert all(p.error is Errors.NONE for p in response.partitions), response


def thread_rate(pool: ThreadPoolExecutor, callers: Sequence[Callable[[int], None]], calls: int) -> int:
    """`calls` synchronous calls, caller w (a thread of `pool` each) making calls w,
    w + len(callers), ...; returns `calls`."""

    def caller(w: int) -> None:
        for i in range(w, calls, len(callers)):
            callers[w](i)

    list(pool.map(caller, range(len(callers))))
    return calls


def thread_latencies(call: Callable[[int], None], calls: int) -> list[float]:
    """Seconds of each of `calls` synchronous calls made one at a time."""
    taken = []
    for i in range(calls):
        started = time.perf_counter()
        call(i)
        taken.append(time.perf_counter() - started)
    return taken


def confluent_consumers(
    bootstrap: str, groups: Sequence[str], config: dict[str, Any] | None = None
) -> list[Consumer]:
    """A librdkafka consumer per group, bootstrapped at `bootstrap` (host:port,...), with
    `config` added (a SASL login, say)."""
    return [
        Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "client.id": f"bench-{group}", "log_level": 3, **(config or {}),
        })
        for group in groups
    ]


def commit_now(consumer: Consumer, i: int, partitions: int) -> None:
    """One synchronous commit of offset i, answered NONE (checked)."""
    done = consumer.commit(
        offsets=[TopicPartition(TOPIC, p, i) for p in range(partitions)], asynchronous=False
    )
    assert done is not None and not any(tp.error for tp in done), done


def confluent_worker(conn: Connection, bootstrap: str, groups: list[str], config: dict[str, Any]) -> None:
    """A process of consumers, as real ones run (a librdkafka consumer per group, a thread
    each), bootstrapped at `bootstrap` with `config` added: rounds of commits on command, until None."""
    consumers = confluent_consumers(bootstrap, groups, config)
    try:
        with ThreadPoolExecutor(len(consumers)) as pool:
            while (command := conn.recv()) is not None:
                kind, partitions, calls = command
                callers = [partial(commit_now, consumer, partitions=partitions) for consumer in consumers]
                if kind == "latency":
                    conn.send(thread_latencies(callers[0], calls))
                else:
                    conn.send(thread_rate(pool, callers, calls))
    finally:
        for consumer in consumers:
            consumer.close()


class ConfluentProcesses:
    """One way of the confluent-kafka family: `processes` worker processes whose consumers
    share the callers' groups, bootstrapped at `bootstrap` (host:port) with `config` added
    (a SASL login, say)."""

    def __init__(
        self, bootstrap: str, groups: Sequence[str], processes: int, config: dict[str, Any] | None = None
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self.workers = []
        for w in range(processes):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=confluent_worker, args=(theirs, bootstrap, list(groups[w::processes]), config or {}),
                daemon=True,
            )
            process.start()
            self.workers.append((process, ours))

    async def rate(self, name: str, calls: int, callers: int) -> tuple[int, float]:
        """`calls` shared by the workers; the callers are their consumers, one per group."""
        share = calls // len(self.workers)
        started = time.perf_counter()
        for _, conn in self.workers:
            conn.send(("rate", commit_partitions(name), share))
        done = sum(await asyncio.gather(*(asyncio.to_thread(conn.recv) for _, conn in self.workers)))
        return done, time.perf_counter() - started

    async def latencies(self, name: str, calls: int) -> list[float]:
        _, conn = self.workers[0]
        conn.send(("latency", commit_partitions(name), calls))
        return await asyncio.to_thread(conn.recv)  # type: ignore[no-any-return]

    def close(self) -> None:
        for process, conn in self.workers:
            conn.send(None)
            process.join(30)
            if process.is_alive():
                process.kill()


@ray.remote(num_cpus=0)
class RayCommitters:
    """A process of threaded consumers on Ray, laid out as `confluent_worker`'s: a thread per
    group, each committing synchronously through `Client` (its sync methods)."""

    def __init__(self, client: Client, groups: list[str]) -> None:
        self.client = client
        self.groups = groups
        self.pool = ThreadPoolExecutor(len(groups))

    def commit(self, group: str, i: int, partitions: int) -> None:
        check_committed(self.client.commit_offsets(group, offsets(i, partitions)))

    def callers(self, partitions: int) -> list[Callable[[int], None]]:
        return [partial(self.commit, group, partitions=partitions) for group in self.groups]

    def rate(self, partitions: int, calls: int) -> int:
        return thread_rate(self.pool, self.callers(partitions), calls)

    def latencies(self, partitions: int, calls: int) -> list[float]:
        return thread_latencies(self.callers(partitions)[0], calls)


class RayProcesses:
    """Ray handles laid out as the confluent-kafka consumers are: `processes` Ray actors
    sharing the callers' groups, a thread per group."""

    def __init__(self, client: Client, groups: Sequence[str], processes: int) -> None:
        self.workers = [RayCommitters.remote(client, list(groups[w::processes])) for w in range(processes)]

    async def rate(self, name: str, calls: int, callers: int) -> tuple[int, float]:
        share = calls // len(self.workers)
        started = time.perf_counter()
        partitions = commit_partitions(name)
        done = sum(await asyncio.gather(*(w.rate.remote(partitions, share) for w in self.workers)))
        return done, time.perf_counter() - started

    async def latencies(self, name: str, calls: int) -> list[float]:
        return await self.workers[0].latencies.remote(commit_partitions(name), calls)  # type: ignore[no-any-return]

    def close(self) -> None:
        for worker in self.workers:
            ray.kill(worker)


class Coroutines:
    """A way whose calls are coroutines of this process (Ray handles, aiokafka)."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    async def rate(self, name: str, calls: int, callers: int) -> tuple[int, float]:
        return await rate(self.calls[name], calls, callers)

    async def latencies(self, name: str, calls: int) -> list[float]:
        return await latencies(self.calls[name], calls)


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
    family: str, names: Sequence[str], ways: dict[str, Way], cpu: LeadersCpu, args: argparse.Namespace
) -> list[list[str]]:
    """Alternating rounds of every way, request by request: the family's table rows."""
    rows = []
    for name in names:
        done: dict[str, list[tuple[int, float, float]]] = {way: [] for way in ways}
        timed: dict[str, list[float]] = {way: [] for way in ways}
        for way in ways.values():  # warm-up: connections, routing, code paths
            await way.rate(name, args.callers * 4, args.callers)
        for _ in range(args.rounds):
            for key, way in ways.items():
                before = cpu.seconds()
                n, seconds = await way.rate(name, args.calls, args.callers)
                done[key].append((n, seconds, cpu.seconds() - before))
                timed[key].extend(await way.latencies(name, args.latency_calls))
        per_s = {way: sum(n for n, _, _ in runs) / sum(s for _, s, _ in runs) for way, runs in done.items()}
        for way, runs in done.items():
            ms = sorted(t * 1000 for t in timed[way])
            rows.append([
                family, name, WAYS[way], f"{per_s[way]:,.0f}", f"{per_s[way] / per_s['ray']:.2f}",
                f"{per_s[way] / per_s['ray-threads']:.2f}" if "ray-threads" in per_s else "-",
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
        ways: dict[str, Way] = {
            "ray": Coroutines(ray_calls(client, member, generation)),
            "gateway": Coroutines(aiokafka_calls(kafka, member, generation, GATEWAY_NODE_ID)),
            "direct": Coroutines(aiokafka_calls(kafka, member, generation, listener)),
        }
        return await measure("aiokafka", list(ways["ray"].calls), ways, cpu, args)
    finally:
        for k in kafka:
            await k.close()


async def confluent_family(
    args: argparse.Namespace, client: Client, cpu: LeadersCpu, direct_port: int, gateway_port: int
) -> list[list[str]]:
    groups = [f"bench-confluent-{c}" for c in range(args.callers)]
    baseline = Coroutines(simple_ray_calls(client, groups))
    ray_threads = RayProcesses(client, groups, args.processes)
    through_gateway = ConfluentProcesses(f"127.0.0.1:{gateway_port}", groups, args.processes)
    direct = ConfluentProcesses(f"127.0.0.1:{direct_port}", groups, args.processes)
    try:
        ways: dict[str, Way] = {
            "ray": baseline, "ray-threads": ray_threads, "gateway": through_gateway, "direct": direct,
        }
        return await measure("confluent-kafka", list(baseline.calls), ways, cpu, args)
    finally:
        for way in (ray_threads, through_gateway, direct):
            way.close()


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
    parser.add_argument(
        "--processes", type=int, default=4, help="confluent-kafka consumers' processes per way"
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
        ("client", "request", "way", "req/s", "x Ray", "x Ray, same layout", "p50 ms", "p99 ms",
         "leader CPU us/req"),
        table,
    )


if __name__ == "__main__":
    main()
