"""What the controller, the CLI and the benchmarks ask a partition actor about itself.

`PartitionInspection` is a base class of `OffsetPartition` (a Ray actor
exposes the methods it inherits). Rules:
- `probe` is the controller's liveness check: answered in every state,
  cheaply, in a Ray concurrency group of its own (`PROBE_GROUP`), so the
  thousands of calls a saturated partition has queued do not hold it past
  the controller's timeout (a busy leader is not a dead one: measured,
  2-3 ms against 3.7 s in the request queue). The view is taken on the
  partition's own loop, so a loop that is stuck still misses its probes.
- `info` is `probe`'s view plus what the controller reports of a
  partition and needs to know of where it runs: groups, members, request
  rate, load time, node, process and data directory.
- `noop` and `noop_batch` do nothing and answer as `handle_wire` and
  `handle_batch` answer (bytes): the baselines of the actor benchmarks.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

import ray

from actors.core.node_names import current_node_name
from actors.core.wire import dumps_response

if TYPE_CHECKING:
    from collections.abc import Callable

    from actors.core.metrics import PartitionMetrics
    from actors.core.settings import ServiceSettings
    from actors.partition.kafka_plug import KafkaPlug
    from coordinator.replication import DiskHealth
    from coordinator.runtime import PartitionRuntime

# The Ray concurrency group of `probe` (its own thread and event loop).
PROBE_GROUP = "probe"
PROBE_CONCURRENCY = 4
NOOP_RESPONSE = dumps_response(None)


class PartitionInspection:
    """Mixin of `OffsetPartition`: its liveness check, its description and its no-ops."""

    # Provided by OffsetPartition and ReplicaRoles.
    partition: int
    epoch: int
    settings: ServiceSettings
    runtime: PartitionRuntime
    metrics: PartitionMetrics
    disk: DiskHealth
    kafka: KafkaPlug
    progress: int
    load_ms: float
    loaded_records: int
    # The partition's own event loop (None: built outside one, as in tests).
    _loop: asyncio.AbstractEventLoop | None
    _role_view: Callable[[], dict[str, Any]]
    _ensure_disk_recovery: Callable[[], None]

    @ray.method(concurrency_group=PROBE_GROUP)
    async def probe(self) -> dict[str, Any]:
        """The controller's liveness check (module docstring)."""
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop():
            return await self._probe_here()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._probe_here(), loop))

    async def _probe_here(self) -> dict[str, Any]:
        self._ensure_disk_recovery()
        return self._probe_view()

    def _probe_view(self) -> dict[str, Any]:
        runtime = self.runtime
        return {
            "partition": self.partition,
            "epoch": self.epoch,
            "state": runtime.state.name,
            "durable_end": runtime.durable_end,
            "progress": self.progress,
            # A failed disk is a failure the runtime never saw (it stepped down): show its text.
            "failure": runtime.failure or (self.disk.error if self.disk.failed else None),
            "refused": runtime.refused,
            "disk": self.disk.describe(),
            "kafka": self.kafka.describe(),
            # The routing this replica's shard owns groups by ("": every group sent here).
            "routing": "" if runtime.shard is None or runtime.shard.owner is None else (
                runtime.shard.owner.encode().decode("ascii")
            ),
            **self._role_view(),
        }

    async def info(self) -> dict[str, Any]:
        shard = self.runtime.shard
        return {
            **self._probe_view(),
            "groups": len(shard.groups) if shard else 0,
            "members": shard.member_count() if shard else 0,
            "requests_per_s": self.metrics.request_rate,
            "load_ms": round(self.load_ms, 1),
            "loaded_records": self.loaded_records,
            "node_id": current_node_name(),
            "pid": os.getpid(),
            "data_dir": self.settings.data_dir,
        }

    async def ping(self) -> int:
        return self.epoch

    async def noop(self, request: Any = None) -> bytes:
        """A do-nothing call: the baseline of the actor benchmark (its answer
        travels as `handle_wire`'s does, as bytes)."""
        return NOOP_RESPONSE

    async def noop_batch(self, caller: int, batch: int, requests: list[Any]) -> bytes:
        """`noop` for a coalesced batch: the baseline of coalesced calls."""
        return dumps_response(([(index, None) for index in range(len(requests))], 0, 0))
