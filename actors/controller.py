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
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.partition import OffsetPartition
from actors.settings import ServiceSettings, partition_actor_name

logger = logging.getLogger(__name__)
METADATA_FILE = "controller.json"


def _write_json_atomically(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Controller:
    def __init__(self, settings: ServiceSettings) -> None:
        logging.basicConfig(level=logging.INFO)
        self.settings = settings
        self.metadata_path = os.path.join(settings.data_dir, METADATA_FILE)
        os.makedirs(settings.data_dir, exist_ok=True)
        self.num_partitions, self.epochs = self._load_metadata()
        self.leaders: dict[int, Any] = {}
        self.nodes: dict[int, str] = {}
        self._started: asyncio.Future[None] | None = None
        self._lock: asyncio.Lock | None = None
        self.failovers = 0

    def _load_metadata(self) -> tuple[int, dict[int, int]]:
        if os.path.exists(self.metadata_path):
            with open(self.metadata_path, encoding="utf-8") as f:
                data = json.load(f)
            if data["num_partitions"] != self.settings.num_partitions:
                logger.warning(
                    "data dir holds %d offsets partitions; ignoring num_partitions=%d",
                    data["num_partitions"],
                    self.settings.num_partitions,
                )
            return data["num_partitions"], {int(p): e for p, e in data["epochs"].items()}
        epochs = {p: 0 for p in range(self.settings.num_partitions)}
        _write_json_atomically(
            self.metadata_path, {"num_partitions": self.settings.num_partitions, "epochs": epochs}
        )
        return self.settings.num_partitions, epochs

    def _persist(self) -> None:
        data = {"num_partitions": self.num_partitions, "epochs": {str(p): e for p, e in self.epochs.items()}}
        _write_json_atomically(self.metadata_path, data)

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
            asyncio.get_running_loop().create_task(self._watch())
        await self._started

    async def _adopt_or_start_all(self) -> None:
        for partition in range(self.num_partitions):
            handle = self._find_live(partition)
            if handle is not None:
                try:
                    epoch = await asyncio.wait_for(handle.ping.remote(), self.settings.probe_timeout_s)
                except Exception:
                    epoch = -1
                if epoch == self.epochs[partition]:
                    self.leaders[partition] = handle
                    continue
                ray.kill(handle)
            await self._start_leader(partition)

    def _find_live(self, partition: int) -> Any:
        try:
            return ray.get_actor(partition_actor_name(partition), namespace=self.settings.namespace)
        except ValueError:
            return None

    async def _start_leader(self, partition: int, node_id: str | None = None) -> None:
        """Create the next-epoch leader of a partition; it loads from the log."""
        self.epochs[partition] += 1
        self._persist()
        node_id = node_id or self._pick_node(partition)
        options: dict[str, Any] = {
            "name": partition_actor_name(partition),
            "namespace": self.settings.namespace,
            "lifetime": "detached",
            "num_cpus": 0,
            "max_concurrency": self.settings.partition_max_concurrency,
            "max_restarts": 0,
        }
        if node_id is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=True)
        actor_class = ray.remote(OffsetPartition)
        handle = actor_class.options(**options).remote(partition, self.epochs[partition], self.settings)
        self.leaders[partition] = handle
        await handle.activate.remote()
        if node_id is not None:
            self.nodes[partition] = node_id

    def _pick_node(self, partition: int) -> str | None:
        alive = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
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
            await self._wait_name_free(partition)
            await self._start_leader(partition, node_id)

    async def _wait_name_free(self, partition: int) -> None:
        for _ in range(200):
            if self._find_live(partition) is None:
                return
            await asyncio.sleep(0.01)

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
        self.leaders.clear()
