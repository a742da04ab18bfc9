"""Record codec: round trips, key/value versions, and fuzzed payloads."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from log.codec import (
    KEY_VERSION_OFFSET_COMMIT,
    PayloadError,
    decode_payload,
    decode_records,
    encode_payload,
)
from log.errors import UnsupportedVersionError

from tests.log.helpers import commit, group, group_tombstone, log_batches, offset_tombstone


@pytest.mark.parametrize(
    "record",
    [
        commit("g", "t", 0, 42),
        commit("g", "t", 1, 2**62, metadata="meta ☃"),
        Record(OffsetCommitKey("g", "t", 7), OffsetCommitValue(5, -1, "", 1, expire_timestamp_ms=99)),
        offset_tombstone("g", "t", 0),
        group("g", generation=3, members=3),
        group("g", generation=0, members=0),
        group_tombstone("g"),
    ],
    ids=["commit", "commit-meta", "commit-expire", "offset-tombstone", "group", "group-empty", "group-tomb"],
)
def test_every_record_type_round_trips(record: Record) -> None:
    (decoded,) = decode_records(encode_payload([record]))

    assert decoded == record
    assert type(decoded) is Record
    assert type(decoded.key) is type(record.key)
    assert decoded.value is None or type(decoded.value) is type(record.value)


def test_members_come_back_as_member_records_with_bytes() -> None:
    (decoded,) = decode_records(encode_payload([group("g", members=2)]))

    assert decoded.value is not None
    assert all(type(m).__name__ == "MemberRecord" for m in decoded.value.members)  # type: ignore[union-attr]
    assert decoded.value.members[0].subscription == b"\x00\x01sub"  # type: ignore[union-attr]


def test_offset_commits_are_written_with_key_version_1_and_value_version_0() -> None:
    body = msgpack.unpackb(encode_payload([commit("g", "t", 0, 1)]))

    assert body[0] is None
    assert body[1][:3] == [KEY_VERSION_OFFSET_COMMIT, 0, 1]


def test_mixed_batch_keeps_order_across_runs() -> None:
    records = [commit("g", "t", 0, 1), commit("g", "t", 1, 2), group("g"), offset_tombstone("g", "t", 0),
               group_tombstone("g"), commit("h", "t", 0, 3)]

    assert decode_records(encode_payload(records)) == records
    assert len(msgpack.unpackb(encode_payload(records))) == 1 + 5


def test_legacy_key_version_0_decodes_as_an_offset_commit() -> None:
    body = msgpack.unpackb(encode_payload([commit("g", "t", 4, 9), offset_tombstone("g", "u", 1)]))
    body[1][0] = 0
    body[2][0] = 0

    assert decode_records(msgpack.packb(body)) == [commit("g", "t", 4, 9), offset_tombstone("g", "u", 1)]


def test_unknown_key_version_is_skipped_and_counted() -> None:
    body = msgpack.unpackb(encode_payload([commit("g", "t", 0, 1)]))
    # A key version from the future (Kafka's 11 = share group target assignment) between two known runs.
    body.insert(1, [11, 0, 2, ["whatever", {"shape": 1}], [1, 2]])
    body.append(msgpack.unpackb(encode_payload([group_tombstone("g")]))[1])
    payload = msgpack.packb(body)

    assert decode_records(payload) == [commit("g", "t", 0, 1), group_tombstone("g")]
    decoded = decode_payload(payload)
    assert decoded.skipped == 2
    assert decoded.record_deltas == [2, 3]


def test_known_key_with_unknown_value_version_is_refused_not_skipped() -> None:
    body = msgpack.unpackb(encode_payload([commit("g", "t", 0, 1)]))
    body[1][1] = 9

    with pytest.raises(UnsupportedVersionError):
        decode_records(msgpack.packb(body))


def test_offset_deltas_round_trip() -> None:
    records = [commit("g", "t", 0, 1), group("g")]

    decoded = decode_payload(encode_payload(records, offset_deltas=[3, 17]))

    assert decoded.records == records
    assert decoded.record_deltas == [3, 17]


def test_string_columns_are_dictionary_encoded() -> None:
    records = [commit("a-long-group-name", "a-long-topic-name", p, p) for p in range(50)]

    payload = encode_payload(records)

    assert payload.count(b"a-long-group-name") == 1
    assert payload.count(b"a-long-topic-name") == 1


def test_columns_of_one_value_are_written_once() -> None:
    records = [commit("g", "t", p, 7) for p in range(200)]

    payload = encode_payload(records)
    run = msgpack.unpackb(payload)[1]

    # offset, leader epoch, both timestamps, and the topic and metadata indices.
    assert run[6] == 7 and run[7] == 3 and type(run[9]) is int and type(run[10]) is int
    assert run[4] == [["t"], 0] and run[8][1] == 0
    assert run[5] == list(range(200)), "the partition column stays an array"
    assert decode_records(payload) == records
    assert len(payload) < len(encode_payload([commit("g", "t", p, p) for p in range(200)])) / 2


def test_group_runs_keep_their_group_column_an_array() -> None:
    payload = encode_payload([group("g"), group("g")])
    assert msgpack.unpackb(payload)[1][3] == [["g"], [0, 0]]
    payload = encode_payload([group_tombstone("g")])
    assert msgpack.unpackb(payload)[1][3] == [["g"], [0]]


@given(log_batches)
@settings(max_examples=100, deadline=None)
def test_random_batches_round_trip(records: list[Record]) -> None:
    assert decode_records(encode_payload(records)) == records
    assert decode_payload(encode_payload(records)).records == records


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_escape_as_anything_but_payload_errors(data: bytes) -> None:
    for decode in (decode_records, decode_payload):
        try:
            decode(data)
        except (PayloadError, UnsupportedVersionError):
            pass


@given(log_batches, st.data())
@settings(max_examples=200, deadline=None)
def test_damaged_payloads_raise_payload_errors_only(records: list[Record], data: st.DataObject) -> None:
    payload = bytearray(encode_payload(records))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(payload) - 1))
        payload[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(payload)))
    for candidate in (bytes(payload), bytes(payload[:cut])):
        try:
            decode_records(candidate)
            decode_payload(candidate)
        except (PayloadError, UnsupportedVersionError):
            pass


@pytest.mark.parametrize(
    "body",
    [
        [], {}, 5, [None, 5], [None, [1, 0]],
        [None, [1, 0, 2, [["g"], [0]], [["t"], [0, 0]]]],
        [5, [1, None, 1, [["g"], [0]], [["t"], [0]], [0]]],
        [[1, 2], [1, None, 1, [["g"], [0]], [["t"], [0]], [0]]],
        [None, [2, 0, 1, [["g"], [5]], [[1]]]],
        [None, [1, None, -1, [[], []], [[], []], []]],
        # One value for a column that must be an array: it would leave the count unbounded.
        [None, [1, None, 5, [["g"], 0], [["t"], 0], 3]],
        [None, [2, None, 10**9, [["g"], 0]]],
        # One index out of its string table; one value that is not an int.
        [None, [1, None, 1, [["g"], 3], [["t"], [0]], [0]]],
        [None, [1, 0, 1, [["g"], [0]], [["t"], [0]], [0], 1.5, -1, [[""], 0], 0, -1]],
    ],
)
def test_shapes_that_are_not_payloads_are_payload_errors(body: object) -> None:
    with pytest.raises(PayloadError):
        decode_payload(msgpack.packb(body))
    if body not in ([5, [1, None, 1, [["g"], [0]], [["t"], [0]], [0]]],
                    [[1, 2], [1, None, 1, [["g"], [0]], [["t"], [0]], [0]]]):
        with pytest.raises(PayloadError):
            decode_records(msgpack.packb(body))


def test_a_payload_without_runs_holds_no_records() -> None:
    assert decode_records(msgpack.packb([None])) == []


def test_encoding_refuses_what_is_not_a_record_key() -> None:
    with pytest.raises(TypeError):
        encode_payload([Record(("g", "t", 0), None)])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        encode_payload([group_tombstone("g")], offset_deltas=[1, 2])
    assert decode_records(encode_payload([Record(GroupMetadataKey("g"), None)])) == [group_tombstone("g")]


@pytest.mark.parametrize("count", [2**31, 10_561_401_165_231_198_865, -1, 1.5])
def test_a_damaged_record_count_is_a_payload_error(count: object) -> None:
    """Found by the fuzz test above: a count past what Python can repeat raised OverflowError."""
    body = msgpack.unpackb(encode_payload([commit("g", "t", 0, 1)]))
    body[1][2] = count
    body[1][6] = 0  # a constant column stands for `count` copies
    with pytest.raises(PayloadError):
        decode_records(msgpack.packb(body))
