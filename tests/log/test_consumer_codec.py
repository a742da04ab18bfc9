"""Consumer group records in the codec: round trips, run layout, old logs, fuzzed runs."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgpack
import pytest
from hypothesis import given, settings
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
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionRacks,
    Record,
    TopicMetadataRecord,
    TopicPartitions,
)
from log.codec import PayloadError, decode_load_runs, decode_payload, decode_records, encode_payload
from log.consumer_codec import CONSUMER_GROUP_KEY_VERSIONS
from log.errors import UnsupportedVersionError

from tests.log.helpers import commit, consumer_group_records, group

FOO = UUID("0f3e5a9c-1d2b-4c6d-8e7f-001122334455")
BAR = UUID(int=7)

SAMPLES = [
    Record(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(12)),
    Record(
        ConsumerGroupPartitionMetadataKey("g"),
        ConsumerGroupPartitionMetadataValue(
            (
                TopicMetadataRecord(FOO, "foo", 6),
                TopicMetadataRecord(BAR, "bar", 1, (PartitionRacks(0, ("a", "b")),)),
            )
        ),
    ),
    Record(
        ConsumerGroupMemberMetadataKey("g", "m1"),
        ConsumerGroupMemberMetadataValue(
            "instance-1", "rack-a", "client", "/10.0.0.1", ("bar", "foo"), None, 300_000, "range"
        ),
    ),
    Record(
        ConsumerGroupMemberMetadataKey("g", "m2"),
        ConsumerGroupMemberMetadataValue(
            None, None, "c", "h", (), "foo.*", -1, None,
            ClassicMemberMetadata(45_000, (ClassicProtocol("range", b"\x00\x01"),)),
        ),
    ),
    Record(ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(12)),
    Record(
        ConsumerGroupTargetAssignmentMemberKey("g", "m1"),
        ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(FOO, (0, 1, 2)), TopicPartitions(BAR, ()))),
    ),
    Record(
        ConsumerGroupCurrentMemberAssignmentKey("g", "m1"),
        ConsumerGroupCurrentMemberAssignmentValue(
            12, 11, 1, (TopicPartitions(FOO, (0, 1)),), (TopicPartitions(FOO, (5,)),)
        ),
    ),
    Record(
        ConsumerGroupRegularExpressionKey("g", "foo.*"),
        ConsumerGroupRegularExpressionValue(("foo", "foo-2"), 7, 1_700_000_000_000),
    ),
]
IDS = ["group-epoch", "partition-metadata", "member", "classic-member", "target-epoch", "target-member",
       "current-assignment", "regex"]


@pytest.mark.parametrize("record", SAMPLES, ids=IDS)
def test_every_consumer_group_record_round_trips(record: Record) -> None:
    tombstone = Record(record.key, None)
    decoded, decoded_tombstone = decode_records(encode_payload([record, tombstone]))

    assert (decoded, decoded_tombstone) == (record, tombstone)
    assert type(decoded.key) is type(record.key) and type(decoded.value) is type(record.value)
    assert decode_load_runs(encode_payload([record]))[0].records == [record]


def test_runs_carry_kafkas_key_versions_and_value_version_0() -> None:
    body = msgpack.unpackb(encode_payload(SAMPLES + [Record(s.key, None) for s in SAMPLES]))

    versions = [(run[0], run[1]) for run in body[1:]]
    kafka = [3, 4, 5, 6, 7, 8, 16]
    assert versions == [(v, 0) for v in kafka[:2]] + [(5, 0)] + [(v, 0) for v in kafka[3:]] + [
        (v, None) for v in kafka[:2]] + [(5, None)] + [(v, None) for v in kafka[3:]]
    assert CONSUMER_GROUP_KEY_VERSIONS == set(kafka)


def test_run_layout_is_the_documented_one() -> None:
    second = Record(ConsumerGroupTargetAssignmentMemberKey("g", "m2"), SAMPLES[5].value)
    body = msgpack.unpackb(encode_payload([SAMPLES[5], second]))

    (run,) = body[1:]
    assert run[:5] == [7, 0, 2, [["g"], [0, 0]], [["m1", "m2"], [0, 1]]]
    assert run[5][0] == [[[FOO.bytes, [0, 1, 2]], [BAR.bytes, []]]], "a row per value, its fields in order"
    assert msgpack.unpackb(encode_payload([Record(SAMPLES[0].key, None)]))[1] == [3, None, 1, [["g"], [0]]]


def test_consumer_records_mix_with_the_classic_kinds_in_order() -> None:
    records = [commit("g", "t", 0, 1), SAMPLES[0], group("h"), SAMPLES[6], Record(SAMPLES[6].key, None),
               commit("g", "t", 1, 2)]

    assert decode_records(encode_payload(records)) == records
    assert decode_payload(encode_payload(records, [0, 2, 3, 9, 10, 11])).record_deltas == [0, 2, 3, 9, 10, 11]


def test_a_log_written_before_consumer_groups_decodes_unchanged() -> None:
    # A payload as the codec wrote it before key versions 3-8 and 16 existed: one offset and one group run.
    old = msgpack.packb([None, [1, 0, 1, [["g"], 0], [["t"], 0], [0], 5, 3, [[""], 0], 10, -1],
                         [2, None, 1, [["g"], [0]]]])

    commit_value = OffsetCommitValue(5, 3, "", 10)
    want = [Record(OffsetCommitKey("g", "t", 0), commit_value), Record(group("g").key, None)]
    assert decode_records(old) == want


def test_an_unknown_value_version_of_a_consumer_record_is_refused() -> None:
    body = msgpack.unpackb(encode_payload([SAMPLES[0]]))
    body[1][1] = 1

    with pytest.raises(UnsupportedVersionError):
        decode_records(msgpack.packb(body))


@pytest.mark.parametrize(
    "run",
    [
        [3, 0, 1, [["g"], [0]], [[1, 2]]],  # a row with two epochs
        [3, 0, 1, [["g"], [0]], [["12"]]],  # an epoch that is a string
        [3, 0, 1, [[5], [0]], [[12]]],  # a group id that is an int
        [3, 0, 1, [["g"], 0], [[12]]],  # a one-index key column: not allowed here
        [3, 0, 2, [["g"], [0, 0]], [[12]]],  # fewer rows than the count
        [3, None, 1, [["g"], [0]], [[12]]],  # a tombstone run with rows
        [5, 0, 1, [["g"], [0]], [[None, None, "c", "h", [], None, -1, None, None]]],  # no member column
        [7, 0, 1, [["g"], [0]], [["m"], [0]], [[[b"short", [0]]]]],  # a topic id of 5 bytes
        [7, 0, 1, [["g"], [0]], [["m"], [0]], [[[FOO.bytes, [0, "1"]]]]],  # a partition that is a string
        [8, 0, 1, [["g"], [0]], [["m"], [0]], [[1, 0, 0, {}, []]]],  # an assignment that is a map
        [16, 0, 1, [["g"], [0]], [["r"], [0]], [[["t"], 1.5, 0]]],  # a float version
        [4, 0, 1, [["g"], [0]], [[[[FOO.bytes, "foo", 1, [[0, ["r", 1]]]]]]]],  # a rack that is an int
    ],
)
def test_malformed_consumer_runs_are_payload_errors(run: list[Any]) -> None:
    with pytest.raises(PayloadError):
        decode_payload(msgpack.packb([None, run]))
    with pytest.raises(PayloadError):
        decode_records(msgpack.packb([None, run]))


# Anything msgpack can carry, to put where a run's fields go.
msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=5) | st.binary(max_size=17),
    lambda children: st.lists(children, max_size=4),
    max_leaves=12,
)


@given(st.lists(consumer_group_records, min_size=1, max_size=6), st.data())
@settings(max_examples=300, deadline=None)
def test_fuzzed_consumer_runs_decode_or_raise_payload_errors(
    records: list[Record], data: st.DataObject
) -> None:
    body = msgpack.unpackb(encode_payload(records))
    run = data.draw(st.sampled_from(body[1:]), label="run")
    path = [data.draw(st.integers(3, len(run) - 1), label="field")]
    target: Any = run
    while type(target[path[-1]]) is list and target[path[-1]] and data.draw(st.booleans(), label="deeper"):
        target = target[path[-1]]
        path.append(data.draw(st.integers(0, len(target) - 1), label="index"))
    target[path[-1]] = data.draw(msgpack_values, label="garbage")
    try:
        decoded = decode_records(msgpack.packb(body))
    except PayloadError:
        return
    # Whatever decodes is well typed: it encodes again to the same records.
    assert decode_records(encode_payload(decoded)) == decoded
