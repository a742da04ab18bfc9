"""ListOffsets' answer from the topic registry's view, without Ray: the special
timestamps, and a time resolved as reset-offsets --to-datetime resolves it
(coordinator.reset_plan.offset_at_time) with the first sample above that
offset as the record's timestamp (gateway/handlers/offsets.py)."""

from __future__ import annotations

import pytest

from coordinator.reset_plan import TopicView, offset_at_time
from gateway.handlers.offsets import NO_RECORD, record_for

TP = ("t", 0)
# Samples (at_ms, end offset): 10 by 1000, still 10 at 2000, 25 by 3000, 40 by 5000.
HISTORY = [(1000, 10), (2000, 10), (3000, 25), (5000, 40)]


def view(start: int = 0, end: int = 40, history: list[tuple[int, int]] | None = None) -> TopicView:
    return TopicView({"t": 1}, {TP: start}, {TP: end}, {TP: HISTORY if history is None else history})


@pytest.mark.parametrize(
    ("timestamp", "answer"),
    [
        (-2, (5, -1)),  # earliest: the log start offset, no timestamp (Kafka's answer)
        (-4, (5, -1)),  # earliest local: no tiered storage, so the log start
        (-1, (40, -1)),  # latest: the end offset
        (-3, NO_RECORD),  # max timestamp: no record is held
        (-5, NO_RECORD),  # latest tiered: no tiered storage
        (-9, NO_RECORD),  # a special value Kafka does not define
    ],
)
def test_special_timestamps(timestamp: int, answer: tuple[int, int]) -> None:
    assert record_for(view(start=5), TP, timestamp) == answer


@pytest.mark.parametrize(
    ("timestamp", "answer"),
    [
        # Before every sample: the log start offset; 10 was first seen at 1000.
        (0, (0, 1000)),
        (999, (0, 1000)),
        # At or after a sample: its end; the record there was first seen later.
        (1000, (10, 3000)),
        (2500, (10, 3000)),
        (3000, (25, 5000)),
        (4999, (25, 5000)),
    ],
)
def test_a_time_gives_the_reset_offset_and_when_a_record_there_was_first_seen(
    timestamp: int, answer: tuple[int, int]
) -> None:
    assert record_for(view(), TP, timestamp) == answer
    offset, seen_at = answer
    assert offset == offset_at_time(view(), TP, timestamp)  # the rule of reset-offsets --to-datetime
    assert seen_at >= timestamp  # Kafka's record timestamp is never before the one asked


@pytest.mark.parametrize("timestamp", [5000, 10**12])
def test_a_time_at_or_after_the_last_sample_finds_no_record(timestamp: int) -> None:
    # The offset would be the end: Kafka answers -1 and -1 when no record is that recent.
    assert record_for(view(), TP, timestamp) == NO_RECORD


def test_a_raised_log_start_is_the_offset_and_its_first_sample_the_time() -> None:
    # Records below 30 were deleted: --to-datetime never goes below the start.
    assert record_for(view(start=30), TP, 1500) == (30, 5000)


def test_a_partition_never_reported_finds_no_record() -> None:
    assert record_for(view(end=0, history=[]), TP, 1234) == NO_RECORD
