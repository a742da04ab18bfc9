"""Sending roles to a partition's replicas: the replicated controller's `_send_roles`.

`RoleSending` is a mixin of `actors.controller.replicas.ReplicatedPlane`,
whose module docstring states the rules; here is how a committed state
reaches the replicas:
- The leader first (`become_leader` when its probe shows another role or
  epoch, `isr_committed` when only the ISR changed, `set_follower` for a
  follower's new handle), then every other answering replica whose disk
  has not failed (`become_follower`). Followers hear of an epoch only once
  its leader took it up, and so recorded it in its state file: a full
  restart finds no directory that saw a newer epoch than every state file
  (`actors.controller.forgotten_logs`).
- An ISR member follows only from an existing log (`must_exist`): never a
  hot follower from an empty one.
- A leader whose `become_leader` failed is no candidate at the next
  election (`_failed_leaders`). A replica that refused a role because an
  earlier operation's actor holds its log's lock has that actor reaped at
  once; its role is sent again at the next check.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from actors.controller.cluster_view import Cluster, ClusterError
from actors.controller.state import ControlState
from coordinator.replication import disk_failed

logger = logging.getLogger(__name__)
# A replica's last probe: its view, or a verdict on a replica that did not answer.
Probe = dict[str, Any] | str


class RoleSending:
    """Roles to replicas (module docstring)."""

    # Provided by ReplicatedPlane and ControlPlane.
    state: ControlState
    settings: Any
    cluster: Cluster
    controller: Any
    handles: dict[int, dict[str, Any]]
    leaders: dict[int, Any]
    _given: dict[int, dict[str, Any]]
    _failed_leaders: dict[int, set[str]]
    reap_once: Callable[[], Awaitable[Any]]

    async def _send_roles(self, partition: int, probes: dict[str, Probe]) -> None:
        """Make every answering replica's role match the metadata (module rules)."""
        meta = self.state.partitions[partition]
        if meta.leader is None:
            return
        handles = self.handles.get(partition, {})
        leader = handles.get(meta.leader)
        # A replica whose disk failed recovers by itself and then takes its role (replica_recovery).
        if leader is None or disk_failed(probes.get(meta.leader)):
            return
        # Followers hear of an epoch only once its leader took it up, and so recorded
        # it in its state file: a full restart finds no directory that saw a newer
        # epoch than every state file (forgotten_logs).
        if not await self._lead(partition, leader, probes.get(meta.leader)):
            return
        await asyncio.gather(
            *(
                self._follow(partition, node, handles[node], probes.get(node))
                for node in meta.replicas
                if node != meta.leader and node in handles and isinstance(probes.get(node), dict)
                and not disk_failed(probes.get(node))
            )
        )

    async def _lead(self, partition: int, handle: Any, probe: Probe | None) -> bool:
        """Make `handle` the partition's leader; whether it took up the epoch."""
        meta = self.state.partitions[partition]
        timeout_s = self.settings.actor_start_timeout_s
        followers = {n: self.handles.get(partition, {}).get(n) for n in meta.replicas if n != meta.leader}
        try:
            if not holds(probe, "leader", meta.epoch):
                probe = await self.cluster.call(
                    handle, "become_leader", meta.epoch, meta.partition_epoch, list(meta.replicas),
                    list(meta.isr), followers, self.controller, meta.known_end, timeout_s=timeout_s,
                )
                self._given[partition] = dict(followers)
            elif isinstance(probe, dict) and probe.get("partition_epoch") != meta.partition_epoch:
                await self.cluster.call(
                    handle, "isr_committed", meta.epoch, meta.partition_epoch, list(meta.isr),
                    timeout_s=timeout_s,
                )
            given = self._given.setdefault(partition, dict(followers))
            for node, follower in followers.items():
                if follower is not None and given.get(node) is not follower:
                    await self.cluster.call(
                        handle, "set_follower", meta.epoch, node, follower, timeout_s=timeout_s
                    )
                    given[node] = follower
        except ClusterError as exc:
            logger.warning("partition %d: leader on %s not started: %r", partition, meta.leader, exc)
            await self._release_lock(exc)
            self._failed_leaders.setdefault(partition, set()).add(str(meta.leader))
            self.leaders.pop(partition, None)
            return False
        self._failed_leaders.pop(partition, None)
        self.leaders[partition] = handle
        return not refuses(probe)

    async def _follow(self, partition: int, node: str, handle: Any, probe: Probe | None) -> None:
        meta = self.state.partitions[partition]
        if holds(probe, "follower", meta.epoch):
            return
        try:
            # An ISR member must hold the partition's log: never a hot follower from an empty one.
            must_exist = node in meta.isr and meta.known_end >= 0
            await self.cluster.call(
                handle, "become_follower", meta.epoch, meta.leader, must_exist, meta.replicas,
                timeout_s=self.settings.actor_start_timeout_s,
            )
        except ClusterError as exc:
            logger.warning("partition %d: replica on %s did not follow: %r", partition, node, exc)
            await self._release_lock(exc)

    async def _release_lock(self, exc: ClusterError) -> None:
        """A replica refused a role because another actor holds its log's lock: an actor of
        an earlier controller's operation (a restart, a move) that this metadata no longer
        owns. Reap it now rather than at the next reaper round; the role is sent again
        at the next check."""
        if "LogLockedError" in str(exc):
            await self.reap_once()


def refuses(probe: Probe | None) -> bool:
    """The replica refuses to serve its log (missing, or behind the committed end)."""
    return isinstance(probe, dict) and bool(probe.get("refused"))


def holds(probe: Probe | None, role: str, leader_epoch: int) -> bool:
    return isinstance(probe, dict) and probe.get("role") == role and probe.get("leader_epoch") == leader_epoch
