"""Replica moves of the replicated controller: off lost nodes, and for balance.

A mixin of `actors.controller.replicas.ReplicatedPlane` (its module docstring
states the rules: a lost node's replicas move after `replica_reassign_delay_s`,
and a replica whose disk keeps failing after `disk_failure_move_delay_s`,
unless one is the partition's last ISR member; balancing runs only while
every partition is led and fully in sync, and moves a replica by adding the
new one before removing the old, as Kafka's reassignment does). Where a replica goes is decided
by `coordinator.replication.placement`; a move is committed like any other
change (`_commit`, a new leader epoch, as Kafka bumps it when a reassignment
removes a replica; the leader keeps its shard and serves on) and carried out
by the next `_reconcile`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from actors.controller.cluster_view import Cluster
from actors.controller.state import ControlState
from coordinator.replication import PartitionState, rebalance_move, replacement_node

logger = logging.getLogger(__name__)


class ReplicaMoves:
    """Moves of replicas between nodes (module docstring)."""

    # Provided by ReplicatedPlane.
    state: ControlState
    settings: Any
    cluster: Cluster
    clock: Callable[[], float]
    handles: dict[int, dict[str, Any]]
    _locks: dict[int, asyncio.Lock]
    _missing_since: dict[str, float]
    _disk_failed_since: dict[tuple[int, str], float]

    _commit: Callable[[int, PartitionState, str], Awaitable[None]]
    _persist: Callable[[], Awaitable[None]]
    _reconcile: Callable[[int, set[str]], Awaitable[None]]
    reassign: Callable[..., Awaitable[int]]

    async def _move_lost_replicas(self, partition: int, live: set[str]) -> None:
        """Replace replicas whose node has been gone longer than the reassign delay,
        or whose disk has been failing longer than the disk move delay."""
        meta = self.state.partitions[partition]
        if meta.held is not None:
            return  # its replicas' logs are what an operator chooses from
        now, delay = self.clock(), self.settings.replica_reassign_delay_s
        disk_delay = self.settings.disk_failure_move_delay_s
        # An ISR member is not moved: a lost one left the ISR at its loss unless it is
        # the last, and the partition waits for the last (module rules).
        lost = [
            node for node in meta.replicas
            if node not in live and node not in meta.isr
            and now - self._missing_since.get(node, now) >= delay
        ]
        broken = [
            node for node in meta.replicas
            if node in live and node not in meta.isr
            and now - self._disk_failed_since.get((partition, node), now) >= disk_delay
        ]
        for node in broken:
            logger.warning(
                "partition %d: the disk of replica %s has failed for %.0f s", partition, node, disk_delay
            )
            handle = self.handles.get(partition, {}).get(node)
            if handle is not None:
                self.cluster.kill(handle)
            self._disk_failed_since.pop((partition, node), None)
        lost += broken
        if not lost:
            return
        replicas = list(meta.replicas)
        assignment = {p: m.replicas for p, m in self.state.partitions.items()}
        for node in lost:
            target = replacement_node(replicas, live, assignment)
            if target is None:
                logger.warning("partition %d: no live node can take its replica on %s", partition, node)
                continue
            replicas[replicas.index(node)] = target
            meta.names.pop(node, None)
            self.handles.get(partition, {}).pop(node, None)
            logger.warning("partition %d: replica on %s moves to %s", partition, node, target)
        if replicas == meta.replicas:
            return
        state = PartitionState(
            tuple(replicas), tuple(meta.isr), meta.leader, meta.epoch + 1, meta.partition_epoch + 1
        )
        await self._commit(partition, state, "replica moved")

    async def balance_once(self) -> None:
        """On a healthy cluster only (every partition led, every ISR full): leadership
        back to each partition's preferred replica (Kafka's auto leader rebalance),
        then at most one follower replica moved toward the idlest node."""
        parts = self.state.partitions
        if any(m.leader is None or len(m.isr) < len(m.replicas) for m in parts.values()):
            return  # repairs first
        for partition, meta in parts.items():
            preferred = meta.replicas[0]
            if meta.leader != preferred and not self._locks[partition].locked():
                try:
                    await self.reassign(partition, preferred)
                except ValueError as exc:
                    logger.info("partition %d: preferred leader not elected: %s", partition, exc)
        live = set(await self.cluster.live_nodes())
        assignment = {p: m.replicas for p, m in parts.items()}
        move = rebalance_move(assignment, {p: m.leader for p, m in parts.items()}, live)
        if move is not None:
            await self._move_replica(*move, live)

    async def _move_replica(self, partition: int, source: str, target: str, live: set[str]) -> None:
        """Move a follower replica as Kafka's reassignment does: the new replica on
        `target` is added first (one replica more, the ISR unchanged), starts empty
        and catches up; `_finish_move` removes `source` once `target` is in the
        ISR. The partition never holds fewer in-sync copies than before."""
        async with self._locks[partition]:
            meta = self.state.partitions[partition]
            if meta.moving is not None or source not in meta.isr or target in meta.replicas:
                return
            if meta.leader in (None, source):
                return
            meta.moving = (source, target)
            replicas, isr = (*meta.replicas, target), tuple(meta.isr)
            state = PartitionState(replicas, isr, meta.leader, meta.epoch + 1, meta.partition_epoch + 1)
            await self._commit(partition, state, "rebalance: replica added")
            logger.info("partition %d: replica moves from %s to %s (added first)", partition, source, target)
            await self._reconcile(partition, live)

    async def _finish_move(self, partition: int) -> None:
        """Under the partition's lock: once a move's target is in the ISR, its source
        leaves the replicas and the ISR (the leader too, if it led: the next
        election picks from the ISR) and its actor is killed."""
        meta = self.state.partitions[partition]
        if meta.moving is None:
            return
        source, target = meta.moving
        if target not in meta.replicas or source not in meta.replicas:  # a lost node's move replaced one
            meta.moving = None
            await self._persist()
            return
        if target not in meta.isr:
            return
        replicas = tuple(r for r in meta.replicas if r != source)
        isr = tuple(r for r in meta.isr if r != source)
        leader = None if meta.leader == source else meta.leader
        meta.moving = None
        meta.names.pop(source, None)
        old = self.handles.get(partition, {}).pop(source, None)
        state = PartitionState(replicas, isr, leader, meta.epoch + 1, meta.partition_epoch + 1)
        await self._commit(partition, state, "rebalance: replica removed")
        logger.info("partition %d: replica on %s removed, %s in sync", partition, source, target)
        if old is not None:
            self.cluster.kill(old)
