"""The Ray layer: partition actors, controller, client routing and the `raygroups` CLI.

Applications use `actors.start()` / `actors.connect()` to get a `Client`, and
`actors.GroupMember` (or `actors.AsyncGroupMember` in asyncio code) to consume
as members of a group.

The public names are imported on first use (PEP 562 `__getattr__`): Ray
imports this package in every partition and controller actor, which need
none of the client, member or service code (docs/capacity.md, an idle
partition actor's memory).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# First: registers the messages' compact pickled form (actors/core/wire.py) in
# every process that uses any part of the Ray layer.
import actors.core.wire  # noqa: F401  # isort: skip

if TYPE_CHECKING:
    from actors.client.client import Client
    from actors.client.connect import connect
    from actors.client.retry import CoordinatorUnavailableError
    from actors.client.topics import TopicError
    from actors.core.settings import ServiceSettings
    from actors.member.api import (
        CommitFailedError,
        FencedInstanceError,
        GroupMemberError,
        OffsetAndMetadata,
    )
    from actors.member.async_group_member import AsyncGroupMember
    from actors.member.group_member import GroupMember
    from actors.pool.pool import ConsumerPool
    from actors.service import init_local_ray, start, stop

# public name -> the module that defines it
_EXPORTS = {
    "AsyncGroupMember": "actors.member.async_group_member",
    "Client": "actors.client.client",
    "CommitFailedError": "actors.member.api",
    "ConsumerPool": "actors.pool.pool",
    "CoordinatorUnavailableError": "actors.client.retry",
    "FencedInstanceError": "actors.member.api",
    "GroupMember": "actors.member.group_member",
    "GroupMemberError": "actors.member.api",
    "OffsetAndMetadata": "actors.member.api",
    "ServiceSettings": "actors.core.settings",
    "TopicError": "actors.client.topics",
    "connect": "actors.client.connect",
    "init_local_ray": "actors.service",
    "start": "actors.service",
    "stop": "actors.service",
}

__all__ = [
    "AsyncGroupMember",
    "Client",
    "CommitFailedError",
    "ConsumerPool",
    "CoordinatorUnavailableError",
    "FencedInstanceError",
    "GroupMember",
    "GroupMemberError",
    "OffsetAndMetadata",
    "ServiceSettings",
    "TopicError",
    "connect",
    "init_local_ray",
    "start",
    "stop",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
