"""record_to_row: the pure record -> row mapping shared by the reader and the tests (no Spark)."""

from __future__ import annotations

from uuid import UUID

import pytest

from coordinator.consumer import ConsumerGroupMember
from coordinator.consumer import records as helpers
from coordinator.credentials import SECRET_KIND
from coordinator.records import (
    CONSUMER_GROUP_KEY_TYPES,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    ServiceStateKey,
    ServiceStateValue,
    TopicPartitions,
)
from spark_bridge.rows import (
    COLUMN_NAMES,
    COLUMNS,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_RECORD_TYPES,
    CONSUMER_MEMBER_METADATA,
    GROUP_METADATA,
    OFFSET_COMMIT,
    SERVICE_STATE,
    record_to_row,
    row_dict,
)

from tests.spark.histories import T0, commit, group, group_tombstone, offset_tombstone

NONE_GROUP_FIELDS = dict.fromkeys(
    ["generation", "protocol_type", "protocol", "leader", "member_count", "state_timestamp"]
)
NONE_COMMIT_FIELDS = dict.fromkeys(
    ["committed_offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp"]
)
NONE_CONSUMER_FIELDS = dict.fromkeys(["member_id", "member_epoch", "assignment_epoch"])
NONE_STATE_FIELDS = dict.fromkeys(["state_kind", "state_data"])


def test_offset_commit_row() -> None:
    row = record_to_row(3, 42, T0, commit("g", "orders", 7, 1234, T0 - 5, expire_ms=T0 + 99))

    assert len(row) == len(COLUMNS)
    assert row_dict(row) == {
        "partition": 3, "offset": 42, "batch_timestamp": T0, "record_type": OFFSET_COMMIT,
        "group_id": "g", "topic": "orders", "topic_partition": 7, "committed_offset": 1234,
        "leader_epoch": 1, "metadata": "meta-1234", "commit_timestamp": T0 - 5, "expire_timestamp": T0 + 99,
        **NONE_GROUP_FIELDS, "tombstone": False, **NONE_CONSUMER_FIELDS, **NONE_STATE_FIELDS,
    }


def test_kafka_none_sentinels_become_null() -> None:
    record = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, -1, "", T0))

    row = row_dict(record_to_row(0, 0, T0, record))

    assert row["leader_epoch"] is None and row["expire_timestamp"] is None
    assert row["metadata"] == "" and row["committed_offset"] == 5


def test_offset_tombstone_keeps_its_key() -> None:
    row = row_dict(record_to_row(1, 9, T0, offset_tombstone("g", "t", 2)))

    assert row == {
        "partition": 1, "offset": 9, "batch_timestamp": T0, "record_type": OFFSET_COMMIT,
        "group_id": "g", "topic": "t", "topic_partition": 2, **NONE_COMMIT_FIELDS, **NONE_GROUP_FIELDS,
        "tombstone": True, **NONE_CONSUMER_FIELDS, **NONE_STATE_FIELDS,
    }


def test_group_metadata_row() -> None:
    row = row_dict(record_to_row(2, 5, T0 + 1, group("g", 4, 3, T0)))

    assert row == {
        "partition": 2, "offset": 5, "batch_timestamp": T0 + 1, "record_type": GROUP_METADATA,
        "group_id": "g", "topic": None, "topic_partition": None, **NONE_COMMIT_FIELDS,
        "generation": 4, "protocol_type": "consumer", "protocol": "range", "leader": "m0",
        "member_count": 3, "state_timestamp": T0, "tombstone": False,
        **NONE_CONSUMER_FIELDS, **NONE_STATE_FIELDS,
    }


def test_empty_group_and_group_tombstone() -> None:
    empty = row_dict(record_to_row(0, 1, T0, group("g", 2, 0, T0)))
    deleted = row_dict(record_to_row(0, 2, T0, group_tombstone("g")))

    assert (empty["member_count"], empty["protocol"], empty["leader"]) == (0, None, None)
    assert empty["tombstone"] is False
    assert deleted == {
        **dict.fromkeys(COLUMN_NAMES), "partition": 0, "offset": 2, "batch_timestamp": T0,
        "record_type": GROUP_METADATA, "group_id": "g", "tombstone": True,
    }


def test_a_record_that_is_not_a_log_record_is_refused() -> None:
    with pytest.raises(TypeError):
        record_to_row(0, 0, T0, Record(("g",), None))  # type: ignore[arg-type]


