"""The Ray layer: partition actors, controller, client routing and the `raygroups` CLI.

Applications use `actors.start()` / `actors.connect()` to get a `Client`, and
`actors.GroupMember` (or `actors.AsyncGroupMember` in asyncio code) to consume
as members of a group.
"""

# First: registers the messages' compact pickled form (actors/wire.py) in
# every process that uses any part of the Ray layer.
import actors.wire  # noqa: F401  # isort: skip
from actors.async_member import AsyncGroupMember
from actors.client import Client
from actors.member import GroupMember
from actors.member_types import (
    CommitFailedError,
    FencedInstanceError,
    GroupMemberError,
    OffsetAndMetadata,
)
from actors.retry import CoordinatorUnavailableError
from actors.service import connect, init_local_ray, start, stop
from actors.settings import ServiceSettings
from actors.topics import TopicError

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
