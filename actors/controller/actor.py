"""Controller: the named, detached, restartable actor that owns the cluster metadata.

A shell: the decisions (which actor leads each offsets partition at which
epoch, failover, resumable moves, liveness, orphan reaping) are
`actors.controller.plane.ControlPlane`'s (with replication_factor > 1
`actors.controller.replicas.ReplicatedPlane`'s: replicas, elections, ISR
changes), the Ray calls `actors.controller.ray_cluster.RayCluster`'s,
the metadata (`actors.controller.state`) lives in Ray's GCS key-value store
(`actors.controller.ray_store`), so it survives the controller's restart on any node.
The shell starts the plane as soon as Ray (re)starts the actor, without
waiting for a call, so a restarted controller finishes the operations its
predecessor left and resumes failover at once; every call waits for that
start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import ray

from actors.controller.kafka_brokers import Broker
from actors.controller.plane import ControlPlane, Routing
from actors.controller.ray_cluster import RayCluster
from actors.controller.ray_store import GcsKvStore
from actors.controller.replicas import ReplicatedPlane
from actors.core.metrics import ControllerMetrics
from actors.core.settings import TOPIC_REGISTRY_NAME, ServiceSettings


class Controller:
    def __init__(self, settings: ServiceSettings) -> None:
        logging.basicConfig(level=logging.INFO)
        self.settings = settings
        store = GcsKvStore(settings.namespace, settings.data_dir)
        self.plane: ControlPlane
        if settings.replication_factor > 1:
            me = ray.get_runtime_context().current_actor  # leaders send their ISR changes here
            self.plane = ReplicatedPlane(settings, RayCluster(settings), store, ControllerMetrics(), me)
            self.plane.rolling.exit_process = _exit_soon
        else:
            self.plane = ControlPlane(settings, RayCluster(settings), store, ControllerMetrics())
        self._startup: asyncio.Task[None] | None = None
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: the first call starts the plane
        self._startup = asyncio.get_running_loop().create_task(self._start())

    async def _start(self) -> None:
        await self.plane.start()
        self.plane.run_loops()

    async def _ready(self) -> None:
        task = self._startup
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._startup = asyncio.get_running_loop().create_task(self._start())
        await asyncio.shield(task)

    # ------------------------------------------------------------ public API

    async def routing(self) -> Routing:
        """(number of partitions, leader handles, leader epochs) for clients."""
        await self._ready()
        return self.plane.routing()

    async def routing_after(self, partition: int, epoch: int, wait_s: float) -> Routing:
        """A client could not use the leader of `epoch`: the routing once the
        partition has been checked and, if it needed one, has a new leader (at
        most `wait_s` later). See `ControlPlane.routing_after`."""
        await self._ready()
        return await self.plane.routing_after(partition, epoch, wait_s)

    async def kafka_brokers(self, gateway: Broker | None = None) -> list[Broker]:
        """Every Kafka broker of the service, (node id, host, port, Ray node id): the
        gateways, then the leaders' listeners (`actors.controller.kafka_brokers`).
        A gateway names itself, and is listed while it does so (`GATEWAY_TTL_S`)."""
        await self._ready()
        now_s = time.monotonic()
        if gateway is not None:
            self.plane.kafka.register(gateway, now_s)
        return self.plane.kafka.live_gateways(now_s) + self.plane.kafka_listeners()

    async def kafka_gateway_closed(self, node_id: int, host: str, port: int) -> None:
        """A gateway closed: listed no more (unless another registered since at that node id)."""
        await self._ready()
        self.plane.kafka.unregister(node_id, host, port)

    async def _authorize(self, method: str, credential: str | None) -> None:
        """With `ray_credentials` on, an administrative call needs a credential the topic
        registry accepts for it (ALTER on the CLUSTER, actors/client/admin_guard.py); it
        raises CredentialError or AuthorizationError before anything is changed. The setting
        in force: a rolling restart that turned it on reaches the controller too."""
        if not self.plane.settings.ray_credentials:
            return
        registry = await self.plane.cluster.find(TOPIC_REGISTRY_NAME)
        if registry is None:
            raise RuntimeError("no topic registry to authorize the call: try again")
        await registry.authorize_admin.remote(method, (), credential)

    async def reassign(
        self, partition: int, node_id: str | None = None, expected_epoch: int | None = None,
        credential: str | None = None,
    ) -> int:
        """Move a partition's leadership (unload the old leader, load a new one) if its
        leader is still at `expected_epoch` (None: whatever the current one is); returns
        the epoch after. Ray retries this call on a restarted controller: a caller that
        names the epoch it saw gets one move, not two."""
        await self._ready()
        await self._authorize("reassign", credential)
        return await self.plane.reassign(partition, node_id, expected_epoch)

    async def alter_isr(self, partition: int, change: Any) -> tuple[int, list[str], int, int]:
        """A partition leader's ISR change (Kafka's AlterPartition), committed before the answer."""
        await self._ready()
        return await self._replicated().alter_isr(partition, change)

    async def elect_leader(
        self, partition: int, unclean: bool = False, node: str | None = None, credential: str | None = None
    ) -> dict[str, Any]:
        """An operator's leader election; `unclean` may elect a replica outside the ISR
        (`node`: that one)."""
        await self._ready()
        await self._authorize("elect_leader", credential)
        return await self._replicated().elect_leader(partition, unclean, node)

    def _replicated(self) -> ReplicatedPlane:
        if not isinstance(self.plane, ReplicatedPlane):
            raise ValueError("the service runs with replication_factor 1: no elections, no rolling restart")
        return self.plane

    async def repartition(self, count: int, credential: str | None = None) -> dict[str, Any]:
        """Begin changing the offsets partition count to `count` online (a multiple of
        today's); returns the plan at once, or raises RepartitionRefused saying why not
        (`actors.controller.repartition`). `repartition_status` follows it."""
        await self._ready()
        await self._authorize("repartition", credential)
        return await self.plane.repartition_to(count)

    async def repartition_status(self) -> dict[str, Any]:
        await self._ready()
        return self.plane.repartition.status()

    async def rolling_restart(
        self, runtime_env: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
        resume: bool = False, credential: str | None = None,
    ) -> dict[str, Any]:
        """Begin a rolling restart (new replicas get `runtime_env` and every actor the
        `settings`), or with `resume` drive a stopped one again; returns its status at once,
        or raises RollRefused saying why not (`actors.controller.rolling`)."""
        await self._ready()
        await self._authorize("rolling_restart", credential)
        rolling = self._replicated().rolling
        if resume:
            return await rolling.resume_stopped()
        return await rolling.start(runtime_env, dict(settings or {}))

    async def rolling_stop(self, credential: str | None = None) -> dict[str, Any]:
        """Stop the rolling restart under way for good (at its next step); its status, or
        RollRefused when none runs. `rolling_restart(resume=True)` goes on."""
        await self._ready()
        await self._authorize("rolling_stop", credential)
        return await self._replicated().rolling.stop()

    async def rolling_status(self) -> dict[str, Any]:
        await self._ready()
        if not isinstance(self.plane, ReplicatedPlane):
            return {"running": False, "phase": None}
        return self.plane.rolling.status()

    async def status(self) -> list[dict[str, Any]]:
        await self._ready()
        return await self.plane.status()

    async def log_sources(self) -> dict[int, list[Any]]:
        """{partition: [actor handles]}: the replicas holding each partition's log, the
        leader first (the Spark reader reads the log through them: no shared filesystem)."""
        await self._ready()
        return self.plane.log_sources()

    async def config_get(
        self, keys: list[str] | None = None, credential: str | None = None
    ) -> list[dict[str, Any]] | str:
        """`config get`: per setting (of `keys`, else every one) its value in force (the start
        settings, a rolling restart's, the online changes), start value, what set it, how it
        changes and why; or why not (an unknown key)."""
        if keys is not None and not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            return f"keys must be a list of setting names, got {keys!r}"[:300]
        await self._ready()
        await self._authorize("config_get", credential)
        return await self.plane.describe_settings(keys or [])

    async def roll_settings(self) -> dict[str, Any] | None:
        """The last rolling restart's settings, for the topic registry's `config set` check
        (actors/client/settings_table.py); None while the metadata is not loaded yet. Not
        behind `_ready`: the registry asks while the controller may be starting."""
        return self.plane.roll_settings()

    async def get_settings(self) -> ServiceSettings:
        """The settings in force (the start settings, the last rolling restart's, the online
        changes): what a gateway started or replaced by a roll runs with."""
        await self._ready()
        return self.plane.settings

    async def stats(self) -> dict[str, Any]:
        return {**self.plane.stats(), "node_id": ray.get_runtime_context().get_node_id()}

    async def shutdown(self) -> None:
        """Unload every partition and stop its actor (the data stays on disk)."""
        await self._ready()
        await self.plane.shutdown()


def _exit_soon() -> None:
    """End this process shortly (the call in flight answers first); Ray restarts the actor
    (max_restarts=-1) with the same handle, and the new process resumes the rolling restart."""
    logging.getLogger(__name__).warning("controller: exiting for a rolling restart; Ray restarts it")
    asyncio.get_running_loop().call_later(0.2, os._exit, 1)
