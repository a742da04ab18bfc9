"""Every analytics job on the constructed history of `histories.HISTORY`, exact results.

The history is written by the log layer and read by the Spark reader once
for the module; each job's result is collected in a fixed order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame

from spark_bridge import jobs
from spark_bridge.end_offsets import ALWAYS_MS, EndOffsetHistory
from spark_bridge.reader import read_offsets_log
from spark_bridge.spark_session import BridgeSession

from tests.spark.histories import END_OFFSETS, HISTORY, T0, write_history

pytestmark = pytest.mark.spark
MINUTE = 60_000


@pytest.fixture(scope="module")
def log_df(bridge_session: BridgeSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DataFrame]:
    data_dir: Path = tmp_path_factory.mktemp("history")
    write_history(str(data_dir), HISTORY)
    frame = read_offsets_log(bridge_session.spark, data_dir).cache()
    yield frame
    frame.unpersist()


def collect(frame: DataFrame, *order: str) -> list[tuple[Any, ...]]:
    """Rows sorted by `order` on the driver: a Spark sort would cost a sampling job more."""
    rows = frame.collect()
    return [tuple(row) for row in sorted(rows, key=lambda row: tuple(row[name] for name in order))]


def test_committed_offsets_are_the_compacted_view(log_df: DataFrame) -> None:
    assert collect(jobs.committed_offsets(log_df), "group_id", "topic", "topic_partition") == [
        ("billing", "orders", 0, 18, 1, "meta-18", T0 + 95_000, None, 1, 6),
        ("billing", "payments", 0, 3, 1, "meta-3", T0 + 95_000, None, 1, 7),
        ("orders-app", "orders", 0, 25, 1, "meta-25", T0 + 65_000, None, 0, 6),
        ("orders-app", "orders", 1, 30, 1, "meta-30", T0 + 65_000, None, 0, 7),
    ]


def test_lag_against_supplied_end_offsets(log_df: DataFrame) -> None:
    ends = {key: end for key, end in END_OFFSETS.items() if key != ("payments", 0)}

    lag = jobs.consumer_lag(log_df, ends).drop("commit_timestamp")

    assert collect(lag, "group_id", "topic", "topic_partition") == [
        ("billing", "orders", 0, 18, 40, 22),
        ("billing", "payments", 0, 3, None, None),
        ("orders-app", "orders", 0, 25, 40, 15),
        ("orders-app", "orders", 1, 30, 30, 0),
    ]


def test_end_offsets_as_a_dataframe_or_a_callable_give_the_same_lag(log_df: DataFrame) -> None:
    spark = log_df.sparkSession
    table = spark.createDataFrame(
        [(t, p, e) for (t, p), e in END_OFFSETS.items()], "topic string, partition int, end_offset long"
    )
    asked: list[tuple[str, int]] = []

    def ask(topic: str, partition: int) -> int | None:
        asked.append((topic, partition))
        return END_OFFSETS.get((topic, partition))

    order = ("group_id", "topic", "topic_partition")
    by_dict = collect(jobs.consumer_lag(log_df, END_OFFSETS), *order)
    assert collect(jobs.consumer_lag(log_df, table), *order) == by_dict
    assert collect(jobs.consumer_lag(log_df, ask), *order) == by_dict
    # Once per partition ever committed, on the driver.
    assert sorted(asked) == [("logs", 0), ("orders", 0), ("orders", 1), ("payments", 0)]


def test_without_end_offsets_the_highest_commit_is_the_end(log_df: DataFrame) -> None:
    lag = jobs.consumer_lag(log_df).select("group_id", "topic", "topic_partition", "log_end_offset", "lag")

    assert collect(lag, "group_id", "topic", "topic_partition") == [
        ("billing", "orders", 0, 25, 7),
        ("billing", "payments", 0, 3, 0),
        ("orders-app", "orders", 0, 25, 0),
        ("orders-app", "orders", 1, 30, 0),
    ]


def test_lag_over_time_against_a_snapshot_holds_it_at_every_window(log_df: DataFrame) -> None:
    # old-app's only partition has no end offset: it has no lag to draw; gone's offset is deleted
    # in its second minute, so it has no live partition from then on.
    assert collect(jobs.lag_over_time(log_df, END_OFFSETS, MINUTE), "group_id", "window_start_ms") == [
        ("billing", T0, 28),
        ("billing", T0 + MINUTE, 22),
        ("billing", T0 + 2 * MINUTE, 22),
        ("gone", T0, 35),
        ("orders-app", T0, 35),
        ("orders-app", T0 + MINUTE, 15),
        ("orders-app", T0 + 2 * MINUTE, 15),
    ]


def test_lag_over_time_of_a_snapshot_is_the_general_as_of_curve_of_one_sample(log_df: DataFrame) -> None:
    """The snapshot's own path (changes summed per window) against the as-of path every end
    history takes, given the snapshot as one sample per partition at ALWAYS_MS: the ends given,
    and the ends taken from the commits."""
    ends_from_commits = jobs.end_offsets_from_commits(log_df).collect()
    for snapshot, ends in ((END_OFFSETS, END_OFFSETS.items()), (None, [
        ((row["topic"], row["topic_partition"]), row["log_end_offset"]) for row in ends_from_commits
    ])):
        history = EndOffsetHistory.of([(t, p, ALWAYS_MS, end) for (t, p), end in ends])
        fast = collect(jobs.lag_over_time(log_df, snapshot, MINUTE), "group_id", "window_start_ms")
        general = collect(jobs.lag_over_time(log_df, history, MINUTE), "group_id", "window_start_ms")
        assert fast and fast == general


# The end of orders-0 moves: 20 in the first minute, 30 from T0+70 s, 60 from T0+130 s (past the
# log's last record: the windows run on to it); orders-1 stays at 25; payments-0 has no sample.
MOVING_ENDS = EndOffsetHistory.of([
    ("orders", 0, T0 + 1_000, 20), ("orders", 0, T0 + 70_000, 30), ("orders", 0, T0 + 130_000, 60),
    ("orders", 1, T0, 25),
])


def test_lag_over_time_uses_the_end_offsets_of_each_window(log_df: DataFrame) -> None:
    lag = jobs.lag_over_time(log_df, MOVING_ENDS, MINUTE)

    # orders-app at T0: (20 - 15) + (25 - 20); against today's ends it would be (60 - 15) + 5.
    # At T0+1min orders-1's commit (30) is past its sampled end (25): no lag, never negative.
    assert collect(lag, "group_id", "window_start_ms") == [
        ("billing", T0, 8),
        ("billing", T0 + MINUTE, 12),
        ("billing", T0 + 2 * MINUTE, 42),
        ("gone", T0, 15),
        ("orders-app", T0, 10),
        ("orders-app", T0 + MINUTE, 5),
        ("orders-app", T0 + 2 * MINUTE, 35),
    ]
    # The same samples as a DataFrame give the same curve.
    frame = log_df.sparkSession.createDataFrame(
        list(MOVING_ENDS.rows), "topic string, partition int, at_ms long, end_offset long"
    )
    assert collect(jobs.lag_over_time(log_df, frame, MINUTE), "group_id", "window_start_ms") == collect(
        lag, "group_id", "window_start_ms"
    )


def test_current_lag_and_span_of_a_history(log_df: DataFrame) -> None:
    lag = jobs.consumer_lag(log_df, MOVING_ENDS).select("group_id", "topic", "topic_partition", "lag")

    # Each partition's newest sample is its end now.
    assert collect(lag, "group_id", "topic", "topic_partition") == [
        ("billing", "orders", 0, 42),
        ("billing", "payments", 0, None),
        ("orders-app", "orders", 0, 35),
        ("orders-app", "orders", 1, 0),  # past its end (25): lag 0, never negative
    ]
    assert jobs.data_span(log_df) == (T0 + 1_000, T0 + 125_000)
    assert jobs.data_span(log_df, MOVING_ENDS) == (T0 + 1_000, T0 + 130_000)


def test_commit_rate_per_group_and_minute(log_df: DataFrame) -> None:
    assert collect(jobs.commit_rate(log_df, MINUTE), "group_id", "window_start_ms") == [
        ("billing", T0, T0 + MINUTE, 1, 1, 1 / 60),
        ("billing", T0 + MINUTE, T0 + 2 * MINUTE, 2, 2, 2 / 60),
        ("gone", T0, T0 + MINUTE, 1, 1, 1 / 60),
        ("old-app", T0, T0 + MINUTE, 1, 1, 1 / 60),
        ("orders-app", T0, T0 + MINUTE, 3, 2, 3 / 60),
        ("orders-app", T0 + MINUTE, T0 + 2 * MINUTE, 2, 2, 2 / 60),
    ]


def test_rebalance_history(log_df: DataFrame) -> None:
    assert collect(jobs.rebalance_history(log_df), "group_id", "generation") == [
        ("gone", 1, None, T0 + 3_000, None, 1, None, "consumer", "range", "m0", 1, 0, "classic", None),
        ("gone", 2, 1, T0 + 20_000, 17_000, 0, 1, "consumer", None, None, 1, 3, "classic", None),
        ("orders-app", 1, None, T0 + 1_000, None, 2, None, "consumer", "range", "m0", 0, 0, "classic", None),
        ("orders-app", 2, 1, T0 + 61_000, 60_000, 3, 2, "consumer", "range", "m0", 0, 5, "classic", None),
    ]


def test_idle_groups(log_df: DataFrame) -> None:
    now = T0 + 200_000

    assert collect(jobs.idle_groups(log_df, now, 120_000), "group_id") == [
        ("orders-app", T0 + 65_000, 135_000, 2),
    ]
    assert [row[0] for row in collect(jobs.idle_groups(log_df, now, 100_000), "group_id")] == [
        "billing", "orders-app",
    ]


def test_expired_and_deleted_groups(log_df: DataFrame) -> None:
    assert collect(jobs.expired_groups(log_df), "group_id") == [
        ("gone", True, 1, 0, T0 + 90_000),
        ("old-app", False, 1, 0, T0 + 125_000),
    ]


def test_a_window_must_be_positive(log_df: DataFrame) -> None:
    with pytest.raises(ValueError, match="window_ms"):
        jobs.commit_rate(log_df, 0)
