"""The checks a ConsumerGroupHeartbeat passes before it reaches its group.

Kafka's `GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`
as of Kafka 4.0 and later (apache/kafka trunk after KIP-1082: the member id is
required from version 1, and a join may subscribe to an empty list or an
empty regex), in Kafka's order; every failure is INVALID_REQUEST except an
unknown server assignor (UNSUPPORTED_ASSIGNOR). The answer goes to that
member alone and nothing is written.

Departures, both refusing what Kafka's wire decoder refuses before its
checks run (a request that arrives through a Ray handle has no wire):
- a regex sent at version 0 (where the field does not exist on the wire) is
  refused with INVALID_REQUEST;
- a string longer than 32,767 UTF-8 bytes (Kafka's strings carry at most
  that many, `MAX_STRING_BYTES`) is refused with INVALID_REQUEST, checked
  first; the group id is the shard's to check (INVALID_GROUP_ID, as for every
  request).
And one bound of raygroups' own: more than `MAX_SUBSCRIBED_TOPIC_NAMES`
subscribed topic names is INVALID_REQUEST. Kafka takes any number that fits
its 100 MB request limit, but each name costs the partition's only thread
about 12 us (a million names stalled every group of the partition for 12 s);
a subscription to more topics than this is a regex's job.
"""

from __future__ import annotations

from collections.abc import Collection

from coordinator.errors import Errors
from coordinator.messages import ConsumerGroupHeartbeatRequest

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
# Kafka's CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION (KIP-1082).
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
REGEX_MIN_VERSION = 1
# Kafka's generated readers refuse a string longer than 0x7fff bytes.
MAX_STRING_BYTES = 32_767
# No str of fewer characters can exceed MAX_STRING_BYTES in UTF-8 (at most 4 bytes each).
_SHORT_STRING_CHARS = MAX_STRING_BYTES // 4

# Kafka has no such bound (module docstring): 100,000 names cost about 0.7 s of CPU.
MAX_SUBSCRIBED_TOPIC_NAMES = 100_000

Problem = tuple[Errors, str]


def heartbeat_request_error(
    request: ConsumerGroupHeartbeatRequest, assignors: Collection[str]
) -> Problem | None:
    """The error and message Kafka answers for a malformed heartbeat, or None."""
    oversized = _oversized_field(request)
    if oversized is not None:
        return Errors.INVALID_REQUEST, f"{oversized} is longer than {MAX_STRING_BYTES} bytes."
    names = request.subscribed_topic_names
    if names is not None and len(names) > MAX_SUBSCRIBED_TOPIC_NAMES:
        return Errors.INVALID_REQUEST, (
            f"SubscribedTopicNames has {len(names)} topics, more than {MAX_SUBSCRIBED_TOPIC_NAMES}: "
            "subscribe by regex."
        )
    epoch = request.member_epoch
    if (
        request.version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
        or epoch > 0
        or epoch == LEAVE_GROUP_MEMBER_EPOCH
    ) and request.member_id == "":
        return Errors.INVALID_REQUEST, "MemberId can't be empty."
    for value, name in (
        (request.group_id, "GroupId"),
        (request.instance_id, "InstanceId"),
        (request.rack_id, "RackId"),
    ):
        if value == "":
            return Errors.INVALID_REQUEST, f"{name} can't be empty."
    if request.version < REGEX_MIN_VERSION and request.subscribed_topic_regex is not None:
        return Errors.INVALID_REQUEST, "SubscribedTopicRegex needs version 1 or above."
    problem = _epoch_problem(request)
    if problem is not None:
        return Errors.INVALID_REQUEST, problem
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return Errors.UNSUPPORTED_ASSIGNOR, (
            f"ServerAssignor {request.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(assignors)}."
        )
    return None


def _too_long(value: str | None) -> bool:
    return value is not None and len(value) > _SHORT_STRING_CHARS and len(value.encode()) > MAX_STRING_BYTES


def _oversized_field(request: ConsumerGroupHeartbeatRequest) -> str | None:
    """The name of the first string field (the group id aside) the wire could not carry."""
    for value, name in (
        (request.member_id, "MemberId"),
        (request.instance_id, "InstanceId"),
        (request.rack_id, "RackId"),
        (request.subscribed_topic_regex, "SubscribedTopicRegex"),
        (request.server_assignor, "ServerAssignor"),
        (request.client_id, "ClientId"),
        (request.client_host, "ClientHost"),
    ):
        if _too_long(value):
            return name
    if any(map(_too_long, request.subscribed_topic_names or ())):
        return "A SubscribedTopicNames entry"
    return None


def _epoch_problem(request: ConsumerGroupHeartbeatRequest) -> str | None:
    epoch = request.member_epoch
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if request.topic_partitions is None or request.topic_partitions:
            return "TopicPartitions must be empty when (re-)joining."
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            return "InstanceId can't be null."
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return "MemberEpoch is invalid."
    return None
