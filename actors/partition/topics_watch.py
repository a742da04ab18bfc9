"""The topics a partition leader gives its shard (`Shard.update_topics`), polled from the registry.

KIP-848 consumer groups read partition counts and topic ids from the shard's
view of the topics (Kafka's metadata image). The registry
(`actors.client.topics`) holds them and nudges every leader after a change
(`OffsetPartition.topics_changed`); a leader then reads at once, and also
every `topics_refresh_interval_s` in case a nudge was lost, each time with the
token of the view it last applied: an unchanged registry answers None, so a
read costs one small call.

Rules:
- Right after a load (a new leader, a promoted follower, a reload after a
  failure) the shard gets `view_for_load`: the topics its own log names (the
  groups' subscription metadata) merged with the last view this actor got
  from the registry, each topic at its larger partition count (counts only
  grow). That view changes no group, so timers and heartbeats that run
  before the first poll answers move no partition (Kafka's coordinator is
  never without a metadata image). The next poll then asks for the whole
  view (`reset`) and applies it.
- A registry that is down, restarting or slow (`CALL_TIMEOUT_S`) only
  delays the view: the poll is logged and tried again at the next interval;
  the partition serves on. A view that fails to apply (the shard broke an
  invariant) fails the partition, whose reload applies it again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from uuid import UUID

import ray

from actors.core.settings import TOPIC_REGISTRY_NAME
from coordinator.shard import Shard

logger = logging.getLogger(__name__)
CALL_TIMEOUT_S = 5.0


class TopicsWatch:
    """The last view of the registry this actor got, and how to get a newer one."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.token: str | None = None
        self.counts: dict[str, int] = {}
        self.ids: dict[str, UUID] = {}
        self._registry: Any = None
        self._failures = 0

    @property
    def registry(self) -> Any:
        """The registry's handle once it answered a poll (None before, or after a failed one)."""
        return self._registry

    def reset(self) -> None:
        """The next poll answers the whole view, changed or not."""
        self.token = None

    def view_for_load(self, shard: Shard) -> tuple[dict[str, int], dict[str, UUID]]:
        """The topics the loaded shard's groups name, merged with the last registry view."""
        counts, ids = dict(self.counts), dict(self.ids)
        for group in shard.consumer_groups.values():
            for topic in group.subscription_metadata.values():
                counts[topic.name] = max(counts.get(topic.name, 0), topic.partition_count)
                ids.setdefault(topic.name, topic.topic_id)
        return counts, ids

    async def poll(self) -> bool:
        """Ask the registry; True when it answered a view newer than the last one."""
        try:
            registry = self._registry or await asyncio.to_thread(self.lookup)
            # None, or (token, partition counts, topic ids): `TopicRegistry.topics_if_changed`.
            answer: tuple[str, dict[str, int], dict[str, UUID]] | None = await asyncio.wait_for(
                registry.topics_if_changed.remote(self.token), CALL_TIMEOUT_S
            )
        except Exception as exc:  # down, restarting or not started yet: try again later
            self._registry = None
            self._failures += 1
            log = logger.warning if self._failures in (1, 10) or self._failures % 100 == 0 else logger.debug
            log("topic registry not answering (%d times): %r", self._failures, exc)
            return False
        self._registry, self._failures = registry, 0
        if answer is None:
            return False
        self.token, counts, ids = answer
        self.counts, self.ids = dict(counts), dict(ids)
        return True

    def lookup(self) -> Any:
        if not ray.is_initialized():  # a partition driven without Ray (tests): get_actor would start one
            raise RuntimeError("no Ray: no topic registry")
        return ray.get_actor(TOPIC_REGISTRY_NAME, namespace=self.namespace)

