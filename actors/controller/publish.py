"""Publication and placement of single-copy leaders: a mixin of `ControlPlane`.

Rules (the plane's module docstring states them too):
- Served means recorded first. A new or adopted leader is probed from the
  start but published in the routing, the only way a client reaches it, only
  once a probe found it ACTIVE and the metadata saying the partition was
  served is persisted: `known_end` at least 0 (every later leader must find
  the log) and, on node-local disks, `log_node`, the node it serves from. A
  leader that dies before that answered no one, so its successor may start
  from an empty log. `wait_active` gets it published as soon as it serves,
  not at the next watch round.
- Node-local disks (`shared_data_dir` False): a move needing a node (the one
  holding the log, or an operator's) waits while that node is not live: the
  partition is offline, its intent kept, and the next round starts the
  leader once the node is back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from actors.controller.cluster_view import Cluster, ClusterError
from actors.controller.kafka_brokers import KafkaBrokers
from actors.controller.state import ControlState, Intent
from actors.core.settings import ServiceSettings

logger = logging.getLogger(__name__)


class Publication:
    """Publication of leaders and the nodes they must run on (module docstring)."""

    # Provided by ControlPlane.
    settings: ServiceSettings
    cluster: Cluster
    state: ControlState
    leaders: dict[int, Any]
    # partition -> the node holding its log, not live: offline until it is back
    awaiting: dict[int, str]
    # Partitions whose leader is not in the routing yet: not recorded as served.
    _unpublished: set[int]
    _publishing: dict[int, asyncio.Task[None]]
    kafka: KafkaBrokers

    _persist: Callable[[], Awaitable[None]]
    check: Callable[[int], Awaitable[None]]
    _check_done: Callable[[asyncio.Task[None]], None]

    def _log_node(self, partition: int) -> str | None:
        """The node a single-copy partition's leader must run on: the one whose disk holds
        its log (None on a shared data directory, or before the partition was served)."""
        if self.settings.shared_data_dir:
            return None
        return self.state.partitions[partition].log_node

    async def _node_awaited(self, partition: int, intent: Intent) -> bool:
        """On node-local disks a move needing a node that is not live waits for it (the
        partition offline, the intent kept for the next round); True while it waits."""
        node = intent.node_id
        if self.settings.shared_data_dir or node is None or not intent.required:
            return False
        if node in await self.cluster.live_nodes():
            if self.awaiting.pop(partition, None) is not None:
                logger.info("partition %d: node %s is back", partition, node)
            return False
        if partition not in self.awaiting:
            logger.warning(
                "partition %d: offline until node %s, which holds its log, is live again", partition, node
            )
        self.awaiting[partition] = node
        return True

    def _set_leader(self, partition: int, handle: Any) -> None:
        """The partition's leader, probed from now on, routed once `_publish`ed."""
        self._unpublished.add(partition)
        self.leaders[partition] = handle

    async def _publish_when_serving(self, partition: int, epoch: int, handle: Any) -> None:
        """Publish a new leader that already serves; otherwise check it again as
        soon as it does (`wait_active`), not at the next watch round."""
        try:
            probe = await self.cluster.call(handle, "probe", timeout_s=self.settings.probe_timeout_s)
        except ClusterError:
            return  # the watch finds out
        if (probe.get("partition"), probe.get("epoch"), probe.get("state")) == (partition, epoch, "ACTIVE"):
            await self._publish(partition, epoch, handle, probe)
            return
        task = self._publishing.pop(partition, None)
        if task is not None:
            task.cancel()
        task = asyncio.get_running_loop().create_task(self._check_once_active(partition, handle))
        task.add_done_callback(self._check_done)
        self._publishing[partition] = task

    async def _check_once_active(self, partition: int, handle: Any) -> None:
        timeout_s = self.settings.actor_start_timeout_s
        try:
            await self.cluster.call(
                handle, "wait_active", timeout_s, timeout_s=timeout_s + self.settings.probe_timeout_s
            )
        except ClusterError:
            return  # the watch finds out
        if self.leaders.get(partition) is handle and partition in self._unpublished:
            await self.check(partition)

    async def _publish(self, partition: int, epoch: int, handle: Any, probe: dict[str, Any]) -> None:
        """Route clients to a leader found ACTIVE, once the metadata saying the
        partition was served (its log required from now on, and on node-local
        disks the node holding it) is persisted."""
        meta = self.state.partitions[partition]
        self.kafka.on_probe(partition, epoch, probe)
        node = None
        if not self.settings.shared_data_dir:
            try:
                info = await self.cluster.call(handle, "info", timeout_s=self.settings.probe_timeout_s)
            except ClusterError as exc:
                logger.warning("partition %d: where epoch %d runs is unknown: %r", partition, epoch, exc)
                return  # not published: the next check tries again
            node = str(info["node_id"])
        if not self._leads(partition, epoch, handle):
            return  # a move replaced it meanwhile
        meta.log_node = node or meta.log_node
        self.state.record_end(partition, int(probe.get("durable_end") or 0))
        # Always saved: a concurrent save of the same change may not be done yet.
        await self._persist()
        if self._leads(partition, epoch, handle):
            self._unpublished.discard(partition)

    def _leads(self, partition: int, epoch: int, handle: Any) -> bool:
        return self.leaders.get(partition) is handle and self.state.partitions[partition].epoch == epoch

    def _routed(self, partition: int) -> Any:
        """The leader clients are sent to: none before it is published."""
        return None if partition in self._unpublished else self.leaders.get(partition)
