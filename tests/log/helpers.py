"""Shared pieces of the log tests: record builders, hypothesis strategies and
the reference model of replay (last record per key wins, a tombstone deletes).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from hypothesis import strategies as st

from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordKey,
    RecordValue,
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
records = st.one_of(offset_records, offset_records, offset_records, group_records)
batches = st.lists(records, min_size=1, max_size=8)
