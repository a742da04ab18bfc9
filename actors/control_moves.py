"""Replica moves of the replicated controller: off lost nodes, and for balance.

A mixin of `actors.control_replicas.ReplicatedPlane` (its module docstring
states the rules: a lost node's replicas move after `replica_reassign_delay_s`
unless one is the partition's last ISR member; balancing runs only while
every partition is led and fully in sync). Where a replica goes is decided
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

from actors.control_cluster import Cluster
from actors.control_state import ControlState
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

    _commit: Callable[[int, PartitionState, str], Awaitable[None]]
    _reconcile: Callable[[int, set[str]], Awaitable[None]]
    reassign: Callable[..., Awaitable[int]]

    async def _move_lost_replicas(self, partition: int, live: set[str]) -> None:
        """Replace replicas whose node has been gone longer than the reassign delay."""
        meta = self.state.partitions[partition]
        now, delay = self.clock(), self.settings.replica_reassign_delay_s
        # An ISR member is not moved: a lost one left the ISR at its loss unless it is
        # the last, and the partition waits for the last (module rules).
        lost = [
            node for node in meta.replicas
            if node not in live and node not in meta.isr
            and now - self._missing_since.get(node, now) >= delay
        ]
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
            logger.warning("partition %d: replica on lost node %s moves to %s", partition, node, target)
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
        """Move a follower replica: it leaves the replicas and the ISR, and a new
        one starts empty on `target` and catches up (the ISR holds one fewer
        until it does; Kafka adds the new replica before removing the old)."""
        async with self._locks[partition]:
            meta = self.state.partitions[partition]
            if source not in meta.isr or target in meta.replicas or meta.leader in (None, source):
                return
            replicas = tuple(target if r == source else r for r in meta.replicas)
            isr = tuple(r for r in meta.isr if r != source)
            meta.names.pop(source, None)
            old = self.handles.get(partition, {}).pop(source, None)
            state = PartitionState(replicas, isr, meta.leader, meta.epoch + 1, meta.partition_epoch + 1)
            await self._commit(partition, state, "rebalance")
            logger.info("partition %d: replica moves from %s to %s", partition, source, target)
            if old is not None:
                self.cluster.kill(old)
            await self._reconcile(partition, live)
