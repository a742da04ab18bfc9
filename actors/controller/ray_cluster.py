"""RayCluster: the controller's `Cluster` on Ray, each operation one thin call.

No decisions here (they are in actors/controller/plane.py): this module only turns
the controller's operations into Ray calls and Ray's exceptions into the
`actors.controller.cluster_view` errors. Blocking GCS look-ups run in a thread so
they never stall the controller's event loop.

Nodes are named (`actors.core.node_names`): `live_nodes` answers names, and
`create` turns the name it is given into the Ray node id that scheduling
needs, from the last `live_nodes` answer (the controller asks for the live
nodes before it places anything) or, for a name not seen yet, a new look-up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.controller.cluster_view import ActorGone, CallFailed, NameTaken, Unreachable
from actors.core import attached, node_names
from actors.core.settings import ServiceSettings

logger = logging.getLogger(__name__)


class RayCluster:
    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.namespace = settings.namespace
        # name -> Ray node id, as of the last `live_nodes`.
        self._node_ids: dict[str, str] = {}
        self.runtime_env: dict[str, Any] | None = None

    def configure_actors(self, settings: ServiceSettings, runtime_env: dict[str, Any] | None) -> None:
        self.settings, self.runtime_env = settings, runtime_env

    def create(
        self, name: str, partition: int | None, epoch: int, node_id: str | None, required: bool
    ) -> Any:
        options: dict[str, Any] = {
            "name": name,
            "namespace": self.namespace,
            "lifetime": "detached",
            "num_cpus": 0,
            "max_concurrency": self.settings.partition_max_concurrency,
            "max_restarts": 0,
        }
        if self.runtime_env is not None:
            options["runtime_env"] = self.runtime_env
        if node_id is not None:
            ray_id = self._ray_node_id(node_id)
            if ray_id is None and required:
                raise Unreachable(f"no live Ray node named {node_id!r}")
            if ray_id is not None:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(ray_id, soft=not required)
        # Imported here: every client's `ray.get_actor` of the controller imports this module
        # (Ray loads the actor's class), and a client needs none of the partition actor.
        from actors.partition.actor import RemotePartition

        try:
            # When it was asked for: the replica logs how long it took to rejoin (actors/partition/phases.py).
            return RemotePartition.options(**options).remote(
                partition, epoch, self.settings, requested_at=time.time()
            )
        except ValueError as exc:  # ActorAlreadyExistsError
            raise NameTaken(name) from exc

    def _ray_node_id(self, name: str) -> str | None:
        if name not in self._node_ids:
            self._node_ids = node_names.live_nodes()
        return self._node_ids.get(name)

    async def restart(self, handle: Any) -> None:
        await asyncio.to_thread(ray.kill, handle, no_restart=False)

    def kill(self, handle: Any) -> None:
        try:
            ray.kill(handle, no_restart=True)
        except Exception as exc:  # already gone: nothing to kill
            logger.debug("kill: %r", exc)

    async def call(self, handle: Any, method: str, *args: Any, timeout_s: float) -> Any:
        try:
            return await asyncio.wait_for(getattr(handle, method).remote(*args), timeout_s)
        except TimeoutError as exc:
            raise Unreachable(f"{method}: no answer in {timeout_s} s") from exc
        except ray.exceptions.ActorDiedError as exc:
            raise ActorGone(f"{method}: {str(exc)[:300]}") from exc
        except ray.exceptions.RayActorError as exc:
            raise Unreachable(f"{method}: {str(exc)[:300]}") from exc
        except ray.exceptions.RayError as exc:
            # The actor's own exception first (a traceback's last line can be past the cut).
            cause = getattr(exc, "cause", None)
            what = f"{type(cause).__name__}: {cause}" if isinstance(cause, Exception) else str(exc)
            raise CallFailed(f"{method}: {what[:300]}") from exc

    async def is_dead(self, handle: Any) -> bool:
        try:
            # The GCS actor table: the state API (ray.util.state) needs the
            # dashboard, which an embedded service runs without.
            info = await asyncio.to_thread(ray._private.state.actors, handle._actor_id.hex())
        except Exception as exc:
            logger.debug("actor table: %r", exc)
            return False
        return bool(info) and info.get("State") == "DEAD"

    async def find(self, name: str) -> Any:
        def lookup() -> Any:
            try:
                return ray.get_actor(name, namespace=self.namespace)
            except ValueError:
                return None

        return await asyncio.to_thread(lookup)

    async def actor_names(self) -> list[str]:
        named = await asyncio.to_thread(ray.util.list_named_actors, all_namespaces=True)
        return [a["name"] for a in named if a.get("namespace") == self.namespace]

    async def replaceable(self) -> list[str]:
        return await asyncio.to_thread(attached.replaceable, self.namespace)

    async def replace_attached(
        self, name: str, runtime_env: dict[str, Any] | None, timeout_s: float
    ) -> bool:
        def replace() -> bool:
            function = attached.replacer(name, self.namespace)
            if function is None:
                return False
            return bool(function(name, self.namespace, runtime_env, timeout_s))

        try:
            return await asyncio.wait_for(asyncio.to_thread(replace), timeout_s + 10.0)
        except Exception as exc:  # its replacer's error, or no answer: the roll tries again
            raise CallFailed(f"replacing {name}: {exc!r}"[:300]) from exc

    async def live_nodes(self) -> list[str]:
        """The live nodes' names; raises DuplicateNodeNameError for two nodes of one name."""
        self._node_ids = await asyncio.to_thread(node_names.live_nodes)
        return sorted(self._node_ids)
