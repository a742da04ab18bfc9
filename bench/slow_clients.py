"""Benchmark: slow clients against a partition leader's Kafka listener, `python -m bench.slow_clients`.

A leader (an `OffsetPartition` on its own event loop, its listener with
SASL/PLAIN on, so on the node's address, without Ray: tests.gateway.
direct_support) serves kafka-python consumers that log in and commit
synchronously, `--committers` threads each committing to its own group. The
commits' latency is measured in alternating rounds of one run: alone, and
beside `--slow` slow connections (`SlowClients`): half send a header
promising the largest frame allowed before a login, then nothing; half send
that header, then a byte a second (from a process of their own). Each slow connection closed at its frame's
deadline is replaced at once, so the pressure lasts the whole round. Printed:
p50 and p99 of each way (every commit of its `--seconds` rounds), the p99
ratio (with / without; the target is under 2), and how many slow connections
the leader closed.

`SlowClients` is also the tests' (tests/gateway/test_slow_clients.py).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import selectors
import socket
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.table import print_figures

TRICKLE_INTERVAL_S = 1.0  # a byte a second
USER, PASSWORD = "bench", "bench-password"


@dataclass
class SlowCounts:
    connected: int = 0
    closed: int = 0
    answered: int = 0  # bytes the server sent to a slow connection: none expected
    closed_after_s: list[float] = field(default_factory=list)


class SlowClients:
    """`count` slow connections to host:port in a thread of their own (module docstring);
    while `replace` is true, each one the server closes is replaced by a new one.
    `counts.connected` counts the connections opened or due to be."""

    def __init__(self, host: str, port: int, count: int, promised_bytes: int, replace: bool = False) -> None:
        self.address = (host, port)
        self.count = count
        self.header = promised_bytes.to_bytes(4, "big")
        self.replace = replace
        self.counts = SlowCounts()
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.counts.connected = count
        for n in range(count):
            self._open(trickle=n % 2 == 1)
        self._thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)
        self._thread.start()

    def snapshot(self) -> SlowCounts:
        with self._lock:
            return SlowCounts(self.counts.connected, self.counts.closed, self.counts.answered,
                              list(self.counts.closed_after_s))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()

    def _open(self, trickle: bool) -> None:
        sock = socket.create_connection(self.address, timeout=10)
        sock.sendall(self.header)
        sock.setblocking(False)
        self._selector.register(sock, selectors.EVENT_READ, (trickle, time.monotonic()))

    def _run(self) -> None:
        next_byte = time.monotonic() + TRICKLE_INTERVAL_S
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=max(0.0, min(0.1, next_byte - time.monotonic()))):
                self._on_readable(key)
            if time.monotonic() >= next_byte:
                next_byte += TRICKLE_INTERVAL_S
                for key in list(self._selector.get_map().values()):
                    if key.data[0]:
                        self._send_byte(key)

    def _on_readable(self, key: selectors.SelectorKey) -> None:
        sock: socket.socket = key.fileobj  # type: ignore[assignment]
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            with self._lock:
                self.counts.answered += len(data)
            return
        self._selector.unregister(sock)
        sock.close()
        # Counted with its close, so `closed == connected` never shows while a replacement is due.
        with self._lock:
            replace = self.replace and not self._stop.is_set()
            self.counts.closed += 1
            self.counts.connected += replace
            self.counts.closed_after_s.append(time.monotonic() - key.data[1])
        if replace:
            self._open(trickle=key.data[0])

    def _send_byte(self, key: selectors.SelectorKey) -> None:
        try:
            key.fileobj.send(b"\0")  # type: ignore[union-attr]
        except OSError:
            pass  # closed by the server: the selector reports it


def _slow_process(host: str, port: int, count: int, promised_bytes: int, pipe: Connection) -> None:
    """`SlowClients` (replaced when closed) until told to stop; sends back how many were closed."""
    slow = SlowClients(host, port, count, promised_bytes, replace=True)
    pipe.send("connected")
    pipe.recv()
    slow.replace = False
    pipe.send(slow.snapshot().closed)
    slow.close()


class SlowProcess:
    """`SlowClients` in a process of their own: their Python work shares no GIL with the
    leader and the committers of this process, as real slow clients are elsewhere."""

    def __init__(self, host: str, port: int, count: int, promised_bytes: int) -> None:
        context = multiprocessing.get_context("spawn")  # this process has threads: no fork
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_slow_process, args=(host, port, count, promised_bytes, child),
                                        daemon=True)
        self._process.start()
        assert self._pipe.recv() == "connected"

    def stop(self) -> int:
        """Stop; how many slow connections the leader closed."""
        self._pipe.send("stop")
        closed: int = self._pipe.recv()
        self._process.join(30)
        return closed


def sasl_consumer(bootstrap: str, group: str) -> Any:
    """A kafka-python consumer logged in with SASL/PLAIN, no subscription (commits only)."""
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        sasl_plain_username=USER, sasl_plain_password=PASSWORD,
    )


def commit(consumer: Any, topic: str, offset: int) -> None:
    """One synchronous OffsetCommit of `topic`-0 at `offset`."""
    from kafka.structs import OffsetAndMetadata, TopicPartition

    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})


def _latencies(consumers: list[Any], seconds: float, pool: ThreadPoolExecutor) -> list[float]:
    """Each consumer commits in a loop for `seconds`; every commit's latency."""
    until = time.monotonic() + seconds

    def one(index: int) -> list[float]:
        consumer = consumers[index]
        taken: list[float] = []
        while time.monotonic() < until:
            started = time.perf_counter()
            commit(consumer, "bench", len(taken))
            taken.append(time.perf_counter() - started)
        return taken

    return [t for taken in pool.map(one, range(len(consumers))) for t in taken]


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", type=int, default=300)
    parser.add_argument("--committers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=12.0, help="of each round: past two deadlines")
    parser.add_argument("--rounds", type=int, default=3, help="of each way, alternating")
    parser.add_argument("--deadline-ms", type=int, default=5000, help="the listener's frame_deadline_ms")
    args = parser.parse_args()
    for noisy in ("kafka", "actors"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The leader's line per slow connection closed (its deadline, or its truncated frame at the end).
    logging.getLogger("gateway").setLevel(logging.ERROR)
    from tests.gateway.direct_support import PartitionThread, free_port_range, group_of

    with tempfile.TemporaryDirectory() as data_dir:
        users = Path(data_dir) / "users"
        users.write_text(f"{USER}:{PASSWORD}\n")
        leader = PartitionThread(
            str(Path(data_dir) / "log"), free_port_range(2), num_partitions=1, sasl_users_file=str(users),
            super_users=(f"User:{USER}",), limits=(("frame_deadline_ms", args.deadline_ms),),
        )
        host, port = leader.kafka["host"], leader.port
        bootstrap = f"{host}:{port}"
        consumers = [sasl_consumer(bootstrap, group_of(0, 1, f"bench-{n}")) for n in range(args.committers)]
        figures: dict[str, list[float]] = {"alone": [], "beside slow clients": []}
        closed = 0
        try:
            with ThreadPoolExecutor(args.committers) as pool:
                _latencies(consumers, 1.0, pool)  # logged in, coordinator found
                for _ in range(args.rounds):
                    figures["alone"] += _latencies(consumers, args.seconds, pool)
                    slow = SlowProcess(host, port, args.slow, 524_288)
                    try:
                        figures["beside slow clients"] += _latencies(consumers, args.seconds, pool)
                    finally:
                        closed += slow.stop()
        finally:
            for consumer in consumers:
                consumer.close()
            leader.close()
    alone_p99 = _p(figures["alone"], 99)
    rows = [_row(way, taken, alone_p99) for way, taken in figures.items()]
    print_figures(
        f"OffsetCommit through a SASL leader's listener, {args.committers} kafka-python committers, "
        f"alone and beside {args.slow} slow connections ({args.rounds} rounds of {args.seconds:g} s each, "
        f"frame deadline {args.deadline_ms} ms)",
        ("way", "commits", "p50 ms", "p99 ms", "p99 x alone (target < 2)"),
        rows,
        notes=[f"slow connections the leader closed at their frame's deadline: {closed:,}"],
    )


def _row(way: str, taken: list[float], alone_p99: float) -> tuple[str, ...]:
    p99 = _p(taken, 99)
    return way, f"{len(taken):,}", f"{_p(taken, 50):.2f}", f"{p99:.2f}", f"{p99 / alone_p99:.2f}"


if __name__ == "__main__":
    main()