def test_consumer_group_records_get_rows_of_their_own_kind() -> None:
    member = ConsumerGroupMemberMetadataValue(None, None, "c", "h", ("t",), None)
    regex = ConsumerGroupRegularExpressionValue(("t",), 1, 0)
    records = [
        Record(ConsumerGroupMetadataKey("cg"), ConsumerGroupMetadataValue(7)),
        Record(ConsumerGroupMetadataKey("cg"), None),
        Record(ConsumerGroupMemberMetadataKey("cg", "m1"), member),
        Record(ConsumerGroupCurrentMemberAssignmentKey("cg", "m1"), None),
        Record(ConsumerGroupRegularExpressionKey("cg", "t.*"), regex),
    ]

    rows = [row_dict(record_to_row(3, offset, T0, record)) for offset, record in enumerate(records)]

    assert all(len(row) == len(COLUMNS) and row["group_id"] == "cg" for row in rows)
    assert [row["record_type"] for row in rows] == [
        CONSUMER_GROUP_METADATA, CONSUMER_GROUP_METADATA, "consumer_group_member_metadata",
        "consumer_group_current_member_assignment", "consumer_group_regular_expression",
    ]
    assert [row["tombstone"] for row in rows] == [False, True, False, True, False]
    assert (rows[0]["generation"], rows[0]["protocol_type"]) == (7, "consumer")
    assert rows[2] == {
        **dict.fromkeys(COLUMN_NAMES), "partition": 3, "offset": 2, "batch_timestamp": T0,
        "record_type": CONSUMER_MEMBER_METADATA, "group_id": "cg", "tombstone": False, "member_id": "m1",
    }


def test_consumer_group_member_and_epoch_columns() -> None:
    tp = TopicPartitions(UUID(int=7), (0, 1))
    member = ConsumerGroupMember("m1", member_epoch=5, previous_member_epoch=4)
    records = [
        helpers.epoch_record("cg", 5),
        helpers.target_assignment_record("cg", "m1", {UUID(int=7): frozenset({0, 1})}),
        helpers.target_assignment_epoch_record("cg", 5),
        helpers.current_assignment_record("cg", member),
        helpers.member_subscription_tombstone("cg", "m1"),
        helpers.target_assignment_tombstone("cg", "m1"),
        helpers.current_assignment_tombstone("cg", "m1"),
        helpers.target_assignment_epoch_tombstone("cg"),
        Record(ConsumerGroupRegularExpressionKey("cg", "t.*"), None),
    ]
    assert records[1].value == ConsumerGroupTargetAssignmentMemberValue((tp,))

    rows = [row_dict(record_to_row(0, offset, T0, record)) for offset, record in enumerate(records)]

    extra = [(row["member_id"], row["member_epoch"], row["assignment_epoch"]) for row in rows]
    assert extra == [
        (None, None, None),
        ("m1", None, None),
        (None, None, 5),
        ("m1", 5, None),
        # A tombstone keeps its key's member id; its value's epochs are gone.
        ("m1", None, None),
        ("m1", None, None),
        ("m1", None, None),
        (None, None, None),
        (None, None, None),
    ]
    assert rows[0]["generation"] == 5 and all(row["generation"] is None for row in rows[1:])
    assert all(row["record_type"] != GROUP_METADATA for row in rows)


def test_offset_and_classic_rows_have_no_consumer_group_fields() -> None:
    for record in (commit("g", "t", 0, 1, T0), offset_tombstone("g", "t", 0), group("g", 1, 2, T0),
                   group_tombstone("g")):
        row = row_dict(record_to_row(0, 0, T0, record))
        assert (row["member_id"], row["member_epoch"], row["assignment_epoch"]) == (None, None, None)


def test_new_columns_come_after_the_existing_ones() -> None:
    assert COLUMN_NAMES[:19] == (
        "partition", "offset", "batch_timestamp", "record_type", "group_id", "topic", "topic_partition",
        "committed_offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp",
        "generation", "protocol_type", "protocol", "leader", "member_count", "state_timestamp", "tombstone",
    )
    assert COLUMNS[19:] == (
        ("member_id", "string"), ("member_epoch", "int"), ("assignment_epoch", "int"),
        ("state_kind", "string"), ("state_data", "binary"),
    )


def test_service_state_rows_carry_their_kind_and_data() -> None:
    switch = record_to_row(3, 9, T0, Record(ServiceStateKey("routing", ""), ServiceStateValue(b"1;4;2;0")))
    gone = record_to_row(0, 2, T0, Record(ServiceStateKey("topic", "orders"), None))

    assert (row_dict(switch)["record_type"], row_dict(switch)["group_id"]) == (SERVICE_STATE, None)
    assert (row_dict(switch)["state_kind"], row_dict(switch)["state_data"]) == ("routing", b"1;4;2;0")
    assert (row_dict(gone)["state_kind"], row_dict(gone)["state_data"], row_dict(gone)["tombstone"]) == (
        "topic", None, True,
    )


def test_the_ray_path_secret_never_reaches_a_row() -> None:
    secret = record_to_row(0, 5, T0, Record(ServiceStateKey(SECRET_KIND, ""), ServiceStateValue(b"k" * 32)))

    assert (row_dict(secret)["state_kind"], row_dict(secret)["state_data"]) == (SECRET_KIND, None)


def test_every_consumer_group_record_type_has_a_distinct_row_kind() -> None:
    kinds = list(CONSUMER_GROUP_RECORD_TYPES.values())

    assert set(CONSUMER_GROUP_RECORD_TYPES) == set(CONSUMER_GROUP_KEY_TYPES)
    assert len(set(kinds)) == len(kinds) and not {OFFSET_COMMIT, GROUP_METADATA} & set(kinds)
