"""Test support for the partition leaders' Kafka listeners (gateway.direct) without Ray:
an `OffsetPartition` (a plain class until `ray.remote` wraps it) on an event loop in a
thread, its listener started as the actor starts it, so blocking sockets can talk to it."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from actors.core import loops
from actors.core.settings import KafkaListenerSettings, ServiceSettings
from actors.partition.actor import OffsetPartition
from coordinator import CoordinatorConfig
from coordinator.routing import partition_for

WAIT_S = 30.0


def free_port_range(size: int) -> tuple[int, int]:
    """A range of `size` ports that were free a moment ago (bound and released)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            low = probe.getsockname()[1]
        if low + size >= 65536:
            continue
        taken = []
        try:
            for port in range(low, low + size):
                sock = socket.socket()
                taken.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in taken:
                sock.close()
        return low, low + size - 1
    raise RuntimeError("no free port range")


def group_of(partition: int, num_partitions: int, prefix: str = "g") -> str:
    """A group id whose offsets partition is `partition`."""
    for n in range(10_000):
        group = f"{prefix}-{n}"
        if partition_for(group, num_partitions) == partition:
            return group
    raise AssertionError("no group found")


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    """Poll `condition` (bounded): synchronisation, not timing."""
    deadline = time.monotonic() + WAIT_S
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not in time: {what}")
        time.sleep(0.01)
    return value


class PartitionThread:
    """Partition 0 of `num_partitions`, leading at `epoch`, with its Kafka listener, on the
    event loop `loop` makes (by default the kind Ray runs the partition's actor on)."""

    def __init__(self, data_dir: str, ports: tuple[int, int], num_partitions: int = 2, epoch: int = 1,
                 loop: Callable[[], asyncio.AbstractEventLoop] = loops.new_event_loop,
                 **listener: Any) -> None:
        self.settings = ServiceSettings(
            data_dir=data_dir,
            # Its own Ray namespace: where the test process has Ray up (the session's service
            # runs there), the listener must find no controller to route other partitions by.
            namespace=f"direct-support-{uuid.uuid4().hex[:8]}",
            num_partitions=num_partitions,
            coordinator=CoordinatorConfig(
                group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500
            ),
            kafka_listener=KafkaListenerSettings(ports=ports, **listener),
        )
        self._loop = loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="partition", daemon=True)
        self._thread.start()
        self.actor: OffsetPartition = self.call(_make(self.settings, epoch))
        self.call(self.actor.activate())
        assert self.call(self.actor.wait_active(WAIT_S)) == "ACTIVE"
        self.kafka = wait_for(self.describe, "the Kafka listener started")

    def call(self, coroutine: Coroutine[Any, Any, Any], timeout_s: float = WAIT_S) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout_s)

    def describe(self) -> dict[str, Any] | None:
        return self.call(_describe(self.actor))

    @property
    def port(self) -> int:
        return int(self.kafka["port"])

    def close(self) -> None:
        self.call(self.actor.unload(self.actor.epoch))
        self.call(self.actor.kafka.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def _make(settings: ServiceSettings, epoch: int) -> OffsetPartition:
    return OffsetPartition(0, epoch, settings)


async def _describe(actor: OffsetPartition) -> dict[str, Any] | None:
    return actor.kafka.describe()
