"""The Ray layer: partition actors, controller, client routing and the `raygroups` CLI.

Applications use `actors.start()` / `actors.connect()` to get a `Client`, and
`actors.GroupMember` (or `actors.AsyncGroupMember` in asyncio code) to consume
as members of a group.
"""

# First: registers the messages' compact pickled form (actors/core/wire.py) in
# every process that uses any part of the Ray layer.
import actors.core.wire  # noqa: F401  # isort: skip
from actors.client.client import Client
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
from actors.service import connect, init_local_ray, start, stop

__all__ = [
    "AsyncGroupMember",
    "Client",
    "CommitFailedError",
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
