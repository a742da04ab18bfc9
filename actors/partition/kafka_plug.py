"""The partition leader's Kafka listener, plugged in from outside actors/.

DESIGN 9: a Kafka client talks to the process that leads its group's
offsets partition, one hop, no pickle. The listener that speaks Kafka's
protocol is the gateway's code (`gateway.direct`), and actors/ never
imports gateway/ (tests/test_purity.py); so the partition actor loads it
through the `raygroups.partition_listeners` entry point, as the command
line loads its commands. `KafkaPlug` is a part of `OffsetPartition`
(`actors.partition.actor`), whose `kafka_listener` delegates here; it owns
the one listener. The plugin gets a `ListenerView` of the actor, a
`ListenerHost`: what a listener may touch, nothing more.

Rules:
- The plugin is imported when the actor first leads (a load reached
  ACTIVE), on a thread beside the partition's loop, which serves meanwhile:
  followers and standbys never import it, and the import is not on the
  failover path (Ray callers are served at once; Kafka clients ask
  `kafka_listener`, which waits for the start). The plugin itself is light
  (`gateway.direct.listener`): it binds its port at start and loads the
  code that serves Kafka clients (the gateway's handlers and kio, some
  3 MiB; docs/capacity.md) when the first one connects. The listener
  starts on the actor's event loop and stays for the actor's life: a
  leader that loses its
  partition keeps listening and answers NOT_COORDINATOR, as its runtime
  answers every request then, so clients find the coordinator again.
- It never fails the partition: a plugin that is missing, raises or finds
  no free port is logged once and reported in `describe` (the actor's
  probe and info, `raygroups status`), and the leader keeps serving Ray
  callers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from actors.core.settings import ServiceSettings
from coordinator.routing import Routing

if TYPE_CHECKING:
    from actors.partition.host import PartitionHost
    from actors.partition.topics_watch import TopicsWatch

logger = logging.getLogger(__name__)

PLUGIN_GROUP = "raygroups.partition_listeners"
START_WAIT_S = 5.0


class ListenerHost(Protocol):
    """The partition actor as a listener sees it."""

    @property
    def partition(self) -> int: ...

    @property
    def epoch(self) -> int: ...

    @property
    def settings(self) -> ServiceSettings: ...

    # One group protocol request into the partition's runtime; its response.
    handle: Callable[[Any], Awaitable[Any]]

    def topic_view(self) -> tuple[dict[str, int], dict[str, UUID]]:
        """The partition counts and ids of the topics the shard knows (the registry's last view)."""

    def leads(self) -> bool:
        """True while this actor serves its partition as leader (ACTIVE)."""

    def routing(self) -> Routing | None:
        """The routing its shard owns groups by (None: every group sent to it; no repartition)."""


class PartitionListener(Protocol):
    async def start(self) -> None:
        """Listen; raises with a reason a person can act on when it cannot."""

    def describe(self) -> dict[str, Any]:
        """At least `host`, `port` and `node_id` (the Kafka broker id it answers as)."""

    def acls_changed(self) -> None:
        """The ACLs may have changed (the registry's push): read them now."""

    async def close(self) -> None: ...


class ListenerView:
    """The partition actor as its listener sees it: a `ListenerHost` over the host
    (`actors.partition.host`), the actor's `handle`, the roles' `leads` and the topics."""

    def __init__(
        self,
        host: PartitionHost,
        handle: Callable[[Any], Awaitable[Any]],
        leads: Callable[[], bool],
        topics: TopicsWatch,
    ) -> None:
        self._host = host
        self.handle = handle
        self.leads = leads
        self._topics = topics

    @property
    def partition(self) -> int:
        return self._host.partition

    @property
    def epoch(self) -> int:
        return self._host.epoch

    @property
    def settings(self) -> ServiceSettings:
        return self._host.settings

    def topic_view(self) -> tuple[dict[str, int], dict[str, UUID]]:
        """The partition counts and ids of the topics the shard's consumer groups see
        (the registry's last view)."""
        return self._topics.counts, self._topics.ids

    def routing(self) -> Routing | None:
        shard = self._host.runtime.shard
        return None if shard is None else shard.owner


class KafkaPlug:
    """The actor's one listener, started on first leadership (module docstring)."""

    def __init__(self, host: ListenerHost) -> None:
        self._host = host
        self._listener: PartitionListener | None = None
        self._error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def _load_plugin(self) -> Any:
        """The plugin's listener factory, or None (why: `_error`); run on a thread."""
        plugins = sorted(entry_points(group=PLUGIN_GROUP), key=lambda point: point.name)
        if not plugins:
            self._error = f"no Kafka listener plugin installed (entry point group {PLUGIN_GROUP})"
            logger.warning("%s", self._error)
            return None
        try:
            return plugins[0].load()
        except Exception as exc:
            self._error = f"Kafka listener plugin not loaded: {exc!r}"
            logger.exception("%s; serving Ray callers only", self._error)
            return None

    def start_once(self) -> None:
        """Start the listener in the background, the first time only."""
        if self._task is None and self._host.settings.kafka_listener.enabled:
            self._task = asyncio.get_running_loop().create_task(self._start(), name="kafka-listener")

    async def _start(self) -> None:
        factory = await asyncio.to_thread(self._load_plugin)
        if factory is None:
            return
        try:
            listener = factory(self._host)
            await listener.start()
        except Exception as exc:
            self._error = f"Kafka listener not started: {exc}"
            logger.exception("partition %d: %s; serving Ray callers only", self._host.partition, self._error)
            return
        self._listener = listener

    async def started(self, timeout_s: float = START_WAIT_S) -> None:
        """Wait (bounded) for a start under way: a new leader names its listener, not none."""
        task = self._task
        if task is not None and not task.done():
            with suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), timeout_s)

    async def address(self) -> dict[str, Any] | None:
        """This leader's Kafka listener: its address and Kafka node id, and whether it
        leads its partition now; None while none listens (off, or not started).
        A start under way is waited for (`started`)."""
        await self.started()
        described = self.describe()
        if described is None or "error" in described:
            return None
        return {**described, "partition": self._host.partition, "leads": self._host.leads()}

    def acls_changed(self) -> None:
        """Pass the registry's push on; a plugin without `acls_changed` reads at its interval."""
        changed = getattr(self._listener, "acls_changed", None)
        if changed is not None:
            changed()

    def describe(self) -> dict[str, Any] | None:
        """The listener's address, or why there is none; None when it is off or not started yet."""
        if self._listener is not None:
            return self._listener.describe()
        if self._error is not None:
            return {"error": self._error}
        return None

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._listener is not None:
            await self._listener.close()
