"""OffsetCommit, OffsetFetch, OffsetDelete and offset expiration (KIP-211).

Every change to a group's offsets is a record applied through
`apply_offset_record`, the same function replay uses: a commit writes offset
records, expiry and deletion write tombstones.

Commit size limits count UTF-8 bytes, what the log stores:
`offset_metadata_max_bytes` per metadata string and `offsets_max_commit_bytes`
for the whole commit. Kafka checks the metadata's Java `String.length()`
(UTF-16 code units), so non-ASCII metadata that Kafka accepts can be
refused here; ASCII metadata gets the same answer from both.

A consumer group (KIP-848) commits and fetches through the same offsets, after
its member checks (`coordinator/consumer/offsets_check.py`); an OffsetCommit
v9+ to a group that does not exist is GROUP_ID_NOT_FOUND, as in Kafka. Its
offsets of subscribed topics never expire, OffsetDelete refuses them
(GROUP_SUBSCRIBED_TO_TOPIC), and an empty consumer group without offsets is
deleted by the expiration pass (Kafka's cleanupGroupMetadata).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any

from coordinator.classic import rebalance
from coordinator.classic.group import CONSUMER_PROTOCOL_TYPE, Group, Token
from coordinator.classic.state import GroupState
from coordinator.consumer import offsets_check as consumer_offsets
from coordinator.consumer.group import ConsumerGroup
from coordinator.errors import Errors
from coordinator.group_types import delete_consumer_group
from coordinator.messages import (
    INVALID_OFFSET,
    UNKNOWN_MEMBER_ID,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionResult,
    commit_error_response,
    partition_results,
)
from coordinator.records import (
    NO_TIMESTAMP,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from coordinator.status import error_response

if TYPE_CHECKING:
    from coordinator.shard import Shard

EMPTY = GroupState.EMPTY
DEAD = GroupState.DEAD
# Rough size of one offset record's fixed fields, for the commit size limit.
# The strings of a record count by their UTF-8 bytes, as the log stores them.
RECORD_OVERHEAD_BYTES = 48
# A commit of this many partitions or more is built column by column (C-level
# loops); a smaller one partition by partition, which is cheaper for it (measured).
COLUMNS_FROM_PARTITIONS = 8
# tuple.__new__ builds a NamedTuple from a ready tuple in C.
_new = tuple.__new__


def apply_offset_record(shard: Shard, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
    group = shard.groups.get(key.group_id)
    if value is not None:
        if group is None:
            # Offsets without a group record: a simple consumer group.
            group = shard.groups[key.group_id] = Group(key.group_id, shard.now_ms)
        group.offsets[key] = value
        shard.lag.on_commit_record(key, value)
        return
    if group is None:
        return
    if group.offsets.pop(key, None) is not None:
        shard.lag.on_offset_deleted(key[0], (key[1], key[2]))
    if group.generation_id == 0 and group.is_(EMPTY) and not group.offsets and not group.members:
        if not group.pending_members:
            # Never stored as a group: it existed only through its offsets.
            rebalance.forget_group(shard, group)


def apply_offset_commits(group: Group, keys: list[OffsetCommitKey], values: list[OffsetCommitValue]) -> None:
    """`apply_offset_record` for commits (not tombstones) of one live group, in bulk."""
    group.offsets.update(zip(keys, values))


# ------------------------------------------------------------ OffsetCommit


def handle_offset_commit(shard: Shard, request: OffsetCommitRequest, token: Token) -> OffsetCommitResponse:
    consumer_group = shard.consumer_groups.get(request.group_id)
    if consumer_group is not None:
        return _commit_to_consumer_group(shard, consumer_group, request)
    group = shard.groups.get(request.group_id)
    if group is not None:
        return _commit(shard, group, request)
    if request.generation_id >= 0:
        # The group failed over or the request comes from an old generation;
        # from v9 on Kafka says the group is not there.
        missing = Errors.GROUP_ID_NOT_FOUND if request.version >= 9 else Errors.ILLEGAL_GENERATION
        return commit_error_response(request, missing)
    # A simple consumer group, created as Kafka does; unlike Kafka it is kept
    # only if the commit stores an offset, so a refused commit leaves no
    # empty group behind for ListGroups to show.
    group = shard.get_or_create_group(request.group_id)
    response = _commit(shard, group, request)
    rebalance.discard_if_unused(shard, group)
    return response


def _commit_to_consumer_group(
    shard: Shard, consumer_group: ConsumerGroup, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    """A KIP-848 group's commit: its member checks, then the offsets of the group id."""
    error = consumer_offsets.commit_error(consumer_group, request)
    if error is not None:
        return commit_error_response(request, error)
    group = shard.get_or_create_group(request.group_id)
    response = _store_offsets(shard, group, request)
    rebalance.discard_if_unused(shard, group)
    return response


