"""Records of the offsets log, as plain values.

The core produces these and `replay` consumes them; `log/` encodes them. They
mirror Kafka's `__consumer_offsets` records: an offset commit keyed by
(group, topic, partition) and a group metadata record keyed by group. A
`Record` whose value is None is a tombstone.

Records are NamedTuples rather than frozen dataclasses (the house style for
requests and responses): they are created once per replayed record on the
failover path, and a tuple costs a fraction of a dataclass to build while
staying immutable and comparable by value.
"""

from __future__ import annotations

from typing import NamedTuple

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


RecordKey = OffsetCommitKey | GroupMetadataKey
RecordValue = OffsetCommitValue | GroupMetadataValue | None


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
