"""The partition leader's Kafka listener, plugged in from outside actors/.

DESIGN 9: a Kafka client talks to the process that leads its group's
offsets partition, one hop, no pickle. The listener that speaks Kafka's
protocol is the gateway's code (`gateway.direct`), and actors/ never
imports gateway/ (tests/test_purity.py); so the partition actor loads it
through the `raygroups.partition_listeners` entry point, as the command
line loads its commands. The plugin gets the actor as a `ListenerHost`:
what a listener may touch, nothing more.

Rules:
- The plugin is imported when the actor first leads (a load reached
  ACTIVE), on a thread beside the partition's loop, which serves meanwhile:
  followers and standbys never import it (the gateway and kio are some
  2 MiB, and kio pulls in hypothesis where that is installed, 8 MiB more;
  docs/capacity.md), and the import's 0.1-0.3 s is not on the failover
  path (Ray callers are served at once; Kafka clients ask `kafka_listener`,
  which waits for the start). The listener then starts on the actor's
  event loop and stays for the actor's life: a leader that loses its
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
from contextlib import suppress
from importlib.metadata import entry_points
from typing import Any, Protocol
from uuid import UUID

from actors.core.settings import ServiceSettings
from actors.partition.topics_watch import TopicsWatch
from coordinator.handoff import owns
from coordinator.runtime import PartitionRuntime, RuntimeState

logger = logging.getLogger(__name__)

PLUGIN_GROUP = "raygroups.partition_listeners"
START_WAIT_S = 5.0


class ListenerHost(Protocol):
    """The partition actor as a listener sees it."""

    partition: int
    epoch: int
    settings: ServiceSettings

    async def handle(self, request: Any) -> Any:
        """One group protocol request into the partition's runtime; its response."""

    def topic_view(self) -> tuple[dict[str, int], dict[str, UUID]]:
        """The partition counts and ids of the topics the shard knows (the registry's last view)."""

    def leads(self) -> bool:
        """True while this actor serves its partition as leader (ACTIVE)."""


class PartitionListener(Protocol):
    async def start(self) -> None:
        """Listen; raises with a reason a person can act on when it cannot."""

    def describe(self) -> dict[str, Any]:
        """At least `host`, `port` and `node_id` (the Kafka broker id it answers as)."""

    async def close(self) -> None: ...


class KafkaListening:
    """The partition actor's side of its listener: the actor method the gateways call
    (`kafka_listener`) and what `ListenerHost` asks beside `handle`."""

    partition: int
    runtime: PartitionRuntime
    leader: Any
    topics: TopicsWatch
    kafka: KafkaPlug

    async def kafka_listener(self, group_id: str | None = None) -> dict[str, Any] | None:
        """This leader's Kafka listener: its address and Kafka node id, and whether it
        leads its partition now (and, given a group, whether it serves that group: not
        one it handed off in a repartition); None while none listens (off, or not
        started). A start under way is waited for (`KafkaPlug.started`)."""
        await self.kafka.started()
        described = self.kafka.describe()
        if described is None or "error" in described:
            return None
        found = {**described, "partition": self.partition, "leads": self.leads()}
        shard = self.runtime.shard
        if type(group_id) is str and shard is not None:
            found["owns"] = owns(shard, group_id)
        return found

    def leads(self) -> bool:
        """Serving the partition as its leader."""
        leader = self.leader
        return self.runtime.state is RuntimeState.ACTIVE and leader is not None and not leader.stopped

    def topic_view(self) -> tuple[dict[str, int], dict[str, UUID]]:
        """The partition counts and ids of the topics the shard's consumer groups see
        (the registry's last view)."""
        return self.topics.counts, self.topics.ids


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
