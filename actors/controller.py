"""Controller: the named, detached actor that owns the cluster metadata.

It fixes the number of offsets partitions at first start, starts one
`OffsetPartition` leader per partition spread over the cluster's nodes,
gives each new leader a higher epoch, persists this metadata in
`<data_dir>/controller.json` (written atomically), watches the leaders
(Ray actor death and a periodic ping) and replaces a dead one: the new leader
loads the partition from its log (immigration); a live old leader is told to
unload first (emigration). After its own restart it rebuilds its view from
the persisted metadata and adopts the live partition actors by name.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.partition import OffsetPartition
from actors.settings import ServiceSettings
from log.fsutil import atomic_write_json

logger = logging.getLogger(__name__)
METADATA_FILE = "controller.json"


class Controller:
    def __init__(self, settings: ServiceSettings) -> None:
        logging.basicConfig(level=logging.INFO)
        self.settings = settings
        self.metadata_path = os.path.join(settings.data_dir, METADATA_FILE)
        os.makedirs(settings.data_dir, exist_ok=True)
        self.num_partitions = settings.num_partitions
        self.epochs: dict[int, int] = {p: 0 for p in range(settings.num_partitions)}
        # Actor names, persisted so a restarted controller finds live actors.
        self.actor_names: dict[int, str] = {}
        self.standby_names: list[str] = []
        self._load_metadata()
        self.leaders: dict[int, Any] = {}
        self.standbys: list[tuple[str, Any]] = []
        self._started: asyncio.Future[None] | None = None
        self._lock: asyncio.Lock | None = None
        self.failovers = 0

    def _load_metadata(self) -> None:
        if not os.path.exists(self.metadata_path):
            self._persist()
            return
        with open(self.metadata_path, encoding="utf-8") as f:
            data = json.load(f)
        if data["num_partitions"] != self.settings.num_partitions:
            logger.warning(
                "data dir holds %d offsets partitions; ignoring num_partitions=%d",
                data["num_partitions"],
                self.settings.num_partitions,
            )
        self.num_partitions = data["num_partitions"]
        self.epochs = {int(p): e for p, e in data["epochs"].items()}
        self.actor_names = {int(p): n for p, n in data.get("actors", {}).items()}
        self.standby_names = list(data.get("standbys", []))

    def _persist(self) -> None:
        data = {
            "num_partitions": self.num_partitions,
            "epochs": {str(p): e for p, e in self.epochs.items()},
            "actors": {str(p): n for p, n in self.actor_names.items()},
            "standbys": [name for name, _ in getattr(self, "standbys", [])],
        }
        atomic_write_json(self.metadata_path, data)

    # ------------------------------------------------------------- startup

    async def _ensure_started(self) -> None:
        if self._started is None:
            self._lock = asyncio.Lock()
            self._started = asyncio.get_running_loop().create_future()
            try:
                await self._adopt_or_start_all()
            except BaseException as exc:
                self._started.set_exception(exc)
                self._started = None
                raise
            self._started.set_result(None)
            loop = asyncio.get_running_loop()
            loop.create_task(self._watch())
            loop.create_task(self._refill_standbys())
        await self._started

    async def _adopt_or_start_all(self) -> None:
        for name in self.standby_names:
            handle = self._find(name)
            if handle is not None and await self._ping(handle) == -1:
                self.standbys.append((name, handle))
        for partition in range(self.num_partitions):
            handle = self._find(self.actor_names.get(partition))
            if handle is not None:
                if await self._ping(handle) == self.epochs[partition]:
                    self.leaders[partition] = handle
                    continue
                ray.kill(handle)
            await self._start_leader(partition, use_standby=False)
        self._persist()

    def _find(self, name: str | None) -> Any:
        if name is None:
            return None
        try:
            return ray.get_actor(name, namespace=self.settings.namespace)
        except ValueError:
            return None

    async def _ping(self, handle: Any) -> int | None:
        try:
            return int(await asyncio.wait_for(handle.ping.remote(), self.settings.probe_timeout_s))
        except Exception:
            return None

    def _create_actor(
        self, partition: int | None, epoch: int, node_id: str | None, required: bool = False
    ) -> tuple[str, Any]:
        """A new partition actor, on `node_id` if given: as a preference (the
        controller's spreading) or, `required`, as an operator's order."""
        name = f"raygroups-offsets-{uuid.uuid4().hex[:12]}"
        options: dict[str, Any] = {
            "name": name,
            "namespace": self.settings.namespace,
            "lifetime": "detached",
            "num_cpus": 0,
            "max_concurrency": self.settings.partition_max_concurrency,
            "max_restarts": 0,
        }
        if node_id is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=not required)
        return name, ray.remote(OffsetPartition).options(**options).remote(partition, epoch, self.settings)

    async def _start_leader(
        self, partition: int, node_id: str | None = None, use_standby: bool = True
    ) -> None:
        """Make the next-epoch leader of a partition; it loads from the log.

        A live standby is promoted when there is one (and no node was asked
        for); otherwise a new actor is started.
        """
        self.epochs[partition] += 1
        epoch = self.epochs[partition]
        self._persist()
        standby = await self._take_standby() if use_standby and node_id is None else None
        if standby is not None:
            name, handle = standby
            self.leaders[partition], self.actor_names[partition] = handle, name
            await handle.assume.remote(partition, epoch)
        else:
            if node_id is not None:
                name, handle = self._create_actor(partition, epoch, node_id, required=True)
            else:
                name, handle = self._create_actor(partition, epoch, self._pick_node(partition))
            self.leaders[partition], self.actor_names[partition] = handle, name
            await handle.activate.remote()
        self._persist()

    async def _take_standby(self) -> tuple[str, Any] | None:
        while self.standbys:
            name, handle = self.standbys.pop(0)
            if await self._ping(handle) == -1:
                return name, handle
            ray.kill(handle, no_restart=True)
        return None

    async def _refill_standbys(self) -> None:
        """Keep `standby_actors` started processes ready for failover."""
        while True:
            while len(self.standbys) < self.settings.standby_actors:
                name, handle = self._create_actor(None, -1, self._pick_node(len(self.standbys)))
                if await self._ping(handle) == -1:
                    self.standbys.append((name, handle))
                    self._persist()
            await asyncio.sleep(self.settings.probe_interval_s)

    def _pick_node(self, partition: int) -> str | None:
        alive = _alive_nodes()
        if not alive:
            return None
        return alive[partition % len(alive)]

    # ------------------------------------------------------------ watching

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.settings.probe_interval_s)
            assert self._lock is not None
            if self._lock.locked():
                continue  # a replacement is under way: its partition has no leader yet
            epochs = dict(self.epochs)
            alive = await asyncio.gather(*(self._is_alive(p) for p in epochs))
            for (partition, epoch), ok in zip(epochs.items(), alive):
                if not ok:
                    await self._replace(partition, "probe failed", epoch)

    async def _is_alive(self, partition: int) -> bool:
        handle = self.leaders.get(partition)
        if handle is None:
            return False
        try:
            epoch = await asyncio.wait_for(handle.ping.remote(), self.settings.probe_timeout_s)
        except Exception:
            return False
        return bool(epoch == self.epochs[partition])

    async def _replace(self, partition: int, reason: str, epoch: int, node_id: str | None = None) -> None:
        """Replace the leader of `epoch`; a no-op if it was already replaced."""
        assert self._lock is not None
        async with self._lock:
            if self.epochs[partition] != epoch:
                return
            old = self.leaders.pop(partition, None)
            if old is not None:
                try:
                    await asyncio.wait_for(old.unload.remote(epoch), self.settings.probe_timeout_s)
                except Exception:
                    pass  # dead or unreachable: it can no longer write, the new epoch fences it
                ray.kill(old, no_restart=True)
            logger.info("partition %d: new leader (%s), epoch %d", partition, reason, epoch + 1)
            self.failovers += 1
            await self._start_leader(partition, node_id)

    # ------------------------------------------------------------ public API

    async def routing(self) -> tuple[int, list[Any], list[int]]:
        """(number of partitions, leader handles, leader epochs) for clients."""
        await self._ensure_started()
        leaders = [self.leaders.get(p) for p in range(self.num_partitions)]
        return self.num_partitions, leaders, [self.epochs[p] for p in range(self.num_partitions)]

    async def report_unreachable(self, partition: int, epoch: int) -> None:
        """A client could not reach a leader: check it now rather than at the next probe."""
        await self._ensure_started()
        if epoch == self.epochs.get(partition) and not await self._is_alive(partition):
            await self._replace(partition, "reported unreachable", epoch)

    async def reassign(self, partition: int, node_id: str | None = None) -> int:
        """Move a partition's leadership (unload the old leader, load a new one)."""
        await self._ensure_started()
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition must be in [0, {self.num_partitions}), got {partition}")
        if node_id is not None and node_id not in _alive_nodes():
            raise ValueError(f"no live Ray node {node_id!r}")
        await self._replace(partition, "reassign", self.epochs[partition], node_id)
        return self.epochs[partition]

    async def status(self) -> list[dict[str, Any]]:
        await self._ensure_started()

        async def one(partition: int) -> dict[str, Any]:
            handle = self.leaders.get(partition)
            try:
                return dict(await asyncio.wait_for(handle.info.remote(), self.settings.probe_timeout_s))
            except Exception as exc:
                return {
                    "partition": partition,
                    "epoch": self.epochs[partition],
                    "state": f"UNREACHABLE ({exc!r:.40})",
                }

        return list(await asyncio.gather(*(one(p) for p in range(self.num_partitions))))

    async def get_settings(self) -> ServiceSettings:
        return self.settings

    async def stats(self) -> dict[str, Any]:
        return {
            "failovers": self.failovers,
            "num_partitions": self.num_partitions,
            "node_id": ray.get_runtime_context().get_node_id(),
        }

    async def shutdown(self) -> None:
        """Unload every partition and stop its actor (the data stays on disk)."""
        await self._ensure_started()
        for partition, handle in list(self.leaders.items()):
            try:
                await asyncio.wait_for(
                    handle.unload.remote(self.epochs[partition]), self.settings.probe_timeout_s
                )
            except Exception:
                pass
            ray.kill(handle, no_restart=True)
        for _, handle in self.standbys:
            ray.kill(handle, no_restart=True)
        self.leaders.clear()
        self.standbys.clear()


def _alive_nodes() -> list[str]:
    """The ids of the cluster's live nodes, sorted."""
    return sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
