"""Standbys: started partition actors, their code imported, waiting to lead.

`ControlPlane` decides when a move takes a standby (`take`); this module
keeps `standby_actors` of them started and owns their handles. Rules:

- The standbys' names live in the controller's metadata
  (`ControlState.standbys`), so a restarted controller adopts the ones that
  still answer as standbys and kills the others.
- A standby is handed out only if it answers its ping as a standby (epoch
  `STANDBY_EPOCH`); one that does not is killed, never handed out.
- A move that needs a node (node-local disks: the one holding the log) takes
  only a standby known to run there: on node-local disks standbys are
  started with a hard node affinity, and an adopted one says where it runs.
- A name being created or handed over is in `reserved` until the metadata
  owns it, so the reaper does not kill it as an orphan.
- After a standby fails to start, refilling backs off exponentially
  (`probe_interval_s * 2**failures`, at most `standby_backoff_max_s`): a
  cluster that cannot start actors is not asked to every round.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from actors.controller.cluster_view import Cluster, ClusterError, new_actor_name
from actors.controller.state import ControlState
from actors.core.settings import ServiceSettings

logger = logging.getLogger(__name__)
# The epoch a standby answers pings with: it leads no partition.
STANDBY_EPOCH = -1


class Standbys:
    def __init__(
        self,
        settings: ServiceSettings,
        cluster: Cluster,
        state: Callable[[], ControlState],
        persist: Callable[[], Awaitable[None]],
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.cluster = cluster
        # The plane's current metadata (replaced when the plane loads it).
        self._state = state
        self._persist = persist
        self.clock = clock
        self._handles: dict[str, Any] = {}
        # name -> the node a standby is known to run on
        self._nodes: dict[str, str] = {}
        # Names of actors being created or handed over, not yet in the metadata.
        self.reserved: set[str] = set()
        self._failures = 0
        self._retry_at = 0.0

    @property
    def names(self) -> list[str]:
        return self._state().standbys

    async def adopt(self) -> None:
        """Keep the saved standbys that still answer as standbys; kill the others."""
        state = self._state()
        saved, state.standbys = state.standbys, []
        for name in saved:
            handle = await self.cluster.find(name)
            if handle is None:
                continue
            if await self._ping(handle) == STANDBY_EPOCH:
                state.standbys.append(name)
                self._handles[name] = handle
                await self._learn_node(name, handle)
            else:
                self.cluster.kill(handle)

    async def _learn_node(self, name: str, handle: Any) -> None:
        try:
            info = await self.cluster.call(handle, "info", timeout_s=self.settings.probe_timeout_s)
        except ClusterError:
            return  # handed out only where no node is needed
        self._nodes[name] = str(info["node_id"])

    async def take(self, node: str | None = None) -> str | None:
        """A standby that answers (on `node`, if given), reserved until `release`;
        dead ones are killed."""
        while candidates := [n for n in self.names if node is None or self._nodes.get(n) == node]:
            name = candidates[0]
            self.names.remove(name)
            self._nodes.pop(name, None)
            handle = self._handles.pop(name, None)
            self.reserved.add(name)
            if handle is not None and await self._ping(handle) == STANDBY_EPOCH:
                return name
            self.reserved.discard(name)
            if handle is not None:
                self.cluster.kill(handle)
        return None

    def release(self, name: str) -> None:
        """The metadata owns a taken standby now (or it was not used)."""
        self.reserved.discard(name)

    async def refill_once(self) -> None:
        """Keep `standby_actors` started; after a failed start, back off."""
        if self.clock() < self._retry_at:
            return
        for name in list(self.names):
            handle = self._handles.get(name)
            if handle is None or await self.cluster.is_dead(handle):
                self.names.remove(name)
                self._handles.pop(name, None)
                self._nodes.pop(name, None)
        while len(self.names) < self.settings.standby_actors:
            if not await self._add():
                return

    async def _add(self) -> bool:
        name = new_actor_name()
        self.reserved.add(name)
        try:
            live = await self.cluster.live_nodes()
            node = live[len(self.names) % len(live)] if live else None
            # Node-local disks: exactly there, so a move needing that node may take it.
            pinned = None if self.settings.shared_data_dir else node
            handle = None
            try:
                handle = self.cluster.create(name, None, STANDBY_EPOCH, node, pinned is not None)
                ready = (
                    await self.cluster.call(handle, "ping", timeout_s=self.settings.actor_start_timeout_s)
                    == STANDBY_EPOCH
                )
            except ClusterError as exc:
                logger.warning("standby %s did not start: %r", name, exc)
                ready = False
            if not ready:
                if handle is not None:
                    self.cluster.kill(handle)
                self._back_off()
                return False
            self._failures = 0
            self.names.append(name)
            self._handles[name] = handle
            if pinned is not None:
                self._nodes[name] = pinned
            await self._persist()
            return True
        finally:
            self.reserved.discard(name)

    def _back_off(self) -> None:
        self._failures += 1
        delay_s = min(
            self.settings.standby_backoff_max_s,
            self.settings.probe_interval_s * 2**self._failures,
        )
        self._retry_at = self.clock() + delay_s

    def kill_all(self) -> None:
        for handle in self._handles.values():
            self.cluster.kill(handle)
        self._handles.clear()
        self._nodes.clear()

    async def _ping(self, handle: Any) -> int | None:
        try:
            return int(await self.cluster.call(handle, "ping", timeout_s=self.settings.probe_timeout_s))
        except ClusterError:
            return None
