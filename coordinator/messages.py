"""Requests and responses of the group protocol, shaped like Kafka's.

Field names follow Kafka's JSON message schemas in snake case. Requests check
the Python types of their fields at construction (coordinator/checks.py) and
raise TypeError or ValueError with a clear message; protocol-level problems
(a bad session timeout, an unknown member) are answered with a Kafka error
code instead. Their compact pickled form lives with the Ray layer, in
actors/core/wire.py.

Messages are frozen dataclasses, except the per-partition items of
OffsetCommit (`OffsetCommitPartition`, `PartitionResult`): a commit carries
them by the hundred, and as NamedTuples, like the log's records, they are
built, taken apart and rebuilt by loops that run in C.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import NamedTuple, get_args
from uuid import UUID

from coordinator.checks import Checked, check_fields, register_requests
from coordinator.errors import Errors
from coordinator.lag_watch import LagWatchRequest
from coordinator.routing import Routing

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
INVALID_OFFSET = -1


# ---------------------------------------------------------------- JoinGroup


@dataclass(frozen=True, slots=True)
class JoinGroupRequest(Checked):
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    # JoinGroup v4+ (KIP-394): a new dynamic member first gets MEMBER_ID_REQUIRED.
    require_known_member_id: bool = True
    # JoinGroup v9+ (KIP-814): a static leader rejoining a Stable group may skip the assignor.
    support_skip_assignment: bool = True
    reason: str = ""


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: Errors
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


# ---------------------------------------------------------------- SyncGroup


@dataclass(frozen=True, slots=True)
class SyncGroupRequest(Checked):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: Errors
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


# ---------------------------------------------------------------- Heartbeat


@dataclass(frozen=True, slots=True)
class HeartbeatRequest(Checked):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: Errors


# ---------------------------------------------------------------- LeaveGroup


@dataclass(frozen=True, slots=True)
class MemberIdentity(Checked):
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest(Checked):
    group_id: str
    members: tuple[MemberIdentity, ...]


@dataclass(frozen=True, slots=True)
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: Errors


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: Errors
    members: tuple[MemberLeaveResult, ...] = ()


# ---------------------------------------------------------------- OffsetCommit


class _OffsetCommitPartitionFields(NamedTuple):
    topic: str
    partition: int
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetCommitPartition(_OffsetCommitPartitionFields):
    __slots__ = ()

    def __new__(
        cls, topic: str, partition: int, offset: int, metadata: str = "", leader_epoch: int = -1
    ) -> OffsetCommitPartition:
        self = tuple.__new__(cls, (topic, partition, offset, metadata, leader_epoch))
        check_fields(self)
        return self


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest(Checked):
    group_id: str
    partitions: tuple[OffsetCommitPartition, ...]
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    # OffsetCommit v2-v4 retention_time_ms; -1 lets KIP-211 retention decide.
    retention_time_ms: int = -1
    # The OffsetCommit API version where it changes the answer: v9+ is required from
    # members of consumer groups (KIP-848) and answers GROUP_ID_NOT_FOUND for a missing group.
    version: int = 8


class PartitionResult(NamedTuple):
    topic: str
    partition: int
    error: Errors


# tuple.__new__(cls, values) builds a NamedTuple in C, skipping its __new__.
_new_tuple = tuple.__new__

# Shared PartitionResults: small immutable values that recur (a consumer
# commits the same partitions again and again). Sharing them spares the
# allocations, which in a Ray driver's large heap cost mostly garbage
# collections (measured: a 100-partition commit's answer doubled them).
# The table holds at most SHARED_RESULTS_MAX entries (or one answer's, when
# larger): it is cleared before an answer would overfill it.
_SHARED_RESULTS: dict[tuple[str, int, Errors], PartitionResult] = {}
_topic_of = attrgetter("topic")
_partition_of = attrgetter("partition")
SHARED_RESULTS_MAX = 65_536


def partition_results(
    topics: Sequence[str], partitions: Sequence[int], error: Errors
) -> tuple[PartitionResult, ...]:
    """One PartitionResult per (topic, partition), all with `error`."""
    if len(topics) == 1:  # the most frequent answer, looked up without iterators (2x cheaper)
        one = _SHARED_RESULTS.get((topics[0], partitions[0], error))
        if one is not None:
            return (one,)
    found = tuple(map(_SHARED_RESULTS.get, zip(topics, partitions, repeat(error))))
    if all(found):
        return found  # type: ignore[return-value]
    if len(_SHARED_RESULTS) + len(topics) > SHARED_RESULTS_MAX:
        _SHARED_RESULTS.clear()
    made = map(_new_tuple, repeat(PartitionResult), zip(topics, partitions, repeat(error)))
    return tuple(_SHARED_RESULTS.setdefault(result, result) for result in made)


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    partitions: tuple[PartitionResult, ...]

    def errors(self) -> dict[tuple[str, int], Errors]:
        return {(p.topic, p.partition): p.error for p in self.partitions}


def commit_error_response(request: OffsetCommitRequest, error: Errors) -> OffsetCommitResponse:
    """The answer to a commit that fails as a whole: `error` for every partition."""
    partitions = request.partitions
    return OffsetCommitResponse(
        partition_results(tuple(map(_topic_of, partitions)), tuple(map(_partition_of, partitions)), error)
    )


# ---------------------------------------------------------------- OffsetFetch


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest(Checked):
    group_id: str
    # None asks for every committed offset of the group.
    partitions: tuple[tuple[str, int], ...] | None = None
    require_stable: bool = True
    # OffsetFetch v9+ (KIP-848): checked against a consumer group's member.
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: Errors
    partitions: tuple[FetchedOffset, ...] = ()

    def offsets(self) -> dict[tuple[str, int], int]:
        return {(p.topic, p.partition): p.offset for p in self.partitions}


# ---------------------------------------------------------------- admin


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest(Checked):
    group_ids: tuple[str, ...]
    # The DescribeGroups API version where it changes the answer: from v6 (KIP-1043) an
    # unknown group or one of another type is GROUP_ID_NOT_FOUND; before, "Dead" and no error.
    version: int = 5


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    error: Errors
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


# The group types ListGroups v5 reports and filters on (Kafka's `GroupType`, by its name).
GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"


@dataclass(frozen=True, slots=True)
class ListGroupsRequest(Checked):
    # Case-insensitive state names (KIP-518); empty means every state.
    states_filter: tuple[str, ...] = ()
    # Case-insensitive group types, "classic" or "consumer" (ListGroups v5, KIP-848); empty
    # means every type, and an unknown type matches no group, as in Kafka.
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = GROUP_TYPE_CLASSIC


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    error: Errors
    groups: tuple[ListedGroup, ...] = ()
    # The routing the partition listed its groups by (None: it owns every group it holds, as
    # before any repartition): a client merging every partition's list checks they agree.
    routing: Routing | None = None


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest(Checked):
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    results: tuple[tuple[str, Errors], ...]

    def errors(self) -> dict[str, Errors]:
        return dict(self.results)


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest(Checked):
    group_id: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error: Errors
    partitions: tuple[PartitionResult, ...] = ()


# ---------------------------------------------------- ConsumerGroupHeartbeat


class ConsumerGroupTopicPartitions(NamedTuple):
    """One topic's partitions, by topic id: ConsumerGroupHeartbeat's TopicPartitions."""

    topic_id: UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest(Checked):
    """ConsumerGroupHeartbeat v0-1 (KIP-848). A None field means "unchanged since the last heartbeat".

    `version` is the request's API version (v1 adds the regex and makes the
    client generate its member id); `client_id`/`client_host` come from the
    request context, as in Kafka.
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[ConsumerGroupTopicPartitions, ...] | None = None
    version: int = 1
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    """`assignment` is None when the member's assignment did not change (Kafka omits it)."""

    error: Errors
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[ConsumerGroupTopicPartitions, ...] | None = None


