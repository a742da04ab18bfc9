"""Leadership moves of single-copy partitions: a mixin of `ControlPlane`.

A move (a replacement after a fault, or an operator's reassign) is resumable,
as the plane's module docstring states: `_begin` saves its `Intent` (the next
epoch, the new actor's name, the old one) before anything is done;
`_finish` carries it out (unload and kill the old leader and wait until Ray
reports it dead, start or adopt the new one, commit) and clears it only once
the new leader accepted its start. A restarted controller calls `resume`,
which finishes every saved intent. One operation per partition at a time:
each runs under the partition's lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from actors.controller.cluster_view import CallFailed, Cluster, ClusterError, Unreachable, new_actor_name
from actors.controller.standbys import Standbys
from actors.controller.state import ControlState, Intent
from actors.core.metrics import ControllerMetrics
from actors.core.settings import ServiceSettings

logger = logging.getLogger(__name__)
# How often to ask whether a killed actor is dead yet.
DEAD_POLL_S = 0.05


class Succession:
    """Leadership moves (module docstring)."""

    # Provided by ControlPlane (and Publication).
    settings: ServiceSettings
    cluster: Cluster
    state: ControlState
    metrics: ControllerMetrics
    standbys: Standbys
    leaders: dict[int, Any]
    refused: dict[int, str]
    _observations: dict[int, Any]
    _locks: dict[int, asyncio.Lock]
    num_partitions: int
    _persist: Callable[[], Awaitable[None]]
    _log_node: Callable[[int], str | None]
    _node_awaited: Callable[[int, Intent], Awaitable[bool]]
    _set_leader: Callable[[int, Any], None]
    _publish_when_serving: Callable[[int, int, Any], Awaitable[None]]

    async def replace(
        self, partition: int, seen_epoch: int, cause: str, *, old_unreachable: bool = False
    ) -> None:
        """Replace the leader of `seen_epoch`; nothing if the partition moved on since."""
        async with self._locks[partition]:
            meta = self.state.partitions[partition]
            if meta.intent is None:
                if meta.epoch != seen_epoch:
                    return
                await self._begin(partition, cause, None, False, old_unreachable)
            await self._finish(partition)

    async def resume(self, partition: int) -> None:
        """Finish the partition's saved operation, if any."""
        async with self._locks[partition]:
            if self.state.partitions[partition].intent is not None:
                await self._finish(partition)

    async def reassign(
        self, partition: int, node_id: str | None = None, expected_epoch: int | None = None
    ) -> int:
        """Move a partition's leadership off the leader of `expected_epoch` (None: the
        current one), to `node_id` only if given; returns the partition's epoch after.

        A partition already past `expected_epoch` is not moved: that move happened (a
        call Ray retries on a restarted controller names the epoch its first try saw)."""
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition must be in [0, {self.num_partitions}), got {partition}")
        async with self._locks[partition]:
            meta = self.state.partitions[partition]
            if meta.intent is not None:
                await self._finish(partition)
            if expected_epoch is not None and expected_epoch > meta.epoch:
                raise ValueError(f"partition {partition} is at epoch {meta.epoch}, not {expected_epoch}")
            if expected_epoch not in (None, meta.epoch):
                return meta.epoch
            live = await self.cluster.live_nodes()
            if node_id is not None and node_id not in live:
                raise ValueError(f"no live Ray node {node_id!r}")
            log_node = self._log_node(partition)
            if node_id is None and log_node is not None and log_node not in live:
                raise ValueError(
                    f"partition {partition}'s log is on node {log_node!r}, which is not live: the "
                    "partition waits for it; name a node that holds a copy of its log to move it there"
                )
            await self._begin(partition, "reassign", node_id, node_id is not None, False)
            await self._finish(partition)
            return meta.epoch

    async def _begin(
        self, partition: int, cause: str, node_id: str | None, required: bool, old_unreachable: bool
    ) -> None:
        """Save the intent of a move to the next epoch (a standby takes it when one is ready
        on the node the move needs); without a node named, the one holding the log, if any."""
        meta = self.state.partitions[partition]
        if node_id is None and (log_node := self._log_node(partition)) is not None:
            node_id, required = log_node, True
        standby = await self.standbys.take(node_id)
        try:
            meta.intent = Intent(
                epoch=meta.epoch + 1,
                name=standby or new_actor_name(),
                old_name=meta.actor,
                old_epoch=meta.epoch,
                reason=cause,
                node_id=node_id,
                required=required,
                old_unreachable=old_unreachable,
            )
        finally:
            if standby is not None:
                self.standbys.release(standby)
        await self._persist()

    async def _finish(self, partition: int) -> None:
        """Carry out the saved intent: stop the old leader, start the new one, commit
        (on node-local disks, only once the node the intent needs is live)."""
        meta = self.state.partitions[partition]
        intent = meta.intent
        assert intent is not None
        old = self.leaders.pop(partition, None)
        self.refused.pop(partition, None)
        self._observations.pop(partition, None)
        if intent.old_name is not None and intent.old_name != intent.name:
            if old is None:
                old = await self.cluster.find(intent.old_name)
            await self._emigrate(partition, old, intent)
        if await self._node_awaited(partition, intent):
            return
        handle = await self._immigrate(partition)
        done = meta.intent
        assert done is not None
        meta.epoch, meta.actor, meta.intent = done.epoch, done.name, None
        self._set_leader(partition, handle)
        await self._persist()
        if done.old_name is not None:
            self.metrics.failover(done.reason)
        logger.info("partition %d: leader %s epoch %d (%s)", partition, done.name, done.epoch, done.reason)
        await self._publish_when_serving(partition, done.epoch, handle)

    async def _emigrate(self, partition: int, old: Any, intent: Intent) -> None:
        """Unload the old leader unless it cannot answer, kill it, wait until Ray reports it dead."""
        if old is None:
            return
        if not intent.old_unreachable and not await self.cluster.is_dead(old):
            try:
                await self.cluster.call(
                    old, "unload", intent.old_epoch, timeout_s=self.settings.probe_timeout_s
                )
            except ClusterError as exc:
                logger.info("partition %d: old leader did not unload: %r", partition, exc)
        self.cluster.kill(old)
        await self._wait_dead(old, f"partition {partition}'s old leader {intent.old_name}")

    async def _wait_dead(self, handle: Any, what: str) -> None:
        for _ in range(max(1, round(self.settings.kill_wait_s / DEAD_POLL_S))):
            if await self.cluster.is_dead(handle):
                return
            await asyncio.sleep(DEAD_POLL_S)
        logger.warning("%s: not reported dead %.0f s after kill; going on", what, self.settings.kill_wait_s)

    async def _immigrate(self, partition: int) -> Any:
        """Start the intent's leader: re-use its actor if it exists (a standby, or one a
        previous controller created), create it if not. A failed attempt is killed and
        the intent moves to a fresh actor name and epoch for the next one."""
        meta = self.state.partitions[partition]
        intent = meta.intent
        assert intent is not None
        handle = await self.cluster.find(intent.name)
        timeout_s = self.settings.actor_start_timeout_s
        try:
            if handle is None:
                handle = self.cluster.create(
                    intent.name, partition, intent.epoch, *await self._placement(partition, intent)
                )
                answer = await self.cluster.call(handle, "activate", meta.known_end, timeout_s=timeout_s)
            else:
                answer = await self._take_over(handle, partition, intent, meta.known_end)
            if answer == "CLOSED":
                raise CallFailed(f"{intent.name} closed at once: epoch {intent.epoch} is fenced")
            return handle
        except ClusterError as exc:
            logger.warning("partition %d: starting %s failed: %r", partition, intent.name, exc)
            if handle is not None:
                self.cluster.kill(handle)
                await self._wait_dead(handle, f"partition {partition}'s failed leader {intent.name}")
            meta.intent = replace(intent, epoch=intent.epoch + 1, name=new_actor_name())
            await self._persist()
            raise

    async def _take_over(self, handle: Any, partition: int, intent: Intent, known_end: int) -> Any:
        timeout_s = self.settings.actor_start_timeout_s
        probe = await self.cluster.call(handle, "probe", timeout_s=timeout_s)
        led = probe.get("partition")
        if led is None or led < 0:
            return await self.cluster.call(
                handle, "assume", partition, intent.epoch, known_end, timeout_s=timeout_s
            )
        if (led, probe.get("epoch")) == (partition, intent.epoch):
            return await self.cluster.call(handle, "activate", known_end, timeout_s=timeout_s)
        raise CallFailed(f"{intent.name} leads partition {led} epoch {probe.get('epoch')}")

    async def _placement(self, partition: int, intent: Intent) -> tuple[str | None, bool]:
        """(node, required) for a new leader: the node the intent needs (the operator's, or
        the one holding the log) while it is live, else spread."""
        live = await self.cluster.live_nodes()
        if intent.node_id is not None and intent.node_id in live:
            return intent.node_id, intent.required
        if intent.node_id is not None and intent.required and not self.settings.shared_data_dir:
            raise Unreachable(f"node {intent.node_id} is not live")  # the next round waits for it
        if intent.node_id is not None:
            logger.warning("partition %d: node %s is gone; placing elsewhere", partition, intent.node_id)
        return (live[partition % len(live)] if live else None), False
