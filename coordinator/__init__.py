"""The group protocol core: pure, deterministic, no I/O.

`Shard` holds every group of one offsets partition and is driven by
`handle(request, now_ms, token)`, `poll_timers(now_ms)` and `replay(record)`.
`validate_request` checks a request where it enters from another process.
Nothing here imports Ray, asyncio, msgpack or file code, or reads the clock.
"""

from coordinator.checks import InvalidRequestError, validate_request
from coordinator.classic.state import GroupState
from coordinator.config import CoordinatorConfig
from coordinator.errors import Errors
from coordinator.routing import java_string_hash, partition_for
from coordinator.shard import Result, Shard
from coordinator.status import CoordinatorStatus, precheck

__all__ = [
    "CoordinatorConfig",
    "CoordinatorStatus",
    "Errors",
    "GroupState",
    "InvalidRequestError",
    "Result",
    "Shard",
    "java_string_hash",
    "partition_for",
    "precheck",
    "validate_request",
]
