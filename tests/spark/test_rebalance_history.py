"""The rebalance history of consumer groups (KIP-848) and of groups converted between the types,
and the expired groups of both types.

The log is written from the records a real `coordinator.Shard` produced
(`consumer_histories.upgrade_round_trip`) and read by the Spark reader; the
job runs on Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame

from coordinator.consumer import ConsumerGroupMember
from coordinator.consumer import records as helpers
from coordinator.records import ConsumerGroupMetadataKey, GroupMetadataKey, Record
from spark_bridge import jobs
from spark_bridge.reader import read_offsets_log
from spark_bridge.spark_session import BridgeSession

from tests.spark.consumer_histories import CLASSIC_THEN_CONSUMER_GROUP, CONSUMER_GROUP, upgrade_round_trip
from tests.spark.histories import T0, group, write_history

pytestmark = pytest.mark.spark
HISTORY_COLUMNS = (
    "group_id", "generation", "previous_generation", "timestamp_ms", "ms_since_previous_generation",
    "member_count", "previous_member_count", "protocol_type", "protocol", "leader", "log_partition",
    "log_offset", "group_type", "assignment_epoch",
)


@pytest.fixture(scope="module")
def written(bridge_session: BridgeSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    tuple[list[Record], list[dict]]
]:
    history = upgrade_round_trip()
    data_dir: Path = tmp_path_factory.mktemp("consumer-history")
    history.write(str(data_dir))
    log_df: DataFrame = read_offsets_log(bridge_session.spark, data_dir)
    rows = [row.asDict() for row in jobs.rebalance_history(log_df).collect()]
    records = [record for _, _, batch in history.batches for record in batch]
    yield records, sorted(rows, key=lambda row: (row["group_id"], row["log_offset"]))


def of(rows: list[dict], group_id: str) -> list[tuple]:
    """(generation, group type, member count, assignment epoch, previous generation, ms since it)."""
    return [
        (row["generation"], row["group_type"], row["member_count"], row["assignment_epoch"],
         row["previous_generation"], row["ms_since_previous_generation"])
        for row in rows if row["group_id"] == group_id
    ]


def test_history_columns(written: tuple[list[Record], list[dict]]) -> None:
    _, rows = written
    assert rows and all(tuple(row) == HISTORY_COLUMNS for row in rows)


def test_consumer_group_epochs_member_counts_and_target_epochs(
    written: tuple[list[Record], list[dict]]
) -> None:
    _, rows = written

    assert of(rows, CONSUMER_GROUP) == [
        (1, "consumer", 1, 1, None, None),
        (2, "consumer", 2, 2, 1, 1_000),
        # A's subscription changed: its metadata record is rewritten, the group still has two members.
        (3, "consumer", 2, 3, 2, 2_000),
        # B left; the group moved on to epoch 5 before the coordinator computed a target for 4.
        (4, "consumer", 1, 3, 3, 1_000),
        (5, "consumer", 2, 5, 4, 1_000),
    ]
    mine = [row for row in rows if row["group_id"] == CONSUMER_GROUP]
    assert [row["timestamp_ms"] - T0 for row in mine] == [0, 1_000, 3_000, 4_000, 5_000]
    assert [row["previous_member_count"] for row in mine] == [None, 1, 2, 2, 1]
    assert {(row["protocol_type"], row["protocol"], row["leader"], row["log_partition"]) for row in mine} == {
        ("consumer", None, None, 0)
    }


def test_classic_to_consumer_and_back_is_one_history(written: tuple[list[Record], list[dict]]) -> None:
    _, rows = written

    assert of(rows, CLASSIC_THEN_CONSUMER_GROUP) == [
        (1, "classic", 2, None, None, None),
        # The upgrade carries generation 1 over as epoch 1, with the classic members; then C's join.
        (1, "consumer", 2, 1, 1, 1_000),
        (2, "consumer", 3, 2, 1, 0),
        # C leaves: the downgrade carries epoch 2 over as generation 2; the members rejoin.
        (2, "classic", 2, None, 2, 1_000),
        (3, "classic", 2, None, 2, 1_000),
    ]
    mine = [row for row in rows if row["group_id"] == CLASSIC_THEN_CONSUMER_GROUP]
    assert [row["previous_member_count"] for row in mine] == [None, 2, 2, 3, 2]
    assert [row["protocol"] for row in mine] == ["range", None, None, "range", "range"]


def test_each_row_points_at_its_group_record(written: tuple[list[Record], list[dict]]) -> None:
    records, rows = written

    for row in rows:
        record = records[row["log_offset"]]
        if row["group_type"] == "classic":
            assert record.key == GroupMetadataKey(row["group_id"])
            assert record.value.generation == row["generation"]
        else:
            assert record.key == ConsumerGroupMetadataKey(row["group_id"])
            assert record.value.epoch == row["generation"]


def test_a_consumer_group_deleted_and_created_again_starts_over(
    bridge_session: BridgeSession, tmp_path: Path
) -> None:
    def created(member_id: str) -> list[Record]:
        return [
            helpers.member_subscription_record("x", ConsumerGroupMember(member_id)),
            helpers.epoch_record("x", 1),
            helpers.target_assignment_epoch_record("x", 1),
        ]

    deleted = [
        helpers.target_assignment_epoch_tombstone("x"),
        helpers.member_subscription_tombstone("x", "m"),
        helpers.epoch_tombstone("x"),
    ]
    write_history(str(tmp_path), [(2, T0, created("m")), (2, T0 + 500, deleted), (2, T0 + 900, created("n"))])

    history = jobs.rebalance_history(read_offsets_log(bridge_session.spark, tmp_path))

    rows = sorted((row.asDict() for row in history.collect()), key=lambda row: row["log_offset"])
    assert of(rows, "x") == [(1, "consumer", 1, 1, None, None), (1, "consumer", 1, 1, 1, 900)]
    assert [(row["log_partition"], row["log_offset"]) for row in rows] == [(2, 1), (2, 7)]


def test_expired_groups_reads_both_types(bridge_session: BridgeSession, tmp_path: Path) -> None:
    upgraded = [
        Record(GroupMetadataKey("up"), None),
        helpers.member_subscription_record("up", ConsumerGroupMember("m")),
        helpers.epoch_record("up", 1),
    ]
    deleted = [helpers.member_subscription_tombstone("gone", "m"), helpers.epoch_tombstone("gone")]
    write_history(str(tmp_path), [
        (0, T0, [group("up", 1, 1, T0)]),
        (0, T0 + 1_000, [*upgraded, helpers.member_subscription_record("gone", ConsumerGroupMember("m")),
                         helpers.epoch_record("gone", 1)]),
        (0, T0 + 2_000, deleted),
    ])

    expired = jobs.expired_groups(read_offsets_log(bridge_session.spark, tmp_path)).collect()

    # The upgrade's GroupMetadata tombstone is no deletion; the consumer group's tombstone is.
    assert [tuple(row) for row in expired] == [("gone", True, 0, 0, T0 + 2_000)]