def _commit(shard: Shard, group: Group, request: OffsetCommitRequest) -> OffsetCommitResponse:
    """Kafka's doCommitOffsets."""
    error = _validate_commit(group, request)
    if error is not None:
        return commit_error_response(request, error)
    if group.is_(GroupState.COMPLETING_REBALANCE):
        return commit_error_response(request, Errors.REBALANCE_IN_PROGRESS)
    if not group.is_(EMPTY):
        # Commits during PreparingRebalance are allowed: the member learns of
        # the rebalance from its next heartbeat.
        rebalance.schedule_heartbeat(shard, group, group.members[request.member_id])
    return _store_offsets(shard, group, request)


def _validate_commit(group: Group, request: OffsetCommitRequest) -> Errors | None:
    """Kafka's validateOffsetCommit, as fixed by KAFKA-14201."""
    if group.is_(DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if request.generation_id < 0 and group.is_(EMPTY):
        # The admin client or a consumer without group management: an Empty
        # group takes its commit whatever member or instance id it carries.
        return None
    if (
        request.generation_id >= 0
        or request.member_id != UNKNOWN_MEMBER_ID
        or request.group_instance_id is not None
    ):
        error = rebalance.validate_current_member(group, request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        return None
    # Only members may commit for a group that has members.
    return Errors.UNKNOWN_MEMBER_ID


def utf8_len(text: str) -> int:
    """Bytes of `text` in UTF-8; for ASCII (a flag on the string) its length."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _store_offsets(shard: Shard, group: Group, request: OffsetCommitRequest) -> OffsetCommitResponse:
    if len(request.partitions) < COLUMNS_FROM_PARTITIONS:
        return _store_offsets_checked(shard, group, request)
    topics, partitions, offsets, metadata, epochs = zip(*request.partitions)
    all_metadata = "".join(metadata)
    ascii_metadata = all_metadata.isascii()
    max_metadata = shard.config.offset_metadata_max_bytes
    # UTF-8 takes at most 4 bytes a character (requests hold only encodable strings).
    if max(map(len, metadata)) > (max_metadata if ascii_metadata else max_metadata // 4):
        # Some metadata may be too large once encoded: check partition by partition.
        return _store_offsets_checked(shard, group, request)
    size = len(topics) * (RECORD_OVERHEAD_BYTES + utf8_len(group.group_id)) + utf8_len("".join(topics))
    size += len(all_metadata) if ascii_metadata else len(all_metadata.encode("utf-8"))
    if size > shard.config.offsets_max_commit_bytes:
        return commit_error_response(request, Errors.INVALID_COMMIT_OFFSET_SIZE)
    now, expire = shard.now_ms, _expire_timestamp_ms(shard, request)
    # A commit of many partitions is the hot path: keys and values are built
    # by C-level loops, as the log's decoder does.
    keys = list(map(_new, repeat(OffsetCommitKey), zip(repeat(group.group_id), topics, partitions)))
    fields = zip(offsets, epochs, metadata, repeat(now), repeat(expire))
    values = list(map(_new, repeat(OffsetCommitValue), fields))
    shard.write_offsets(group, keys, values)
    return OffsetCommitResponse(partition_results(topics, partitions, Errors.NONE))


def _store_offsets_checked(shard: Shard, group: Group, request: OffsetCommitRequest) -> OffsetCommitResponse:
    """`_store_offsets` partition by partition, each metadata checked exactly."""
    max_metadata = shard.config.offset_metadata_max_bytes
    now, expire = shard.now_ms, _expire_timestamp_ms(shard, request)
    group_id = group.group_id
    record_bytes = RECORD_OVERHEAD_BYTES + utf8_len(group_id)
    results: list[PartitionResult] = []
    keys: list[OffsetCommitKey] = []
    values: list[OffsetCommitValue] = []
    size = 0
    for topic, partition, offset, metadata, leader_epoch in request.partitions:
        metadata_bytes = utf8_len(metadata)
        if metadata_bytes > max_metadata:
            results.append(PartitionResult(topic, partition, Errors.OFFSET_METADATA_TOO_LARGE))
            continue
        size += record_bytes + utf8_len(topic) + metadata_bytes
        keys.append(_new(OffsetCommitKey, (group_id, topic, partition)))
        values.append(_new(OffsetCommitValue, (offset, leader_epoch, metadata, now, expire)))
        results.append(_new(PartitionResult, (topic, partition, Errors.NONE)))
    if size > shard.config.offsets_max_commit_bytes:
        return commit_error_response(request, Errors.INVALID_COMMIT_OFFSET_SIZE)
    shard.write_offsets(group, keys, values)
    return OffsetCommitResponse(tuple(results))


def _expire_timestamp_ms(shard: Shard, request: OffsetCommitRequest) -> int:
    return shard.now_ms + request.retention_time_ms if request.retention_time_ms >= 0 else NO_TIMESTAMP


# ------------------------------------------------------------- OffsetFetch


def handle_offset_fetch(shard: Shard, request: OffsetFetchRequest, token: Token) -> OffsetFetchResponse:
    consumer_group = shard.consumer_groups.get(request.group_id)
    if consumer_group is not None:
        error = consumer_offsets.fetch_error(consumer_group, request)
        if error is not None:
            return error_response(request, error)  # type: ignore[return-value]
    group = shard.groups.get(request.group_id)
    stored = group.offsets if group is not None and not group.is_(DEAD) else {}
    if request.partitions is None:
        found = [
            FetchedOffset(key.topic, key.partition, v.offset, v.leader_epoch, v.metadata)
            for key, v in stored.items()
        ]
        return OffsetFetchResponse(Errors.NONE, tuple(found))
    parts = []
    for topic, partition in request.partitions:
        v = stored.get((request.group_id, topic, partition))  # type: ignore[call-overload]
        if v is None:
            parts.append(FetchedOffset(topic, partition, INVALID_OFFSET, -1, ""))
        else:
            parts.append(FetchedOffset(topic, partition, v.offset, v.leader_epoch, v.metadata))
    return OffsetFetchResponse(Errors.NONE, tuple(parts))


# ------------------------------------------------------------ OffsetDelete


def handle_offset_delete(shard: Shard, request: OffsetDeleteRequest, token: Token) -> OffsetDeleteResponse:
    group = shard.groups.get(request.group_id)
    consumer_group = shard.consumer_groups.get(request.group_id)
    subscribed_to: Callable[[str], bool]
    if consumer_group is not None:
        # Kafka's ConsumerGroup.isSubscribedToTopic: by name or through a resolved regex.
        subscribed_to = consumer_group.subscribed_topic_names.__contains__
    elif group is None or group.is_(DEAD):
        return OffsetDeleteResponse(Errors.GROUP_ID_NOT_FOUND)
    elif group.is_(EMPTY):
        subscribed_to = _subscribed_to_nothing
    elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
        subscribed_to = group.is_subscribed_to
    else:
        return OffsetDeleteResponse(Errors.NON_EMPTY_GROUP)
    deletable = [tp for tp in request.partitions if not subscribed_to(tp[0])]
    subscribed = [tp for tp in request.partitions if subscribed_to(tp[0])]
    stored = group.offsets if group is not None else {}
    for topic, partition in deletable:
        key = OffsetCommitKey(request.group_id, topic, partition)
        if key in stored:
            shard.write_offset(key, None)
    results = [PartitionResult(t, p, Errors.GROUP_SUBSCRIBED_TO_TOPIC) for t, p in subscribed]
    results += [PartitionResult(t, p, Errors.NONE) for t, p in deletable]
    return OffsetDeleteResponse(Errors.NONE, tuple(results))


def _subscribed_to_nothing(topic: str) -> bool:
    return False


# -------------------------------------------------------------- expiration


def expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[OffsetCommitKey]:
    """KIP-211: which offsets of a group have expired (Kafka's removeExpiredOffsets)."""
    # The time retention counts from: when the group became Empty, or else
    # each offset's commit time (None).
    empty_since: int | None = None
    keep_topics: frozenset[str] = frozenset()
    if group.protocol_type is not None and group.is_(EMPTY):
        empty_since = group.state_timestamp_ms
    elif (
        group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.subscribed_topics is not None
        and group.is_(GroupState.STABLE)
    ):
        # Active consumers keep the offsets of the topics they subscribe to.
        keep_topics = group.subscribed_topics
    elif group.protocol_type is not None:
        return []
    expired = []
    for key, value in group.offsets.items():
        if key.topic in keep_topics:
            continue
        if value.expire_timestamp_ms != NO_TIMESTAMP:
            if now_ms >= value.expire_timestamp_ms:
                expired.append(key)
        elif now_ms - (value.commit_timestamp_ms if empty_since is None else empty_since) >= retention_ms:
            expired.append(key)
    return expired


def on_expire_offsets(shard: Shard, payload: Any = None) -> None:
    now = shard.now_ms
    retention = shard.config.offsets_retention_ms
    # Never a group this shard does not own: a copy admitted ahead of its switch, or a group
    # frozen for a handoff (its exported state is what its target gets).
    skip = shard.copies | set(shard.frozen_ids)
    for group in list(shard.groups.values()):
        if group.group_id not in skip:
            remove_expired(shard, group, now, retention)
    for consumer_group in list(shard.consumer_groups.values()):
        # Kafka's maybeDeleteGroup: an empty consumer group whose offsets are all gone is deleted.
        gone = not consumer_group.members and consumer_group.group_id not in shard.groups
        if gone and consumer_group.group_id not in skip:
            delete_consumer_group(shard, consumer_group)
    shard.timers.schedule(("expire-offsets",), now + shard.config.offsets_retention_check_interval_ms)


def remove_expired(shard: Shard, group: Group, now_ms: int, retention_ms: int) -> None:
    consumer_group = shard.consumer_groups.get(group.group_id)
    # A consumer group keeps the offsets of the topics it subscribes to (Kafka's cleanupExpiredOffsets).
    keep = consumer_group.subscribed_topic_names if consumer_group is not None else {}
    for key in expired_offsets(group, now_ms, retention_ms):
        if key.topic not in keep:
            shard.write_offset(key, None)
    if shard.groups.get(group.group_id) is group and group.is_(EMPTY) and not group.offsets:
        delete_group(shard, group)


def delete_group(shard: Shard, group: Group) -> None:
    """Tombstone every offset, then the group itself if it was ever stored."""
    for key in list(group.offsets):
        shard.write_offset(key, None)
    if group.generation_id > 0:
        shard.write(Record(GroupMetadataKey(group.group_id), None))
    elif shard.groups.get(group.group_id) is group:
        rebalance.forget_group(shard, group)