# ---------------------------------------------------- ConsumerGroupDescribe


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeRequest(Checked):
    """ConsumerGroupDescribe v0-1 (KIP-848): describe consumer groups of this partition."""

    group_ids: tuple[str, ...]


class DescribedTopicPartitions(NamedTuple):
    """ConsumerGroupDescribe's TopicPartitions: one topic of an assignment, by id and by name."""

    topic_id: UUID
    topic_name: str
    partitions: tuple[int, ...]


# ConsumerGroupDescribe v1's MemberType: how the member talks to the group.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroupMember:
    """ConsumerGroupDescribe's Member. `assignment` is what the member owns now,
    `target_assignment` what the group's target gives it; topics sorted by name."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = MEMBER_TYPE_CONSUMER


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    """ConsumerGroupDescribe's DescribedGroup; an error (GROUP_ID_NOT_FOUND) carries only the id."""

    error: Errors
    group_id: str
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedConsumerGroup, ...]


# ------------------------------------------------------ AssignmentWatch (raygroups' own)


@dataclass(frozen=True, slots=True)
class AssignmentWatchRequest(Checked):
    """Not Kafka's: a consumer-protocol Ray member idle between heartbeats asks to be
    answered as soon as its next heartbeat would change its partitions, or after
    `timeout_ms` (coordinator/consumer/watch.py)."""

    group_id: str
    member_id: str
    member_epoch: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class AssignmentWatchResponse:
    """`changed`: heartbeat now. False: the watch timed out or was replaced."""

    error: Errors
    changed: bool = False


Request = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | DescribeGroupsRequest
    | ListGroupsRequest
    | DeleteGroupsRequest
    | OffsetDeleteRequest
    | ConsumerGroupHeartbeatRequest
    | ConsumerGroupDescribeRequest
    | AssignmentWatchRequest
)

# The classes a partition actor accepts (coordinator.checks.validate_request).
register_requests(get_args(Request))

# Requests the shard may park until another member acts or a timer fires (a JoinGroup
# waiting for the join phase, a follower's SyncGroup waiting for its leader's, a watch).
MAY_PARK = (JoinGroupRequest, SyncGroupRequest, AssignmentWatchRequest, LagWatchRequest)
