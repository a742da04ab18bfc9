"""Shared pieces of the log tests: record builders, hypothesis strategies and
the reference model of replay (last record per key wins, a tombstone deletes).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from uuid import UUID

from hypothesis import strategies as st

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
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionRacks,
    Record,
    RecordKey,
    RecordValue,
    TopicMetadataRecord,
    TopicPartitions,
)

State = dict[RecordKey, RecordValue]
EPOCH = 1
NOW_MS = 1_700_000_000_000


def commit(group: str, topic: str, partition: int, offset: int, metadata: str = "") -> Record:
    value = OffsetCommitValue(offset, 3, metadata, NOW_MS + offset)
    return Record(OffsetCommitKey(group, topic, partition), value)


def offset_tombstone(group: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group, topic, partition), None)


def member(member_id: str, instance_id: str | None = None) -> MemberRecord:
    return MemberRecord(
        member_id, instance_id, "client", "/10.0.0.1", 60_000, 10_000, b"\x00\x01sub", b"\x00\x01as"
    )


def group(group_id: str, generation: int = 1, members: int = 2) -> Record:
    value = GroupMetadataValue(
        "consumer", generation, "range", "m0" if members else None, NOW_MS,
        tuple(member(f"m{i}", f"i{i}" if i % 2 else None) for i in range(members)),
    )
    return Record(GroupMetadataKey(group_id), value)


def group_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group_id), None)


def consumer_group_kinds(group_id: str, epoch: int) -> list[Record]:
    """One record of each of the seven consumer group record kinds, and their tombstones."""
    tp = TopicPartitions(UUID(int=7), (0, 1))
    member_value = ConsumerGroupMemberMetadataValue(
        None, "rack", "c", "/h", ("orders",), None, 60_000, "uniform"
    )
    live = [
        Record(ConsumerGroupMemberMetadataKey(group_id, "m1"), member_value),
        Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch)),
        Record(
            ConsumerGroupPartitionMetadataKey(group_id),
            ConsumerGroupPartitionMetadataValue((TopicMetadataRecord(UUID(int=7), "orders", 2),)),
        ),
        Record(
            ConsumerGroupTargetAssignmentMemberKey(group_id, "m1"),
            ConsumerGroupTargetAssignmentMemberValue((tp,)),
        ),
        Record(
            ConsumerGroupTargetAssignmentMetadataKey(group_id),
            ConsumerGroupTargetAssignmentMetadataValue(epoch),
        ),
        Record(
            ConsumerGroupCurrentMemberAssignmentKey(group_id, "m1"),
            ConsumerGroupCurrentMemberAssignmentValue(epoch, epoch - 1, 0, (tp,), ()),
        ),
        Record(
            ConsumerGroupRegularExpressionKey(group_id, "ord.*"),
            ConsumerGroupRegularExpressionValue(("orders",), 1, NOW_MS),
        ),
    ]
    return live + [Record(record.key, None) for record in reversed(live)]


def model(records: Iterable[Record]) -> State:
    """The state replay must produce: key -> latest value, tombstones delete."""
    state: State = {}
    for key, value in records:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def snapshot_files(directory: str) -> dict[str, bytes]:
    """Name -> content of every file: to prove a reader changed nothing."""
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as file:
            out[name] = file.read()
    return out


# ---------------------------------------------------------------- strategies

small_text = st.text(alphabet="abcxyz-é☃", max_size=6)
group_ids = st.sampled_from(["g0", "g1", "g2", "grüppe"])
topics = st.sampled_from(["t0", "orders"])
partitions = st.integers(0, 2)
ints64 = st.integers(-(2**63), 2**63 - 1)

offset_values = st.builds(
    OffsetCommitValue,
    offset=ints64,
    leader_epoch=st.integers(-1, 2**31 - 1),
    metadata=small_text,
    commit_timestamp_ms=ints64,
    expire_timestamp_ms=st.integers(-1, 2**50),
)
member_records = st.builds(
    MemberRecord,
    member_id=small_text,
    group_instance_id=st.none() | small_text,
    client_id=small_text,
    client_host=small_text,
    rebalance_timeout_ms=st.integers(0, 2**31 - 1),
    session_timeout_ms=st.integers(0, 2**31 - 1),
    subscription=st.binary(max_size=12),
    assignment=st.binary(max_size=12),
)
group_values = st.builds(
    GroupMetadataValue,
    protocol_type=small_text,
    generation=st.integers(0, 2**31 - 1),
    protocol=st.none() | small_text,
    leader=st.none() | small_text,
    current_state_timestamp_ms=ints64,
    members=st.lists(member_records, max_size=3).map(tuple),
)
offset_records = st.builds(
    Record,
    st.builds(OffsetCommitKey, group_ids, topics, partitions),
    st.none() | offset_values,
)
group_records = st.builds(Record, st.builds(GroupMetadataKey, group_ids), st.none() | group_values)

# Consumer group records (KIP-848): few group and member ids, so keys repeat and supersede.
member_ids = st.sampled_from(["m0", "m1", "mémbre"])
topic_ids = st.uuids()
int32s = st.integers(-(2**31), 2**31 - 1)
topic_partitions = st.builds(
    TopicPartitions, topic_ids, st.lists(st.integers(0, 2**31 - 1), max_size=4).map(tuple)
)
assignments = st.lists(topic_partitions, max_size=3).map(tuple)
consumer_group_values = st.builds(ConsumerGroupMetadataValue, int32s)
partition_metadata_values = st.builds(
    ConsumerGroupPartitionMetadataValue,
    st.lists(
        st.builds(
            TopicMetadataRecord, topic_ids, small_text, st.integers(0, 2**31 - 1),
            st.lists(
                st.builds(PartitionRacks, st.integers(0, 9), st.lists(small_text, max_size=2).map(tuple)),
                max_size=2,
            ).map(tuple),
        ),
        max_size=3,
    ).map(tuple),
)
classic_metadata = st.builds(
    ClassicMemberMetadata,
    int32s,
    st.lists(st.builds(ClassicProtocol, small_text, st.binary(max_size=8)), max_size=2).map(tuple),
)
member_metadata_values = st.builds(
    ConsumerGroupMemberMetadataValue,
    instance_id=st.none() | small_text,
    rack_id=st.none() | small_text,
    client_id=small_text,
    client_host=small_text,
    subscribed_topic_names=st.lists(small_text, max_size=3).map(tuple),
    subscribed_topic_regex=st.none() | small_text,
    rebalance_timeout_ms=int32s,
    server_assignor=st.none() | st.sampled_from(["uniform", "range"]),
    classic_member_metadata=st.none() | classic_metadata,
)
current_assignment_values = st.builds(
    ConsumerGroupCurrentMemberAssignmentValue,
    int32s, int32s, st.sampled_from([0, 1, 2, 127]), assignments, assignments,
)
regex_values = st.builds(
    ConsumerGroupRegularExpressionValue, st.lists(small_text, max_size=3).map(tuple), ints64, ints64
)
consumer_group_records = st.one_of(
    st.builds(Record, st.builds(ConsumerGroupMetadataKey, group_ids), st.none() | consumer_group_values),
    st.builds(
        Record, st.builds(ConsumerGroupPartitionMetadataKey, group_ids), st.none() | partition_metadata_values
    ),
    st.builds(
        Record,
        st.builds(ConsumerGroupMemberMetadataKey, group_ids, member_ids),
        st.none() | member_metadata_values,
    ),
    st.builds(
        Record,
        st.builds(ConsumerGroupTargetAssignmentMetadataKey, group_ids),
        st.none() | st.builds(ConsumerGroupTargetAssignmentMetadataValue, int32s),
    ),
    st.builds(
        Record,
        st.builds(ConsumerGroupTargetAssignmentMemberKey, group_ids, member_ids),
        st.none() | st.builds(ConsumerGroupTargetAssignmentMemberValue, assignments),
    ),
    st.builds(
        Record,
        st.builds(ConsumerGroupCurrentMemberAssignmentKey, group_ids, member_ids),
        st.none() | current_assignment_values,
    ),
    st.builds(
        Record,
        st.builds(ConsumerGroupRegularExpressionKey, group_ids, st.sampled_from(["t.*", "m0", "[a-z]+"])),
        st.none() | regex_values,
    ),
)
records = st.one_of(offset_records, offset_records, offset_records, group_records)
batches = st.lists(records, min_size=1, max_size=8)
# Every kind the log holds, consumer group records included. `batches` stays without them for
# the tests that load into a Shard, which does not replay consumer group records yet.
log_records = st.one_of(records, records, consumer_group_records)
log_batches = st.lists(log_records, min_size=1, max_size=8)
