"""What the controller, the CLI and the benchmarks ask a partition actor about itself.

`PartitionInspection` is a part of `OffsetPartition` (`actors.partition.actor`),
whose `probe`, `info`, `ping`, `noop` and `noop_batch` delegate here. It owns
no state: it reads the host (`actors.partition.host`), the loader's counts,
the disk part, the roles' view and the Kafka listener's address. Rules:
- `probe` is the controller's liveness check: answered in every state,
  cheaply, in a Ray concurrency group of its own (`PROBE_GROUP`), so the
  thousands of calls a saturated partition has queued do not hold it past
  the controller's timeout (a busy leader is not a dead one: measured,
  2-3 ms against 3.7 s in the request queue). The view is taken on the
  partition's own loop, so a loop that is stuck still misses its probes.
- `info` is `probe`'s view plus what the controller reports of a
  partition and needs to know of where it runs: groups, members, request
  rate, load time, node, process and data directory, and its process's
  full garbage collections (`gc`: count, longest, freezes).
- `noop` and `noop_batch` do nothing and answer as `handle_wire` and
  `handle_batch` answer (bytes): the baselines of the actor benchmarks.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any, Protocol

from actors.core.node_names import current_node_name
from actors.core.wire import dumps_response
from coordinator.handoff import committed_routing

if TYPE_CHECKING:
    from actors.partition.host import PartitionHost
    from actors.partition.kafka_plug import KafkaPlug
    from actors.partition.recovery import DiskRecovery
    from coordinator.shard import Shard

# The Ray concurrency group of `probe` (its own thread and event loop).
PROBE_GROUP = "probe"
PROBE_CONCURRENCY = 4
NOOP_RESPONSE = dumps_response(None)


class LoadCounts(Protocol):
    """What the loader did (`actors.partition.loading.PartitionLoader`)."""

    progress: int
    load_ms: float
    loaded_records: int


class RoleView(Protocol):
    def view(self) -> dict[str, Any]:
        """Role, epochs, ISR, high watermark, log end (`actors.partition.roles.ReplicaRoles`)."""


class PartitionInspection:
    """The liveness check, the description and the no-ops of one partition actor."""

    def __init__(
        self,
        host: PartitionHost,
        loaded: LoadCounts,
        recovery: DiskRecovery,
        roles: RoleView,
        kafka: KafkaPlug,
    ) -> None:
        self.host = host
        self._loaded = loaded
        self._recovery = recovery
        self._roles = roles
        self._kafka = kafka
        # The partition's own event loop, where all its state lives (an actor's constructor
        # runs on it); `probe` comes in on another (PROBE_GROUP) and reads the state here.
        self._loop = _running_loop()

    async def probe(self) -> dict[str, Any]:
        """The controller's liveness check (module docstring)."""
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop():
            return await self._probe_here()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._probe_here(), loop))

    async def _probe_here(self) -> dict[str, Any]:
        self._recovery.ensure_disk_recovery()
        return self._probe_view()

    def _probe_view(self) -> dict[str, Any]:
        host, disk = self.host, self._recovery.disk
        runtime = host.runtime
        return {
            "partition": host.partition,
            "epoch": host.epoch,
            "state": runtime.state.name,
            "durable_end": runtime.durable_end,
            "progress": self._loaded.progress,
            # A failed disk is a failure the runtime never saw (it stepped down): show its text.
            "failure": runtime.failure or (disk.error if disk.failed else None),
            "refused": runtime.refused,
            "disk": disk.describe(),
            "kafka": self._kafka.describe(),
            # The committed routing this replica's shard owns groups by ("": every group sent
            # here), without an export's freeze: the controller pushes when it differs from its own.
            "routing": _routing_text(runtime.shard),
            **self._roles.view(),
        }

    async def info(self) -> dict[str, Any]:
        host = self.host
        shard = host.runtime.shard
        return {
            **self._probe_view(),
            "groups": len(shard.groups) if shard else 0,
            "members": shard.member_count() if shard else 0,
            "requests_per_s": host.metrics.request_rate,
            "load_ms": round(self._loaded.load_ms, 1),
            "loaded_records": self._loaded.loaded_records,
            "node_id": current_node_name(),
            "pid": os.getpid(),
            "data_dir": host.settings.data_dir,
            # Full collections and freezes of its process (`actors.partition.gc_freeze`).
            "gc": host.gc.describe(),
        }


def noop_batch_response(requests: list[Any]) -> bytes:
    """`noop_batch`'s answer: as `handle_batch` answers, every request answered None."""
    return dumps_response(([(index, None) for index in range(len(requests))], 0, 0))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # built outside a loop (a test): probes answer on the caller's loop
        return None


def _routing_text(shard: Shard | None) -> str:
    routing = None if shard is None else committed_routing(shard)
    return "" if routing is None else routing.encode().decode("ascii")
