"""What the controller's decisions need from the cluster, as an interface.

`actors/controller/plane.py` and `actors/controller/standbys.py` decide; an
implementation of `Cluster` carries out the calls: `actors/controller/ray_cluster.py`
on Ray, a fake in the unit tests (tests/controller/). Every failure a call
can meet reaches the decisions as one of the errors below, never as a Ray
exception, so the decisions do not import Ray.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

# Every partition actor's name starts with this: the controller reaps the
# ones of its namespace it does not own.
PARTITION_ACTOR_PREFIX = "raygroups-offsets-"


def new_actor_name() -> str:
    """A fresh partition actor name: every leader and standby gets its own."""
    return f"{PARTITION_ACTOR_PREFIX}{uuid.uuid4().hex[:12]}"


class ClusterError(Exception):
    """A call to a partition actor did not give an answer."""


class Unreachable(ClusterError):
    """No answer in time, or the actor is (perhaps temporarily) unavailable."""


class ActorGone(Unreachable):
    """Ray reports the actor dead: it will never answer."""


class CallFailed(ClusterError):
    """The actor answered with an exception."""


class NameTaken(ClusterError):
    """An actor of that name already exists in the namespace."""


class Cluster(Protocol):
    """The Ray operations of the controller, each one thin."""

    def create(
        self, name: str, partition: int | None, epoch: int, node_id: str | None, required: bool
    ) -> Any:
        """Start a named partition actor (a standby when `partition` is None),
        on `node_id` as a preference or, `required`, only there. Raises NameTaken."""

    def configure_actors(self, settings: Any, runtime_env: dict[str, Any] | None) -> None:
        """The settings and Ray runtime_env every partition actor created from now on gets
        (a rolling restart's new code and settings, `actors.controller.rolling`)."""

    async def restart(self, handle: Any) -> None:
        """End a restartable actor's process so Ray restarts it in place (same handle)."""

    def kill(self, handle: Any) -> None:
        """Kill an actor without restart; asynchronous, see `is_dead`."""

    async def call(self, handle: Any, method: str, *args: Any, timeout_s: float) -> Any:
        """One actor method call; raises Unreachable, ActorGone or CallFailed."""

    async def is_dead(self, handle: Any) -> bool:
        """Whether Ray reports the actor DEAD (False when it cannot tell)."""

    async def find(self, name: str) -> Any:
        """The live actor of that name in the namespace, or None."""

    async def actor_names(self) -> list[str]:
        """The names of the namespace's named actors."""

    async def live_nodes(self) -> list[str]:
        """The ids of the cluster's live nodes, sorted."""

    async def replaceable(self) -> list[str]:
        """The names of the actors attached to the service that a rolling restart replaces
        (`actors.core.attached`: the Kafka gateways), sorted."""

    async def replace_attached(
        self, name: str, runtime_env: dict[str, Any] | None, timeout_s: float
    ) -> bool:
        """Replace attached actor `name` by its replacer, with `runtime_env`, and wait until it
        serves: True, or False when it is gone (nothing to replace). Raises CallFailed."""


class MetadataStore(Protocol):
    """Where the controller's metadata survives its restarts."""

    def load(self) -> dict[str, Any] | None:
        """The last saved metadata, or None before the first save."""

    def save(self, data: dict[str, Any]) -> None:
        """Replace the metadata, atomically."""
