"""Records of the offsets log, as plain values.

The core produces these and `replay` consumes them; `log/` encodes them. They
mirror Kafka's `__consumer_offsets` records: an offset commit keyed by
(group, topic, partition), a classic group's metadata keyed by group, and the
consumer group records of KIP-848 (Kafka's key versions 3-8 and 16, below). A
`Record` whose value is None is a tombstone.

Records are NamedTuples rather than frozen dataclasses (the house style for
requests and responses): they are created once per replayed record on the
failover path, and a tuple costs a fraction of a dataclass to build while
staying immutable and comparable by value.

Keys of different record types must never be equal, yet several have the
same fields (a group id; a group id and a member id): every key type but
`OffsetCommitKey` is made equal only to keys of its own type, with a hash of
its own (`_typed_key`), so a dict keyed by record key (load, compaction,
snapshots) keeps them apart. `OffsetCommitKey`, nearly every record of a log,
stays a plain tuple for speed: it is the only key of three fields.

The consumer group records follow Kafka's JSON schemas
(`group-coordinator/src/main/resources/common/message/ConsumerGroup*.json`) of
the Kafka 4.0 line: apache/kafka 1eb7644349cb (2024-10-25) for key versions
3-8 and the 4.0 schema of ConsumerGroupRegularExpression (16), which that
commit predates. ConsumerGroupPartitionMetadata (4) is kept as 4.0 uses it;
Kafka 4.1 (KIP-1101) replaced it by a `MetadataHash` in ConsumerGroupMetadata
and keeps the record only to tombstone it. Departures: the tagged fields added
after 4.0 (`MetadataHash`, `CreationTimeMs`, KIP-1251's `AssignmentEpochs`)
are not carried; a topic id is a `uuid.UUID`; lists are tuples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar
from uuid import UUID

NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1


class OffsetCommitKey(NamedTuple):
    group_id: str
    topic: str
    partition: int


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    # Set only when the commit carried an explicit retention time (Kafka's
    # OffsetCommit v2-v4); otherwise KIP-211 retention decides expiry.
    expire_timestamp_ms: int = NO_TIMESTAMP


_Key = TypeVar("_Key", bound=tuple[Any, ...])


def _typed_key(cls: type[_Key]) -> type[_Key]:
    """Make `cls` equal only to its own instances, with a hash of its own (see the module docstring)."""

    def __eq__(self: tuple[Any, ...], other: object) -> bool:
        return type(other) is cls and tuple.__eq__(self, other)

    def __ne__(self: tuple[Any, ...], other: object) -> bool:
        return not __eq__(self, other)

    def __hash__(self: tuple[Any, ...]) -> int:
        return hash((cls, *self))

    methods: dict[str, Callable[..., Any]] = {"__eq__": __eq__, "__ne__": __ne__, "__hash__": __hash__}
    for name, method in methods.items():
        setattr(cls, name, method)
    return cls


@_typed_key
class GroupMetadataKey(NamedTuple):
    group_id: str


class MemberRecord(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


# ------------------------------------------------ service state (raygroups' own)


@_typed_key
class ServiceStateKey(NamedTuple):
    """One entry of the service-wide state kept in offsets partition 0's log
    (`coordinator/service_state.py`): `kind` names its owner's table ("topic",
    "end-sample", ...), `name` the entry within it."""

    kind: str
    name: str

    @property
    def group_id(self) -> str:
        # The runtime keys its read barriers by a record's group: service state is one of
        # its own (a client's group of the same name would only wait for its writes too).
        return SERVICE_STATE_GROUP


SERVICE_STATE_GROUP = "\x00service-state"


class ServiceStateValue(NamedTuple):
    data: bytes  # encoded and validated by the entry's owner; opaque to the core and the log


# ------------------------------------------------ consumer groups (KIP-848)


class TopicPartitions(NamedTuple):
    """One topic's partitions in an assignment (Kafka's `TopicPartitions` struct)."""

    topic_id: UUID
    partitions: tuple[int, ...]


@_typed_key
class ConsumerGroupMetadataKey(NamedTuple):
    """Key version 3."""

    group_id: str


class ConsumerGroupMetadataValue(NamedTuple):
    epoch: int


class PartitionRacks(NamedTuple):
    partition: int
    racks: tuple[str, ...]


class TopicMetadataRecord(NamedTuple):
    """One subscribed topic of ConsumerGroupPartitionMetadata."""

    topic_id: UUID
    topic_name: str
    num_partitions: int
    # Kafka: "Deprecated: this field is not used after 4.0"; written empty.
    partition_metadata: tuple[PartitionRacks, ...] = ()


@_typed_key
class ConsumerGroupPartitionMetadataKey(NamedTuple):
    """Key version 4."""

    group_id: str


class ConsumerGroupPartitionMetadataValue(NamedTuple):
    topics: tuple[TopicMetadataRecord, ...]


class ClassicProtocol(NamedTuple):
    name: str
    metadata: bytes


class ClassicMemberMetadata(NamedTuple):
    """Set for a member of a consumer group that speaks the classic protocol."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@_typed_key
class ConsumerGroupMemberMetadataKey(NamedTuple):
    """Key version 5."""

    group_id: str
    member_id: str


class ConsumerGroupMemberMetadataValue(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None


@_typed_key
class ConsumerGroupTargetAssignmentMetadataKey(NamedTuple):
    """Key version 6."""

    group_id: str


class ConsumerGroupTargetAssignmentMetadataValue(NamedTuple):
    assignment_epoch: int


@_typed_key
class ConsumerGroupTargetAssignmentMemberKey(NamedTuple):
    """Key version 7."""

    group_id: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(NamedTuple):
    topic_partitions: tuple[TopicPartitions, ...]


@_typed_key
class ConsumerGroupCurrentMemberAssignmentKey(NamedTuple):
    """Key version 8."""

    group_id: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    # Kafka's MemberState byte: 0 stable, 1 unrevoked, 2 unreleased partitions, 127 unknown.
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


@_typed_key
class ConsumerGroupRegularExpressionKey(NamedTuple):
    """Key version 16."""

    group_id: str
    regular_expression: str


class ConsumerGroupRegularExpressionValue(NamedTuple):
    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


ConsumerGroupRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerGroupRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)
CONSUMER_GROUP_KEY_TYPES: tuple[type[ConsumerGroupRecordKey], ...] = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)

RecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerGroupRecordKey | ServiceStateKey
RecordValue = OffsetCommitValue | GroupMetadataValue | ConsumerGroupRecordValue | ServiceStateValue | None


class Record(NamedTuple):
    key: RecordKey
    value: RecordValue

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


def offset_record(group_id: str, topic: str, partition: int, value: OffsetCommitValue | None) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), value)


def group_record(group_id: str, value: GroupMetadataValue | None) -> Record:
    return Record(GroupMetadataKey(group_id), value)
