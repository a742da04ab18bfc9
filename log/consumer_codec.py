"""Runs of consumer group records (KIP-848): Kafka's key versions 3-8 and 16.

Owns the run layout of the consumer group records documented in FORMAT.md
("Consumer group records"); `log/codec.py` registers these encoders and
decoders beside its own. Rules:
- A run is `[key_version, value_version, count, key columns..., rows]`:
  one dictionary-encoded string column per key field, always in array form,
  then one array of `count` rows, a row being one value as an array. A
  tombstone run (value version nil) has no rows.
- Every value is at value version 0. A topic id is 16 bytes (msgpack bin),
  the UUID's big-endian bytes, as Kafka writes a `uuid`.
- These records are few (a group's heartbeats, not its commits), so the
  decoder checks every field's type and turns any mismatch into
  `PayloadError`: a record it returns is well typed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from uuid import UUID

from coordinator.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionRacks,
    Record,
    RecordKey,
    RecordValue,
    TopicMetadataRecord,
    TopicPartitions,
)
from log.columns import PayloadError, array, string_column, strings

KEY_VERSION_CONSUMER_GROUP_METADATA = 3
KEY_VERSION_CONSUMER_GROUP_PARTITION_METADATA = 4
KEY_VERSION_CONSUMER_GROUP_MEMBER_METADATA = 5
KEY_VERSION_CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
KEY_VERSION_CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
KEY_VERSION_CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
KEY_VERSION_CONSUMER_GROUP_REGULAR_EXPRESSION = 16
VALUE_VERSION_CONSUMER_GROUP = 0

Encoder = Callable[[Sequence[Record]], list[Any]]
Decoder = Callable[[list[Any], int], list[Record]]
_T = TypeVar("_T")

# ------------------------------------------------------- field checks


def _int(value: Any) -> int:
    if type(value) is not int:
        raise PayloadError(f"expected an int, got {type(value).__name__}")
    return value


def _str(value: Any) -> str:
    if type(value) is not str:
        raise PayloadError(f"expected a string, got {type(value).__name__}")
    return value


def _optional_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _bytes(value: Any) -> bytes:
    if type(value) is not bytes:
        raise PayloadError(f"expected bytes, got {type(value).__name__}")
    return value


def _uuid(value: Any) -> UUID:
    if type(value) is not bytes or len(value) != 16:
        raise PayloadError("a topic id is not 16 bytes")
    return UUID(bytes=value)


def _fields(row: Any, count: int) -> list[Any]:
    if type(row) is not list or len(row) != count:
        raise PayloadError(f"expected an array of {count} fields")
    return row


def _each(values: Any, read: Callable[[Any], _T]) -> tuple[_T, ...]:
    if type(values) is not list:
        raise PayloadError("expected an array")
    return tuple(map(read, values))


# --------------------------------------------------------------- values


def _topic_partitions_row(value: TopicPartitions) -> list[Any]:
    return [value.topic_id.bytes, list(value.partitions)]


def _topic_partitions(row: Any) -> TopicPartitions:
    topic_id, partitions = _fields(row, 2)
    return TopicPartitions(_uuid(topic_id), _each(partitions, _int))


def _topic_metadata_row(topic: TopicMetadataRecord) -> list[Any]:
    racks = [[entry.partition, list(entry.racks)] for entry in topic.partition_metadata]
    return [topic.topic_id.bytes, topic.topic_name, topic.num_partitions, racks]


def _partition_racks(row: Any) -> PartitionRacks:
    partition, racks = _fields(row, 2)
    return PartitionRacks(_int(partition), _each(racks, _str))


def _topic_metadata(row: Any) -> TopicMetadataRecord:
    topic_id, name, count, racks = _fields(row, 4)
    return TopicMetadataRecord(_uuid(topic_id), _str(name), _int(count), _each(racks, _partition_racks))


def _classic_row(classic: ClassicMemberMetadata | None) -> list[Any] | None:
    if classic is None:
        return None
    protocols = [[protocol.name, protocol.metadata] for protocol in classic.supported_protocols]
    return [classic.session_timeout_ms, protocols]


def _classic_protocol(row: Any) -> ClassicProtocol:
    name, metadata = _fields(row, 2)
    return ClassicProtocol(_str(name), _bytes(metadata))


def _classic(row: Any) -> ClassicMemberMetadata | None:
    if row is None:
        return None
    session_timeout_ms, protocols = _fields(row, 2)
    return ClassicMemberMetadata(_int(session_timeout_ms), _each(protocols, _classic_protocol))


def _member_metadata_row(value: ConsumerGroupMemberMetadataValue) -> list[Any]:
    return [
        value.instance_id, value.rack_id, value.client_id, value.client_host,
        list(value.subscribed_topic_names), value.subscribed_topic_regex, value.rebalance_timeout_ms,
        value.server_assignor, _classic_row(value.classic_member_metadata),
    ]


def _member_metadata(row: Any) -> ConsumerGroupMemberMetadataValue:
    instance, rack, client, host, names, regex, timeout, assignor, classic = _fields(row, 9)
    return ConsumerGroupMemberMetadataValue(
        _optional_str(instance), _optional_str(rack), _str(client), _str(host), _each(names, _str),
        _optional_str(regex), _int(timeout), _optional_str(assignor), _classic(classic),
    )


def _current_assignment_row(value: ConsumerGroupCurrentMemberAssignmentValue) -> list[Any]:
    return [
        value.member_epoch, value.previous_member_epoch, value.state,
        list(map(_topic_partitions_row, value.assigned_partitions)),
        list(map(_topic_partitions_row, value.partitions_pending_revocation)),
    ]


def _current_assignment(row: Any) -> ConsumerGroupCurrentMemberAssignmentValue:
    epoch, previous, state, assigned, pending = _fields(row, 5)
    return ConsumerGroupCurrentMemberAssignmentValue(
        _int(epoch), _int(previous), _int(state),
        _each(assigned, _topic_partitions), _each(pending, _topic_partitions),
    )


def _regex(row: Any) -> ConsumerGroupRegularExpressionValue:
    topics, version, timestamp_ms = _fields(row, 3)
    return ConsumerGroupRegularExpressionValue(_each(topics, _str), _int(version), _int(timestamp_ms))


def _one_int(row: Any) -> int:
    (value,) = _fields(row, 1)
    return _int(value)


# ----------------------------------------------------------------- runs


class _Kind:
    """One record type: its key version, key type and value row mapping."""

    def __init__(
        self,
        key_version: int,
        key_type: Callable[..., RecordKey],
        key_fields: int,
        row_of: Callable[[Any], list[Any]],
        value_of: Callable[[Any], RecordValue],
    ) -> None:
        self.key_version = key_version
        self.key_type = key_type
        self.key_fields = key_fields
        self.row_of = row_of
        self.value_of = value_of

    def encode(self, run: Sequence[Record]) -> list[Any]:
        keys = [record.key for record in run]
        columns = [strings([key[i] for key in keys], one_index=False) for i in range(self.key_fields)]
        rows = [self.row_of(record.value) for record in run]
        return [self.key_version, VALUE_VERSION_CONSUMER_GROUP, len(run), *columns, rows]

    def encode_tombstones(self, run: Sequence[Record]) -> list[Any]:
        keys = [record.key for record in run]
        columns = [strings([key[i] for key in keys], one_index=False) for i in range(self.key_fields)]
        return [self.key_version, None, len(run), *columns]

    def decode(self, run: list[Any], count: int) -> list[Record]:
        if len(run) != 4 + self.key_fields:
            raise PayloadError(f"key version {self.key_version} run of {len(run)} fields")
        keys = self._keys(run, count)
        values = [self.value_of(row) for row in array(run[3 + self.key_fields], count)]
        return [Record(key, value) for key, value in zip(keys, values)]

    def decode_tombstones(self, run: list[Any], count: int) -> list[Record]:
        if len(run) != 3 + self.key_fields:
            raise PayloadError(f"key version {self.key_version} tombstone run of {len(run)} fields")
        return [Record(key, None) for key in self._keys(run, count)]

    def _keys(self, run: list[Any], count: int) -> list[RecordKey]:
        columns = []
        for column in run[3 : 3 + self.key_fields]:
            table = column[0]
            if type(table) is not list or any(type(s) is not str for s in table):
                raise PayloadError(f"key version {self.key_version}: a key string table holds a non-string")
            columns.append(string_column(column, count, one_index=False))
        return [self.key_type(*fields) for fields in zip(*columns)]


_KINDS: dict[type, _Kind] = {
    ConsumerGroupMetadataKey: _Kind(
        KEY_VERSION_CONSUMER_GROUP_METADATA, ConsumerGroupMetadataKey, 1,
        lambda value: [value.epoch], lambda row: ConsumerGroupMetadataValue(_one_int(row)),
    ),
    ConsumerGroupPartitionMetadataKey: _Kind(
        KEY_VERSION_CONSUMER_GROUP_PARTITION_METADATA, ConsumerGroupPartitionMetadataKey, 1,
        lambda value: [list(map(_topic_metadata_row, value.topics))],
        lambda row: ConsumerGroupPartitionMetadataValue(_each(_fields(row, 1)[0], _topic_metadata)),
    ),
    ConsumerGroupMemberMetadataKey: _Kind(
        KEY_VERSION_CONSUMER_GROUP_MEMBER_METADATA, ConsumerGroupMemberMetadataKey, 2,
        _member_metadata_row, _member_metadata,
    ),
    ConsumerGroupTargetAssignmentMetadataKey: _Kind(
        KEY_VERSION_CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, ConsumerGroupTargetAssignmentMetadataKey, 1,
        lambda value: [value.assignment_epoch],
        lambda row: ConsumerGroupTargetAssignmentMetadataValue(_one_int(row)),
    ),
    ConsumerGroupTargetAssignmentMemberKey: _Kind(
        KEY_VERSION_CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, ConsumerGroupTargetAssignmentMemberKey, 2,
        lambda value: [list(map(_topic_partitions_row, value.topic_partitions))],
        lambda row: ConsumerGroupTargetAssignmentMemberValue(_each(_fields(row, 1)[0], _topic_partitions)),
    ),
    ConsumerGroupCurrentMemberAssignmentKey: _Kind(
        KEY_VERSION_CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, ConsumerGroupCurrentMemberAssignmentKey, 2,
        _current_assignment_row, _current_assignment,
    ),
    ConsumerGroupRegularExpressionKey: _Kind(
        KEY_VERSION_CONSUMER_GROUP_REGULAR_EXPRESSION, ConsumerGroupRegularExpressionKey, 2,
        lambda value: [list(value.topics), value.version, value.timestamp_ms], _regex,
    ),
}

CONSUMER_GROUP_KEY_VERSIONS = frozenset(kind.key_version for kind in _KINDS.values())
RUN_ENCODERS: dict[tuple[type, bool], Encoder] = {
    (key_type, tombstone): kind.encode_tombstones if tombstone else kind.encode
    for key_type, kind in _KINDS.items()
    for tombstone in (False, True)
}
RUN_DECODERS: dict[tuple[int, int | None], Decoder] = {
    (kind.key_version, value_version): kind.decode if value_version is not None else kind.decode_tombstones
    for kind in _KINDS.values()
    for value_version in (VALUE_VERSION_CONSUMER_GROUP, None)
}
