"""What GroupMember, AsyncGroupMember and their shared decisions (`loop`) exchange:
configuration, errors raised to the application, and the effects the loop yields.

Effects are requests to a driver: `Send` a group request, `Describe` topics
(partition counts), `TopicIds` (every topic's id, to name a consumer-protocol
assignment), `Notify` a rebalance listener, `Wait` until woken or a
timeout. `advance` resumes the loop with an effect's result or exception.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from coordinator.assignors.base import RebalanceProtocol
from coordinator.assignors.registry import get_assignor
from coordinator.errors import Errors
from coordinator.messages import OffsetFetchResponse, Request
from coordinator.topic_partition import TopicPartition

T = TypeVar("T")

GROUP_PROTOCOLS = ("classic", "consumer")
LOST_ERRORS = frozenset({Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID})
REJOIN_ERRORS = LOST_ERRORS | {Errors.REBALANCE_IN_PROGRESS}
# JoinGroup errors no retry fixes: Kafka's consumer raises them to the application.
FATAL_JOIN_ERRORS = frozenset(
    {
        Errors.INCONSISTENT_GROUP_PROTOCOL,
        Errors.INVALID_SESSION_TIMEOUT,
        Errors.INVALID_GROUP_ID,
        Errors.INVALID_REQUEST,
        Errors.GROUP_MAX_SIZE_REACHED,
        Errors.GROUP_AUTHORIZATION_FAILED,
    }
)


class GroupMemberError(RuntimeError):
    """The member cannot go on; raised by the application's next call."""


class FencedInstanceError(GroupMemberError):
    """Another process joined with this member's group.instance.id."""


class CommitFailedError(RuntimeError):
    """The commit was refused; with a rebalance error the member rejoins."""

    def __init__(self, errors: Mapping[TopicPartition, Errors]) -> None:
        names = ", ".join(f"{tp}: {e.name}" for tp, e in sorted(errors.items()))
        super().__init__(f"offset commit failed: {names}")
        self.errors = dict(errors)


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""


def committed_offsets(response: OffsetFetchResponse) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """`committed()`'s answer: None where the group committed nothing."""
    if response.error is not Errors.NONE:
        raise RuntimeError(f"offset fetch failed: {response.error.name}")
    offsets = {(p.topic, p.partition): OffsetAndMetadata(p.offset, p.metadata) for p in response.partitions}
    return {TopicPartition(*tp): (o if o.offset >= 0 else None) for tp, o in offsets.items()}


@dataclass(frozen=True, slots=True)
class MemberConfig:
    group_id: str
    topics: tuple[str, ...]
    pattern: re.Pattern[str] | None
    assignors: tuple[str, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    metadata_max_age_ms: int
    retry_backoff_ms: int
    group_instance_id: str | None
    client_id: str
    client_host: str
    # "classic" (JoinGroup/SyncGroup, actors/member/loop.py) or "consumer" (KIP-848,
    # actors/member/consumer_loop.py): Kafka's group.protocol, classic by default as in Kafka 4.x.
    group_protocol: str = "classic"
    # Consumer protocol only: Kafka's group.remote.assignor (None: the coordinator's default)
    # and a subscription regex the coordinator resolves (RE2, full match).
    group_remote_assignor: str | None = None
    subscription_pattern: str | None = None
    # Consumer protocol only, not Kafka's: between heartbeats, ask the coordinator to
    # answer as soon as a heartbeat would change the assignment (coordinator/consumer/watch.py).
    assignment_watch: bool = True

    def __post_init__(self) -> None:
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(
                f"group_protocol must be one of {', '.join(GROUP_PROTOCOLS)}, got {self.group_protocol!r}"
            )
        consumer = self.group_protocol == "consumer"
        if not consumer and (self.group_remote_assignor is not None or self.subscription_pattern is not None):
            raise ValueError('group_remote_assignor and subscription_pattern need group_protocol="consumer"')
        if consumer and self.pattern is not None:
            raise ValueError(
                'with group_protocol="consumer" the coordinator resolves a pattern: use subscription_pattern'
            )
        if self.subscription_pattern is not None and self.topics:
            raise ValueError("subscribe to topics or to a pattern, not both")
        if not self.assignors:
            raise ValueError("at least one assignor is needed")
        duplicates = sorted({name for name in self.assignors if self.assignors.count(name) > 1})
        if duplicates:
            # Each assignor is one JoinGroup protocol; the coordinator refuses
            # a JoinGroup that names a protocol twice.
            raise ValueError(f"assignors must be distinct; listed more than once: {', '.join(duplicates)}")
        for name in self.assignors:
            get_assignor(name)
        if self.pattern is not None and self.topics:
            raise ValueError("subscribe to topics or to a pattern, not both")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")

    @property
    def protocol(self) -> RebalanceProtocol:
        cooperative = all(
            RebalanceProtocol.COOPERATIVE in get_assignor(a).supported_protocols for a in self.assignors
        )
        return RebalanceProtocol.COOPERATIVE if cooperative else RebalanceProtocol.EAGER


# ------------------------------------------------------------------ effects


@dataclass(frozen=True, slots=True)
class Send:
    """A group request; the driver returns its response (`timeout_s` bounds the client's retries)."""

    request: Request
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Describe:
    """Partition counts of `topics` (None: every known topic); missing topics are absent."""

    topics: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class TopicIds:
    """Every topic's id ({name: UUID}, the registry's `Client.topic_ids`)."""


@dataclass(frozen=True, slots=True)
class Notify:
    """Call the `on_<listener>` rebalance listener with `partitions`."""

    listener: str
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class Wait:
    """Sleep until the loop is woken or `timeout_s` passes."""

    timeout_s: float


@dataclass(frozen=True, slots=True)
class Watch:
    """`Wait`, with an assignment watch parked at the coordinator meanwhile: the driver
    sends `request` unless its previous watch is still parked, and returns the watch's
    response once answered, or None when woken or timed out first (it stays parked)."""

    request: Request
    timeout_s: float


Effect = Send | Describe | TopicIds | Notify | Wait | Watch
Steps = Generator[Effect, Any, T]


def advance(steps: Steps[Any], value: Any, error: BaseException | None) -> Effect | None:
    """Resume `steps` with an effect's result (or exception); None once it finished."""
    try:
        return steps.throw(error) if error is not None else steps.send(value)
    except StopIteration:
        return None
