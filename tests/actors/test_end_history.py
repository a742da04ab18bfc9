"""The topic registry's end-offset history without Ray: the registry class and
`EndOffsetHistory` as plain Python, with a manual clock, over a real partition-0
shard and its log (`ShardStore`); a "restart" is a new registry over that log replayed."""

from __future__ import annotations

import json
import os

import pytest

from actors.client.end_history import HISTORY_FILE, EndOffsetHistory, HistoryLimits, read_legacy_file
from actors.client.topic_registry import LEGACY_TOPICS_FILE, TopicRegistry
from actors.core.settings import ServiceSettings
from coordinator.errors import Errors

from tests.actors.service_store_support import ShardStore

MINUTE_MS = 60_000
DAY_MS = 24 * 3600 * 1000


class ManualClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now


STORES: dict[str, ShardStore] = {}


def registry(path: str, clock: ManualClock, limits: HistoryLimits | None = None) -> TopicRegistry:
    """A registry of the service whose data directory is `path`: a second call is a
    restarted registry (a new actor reading partition 0's log, replayed anew)."""
    store = STORES[path] = STORES[path].restarted() if path in STORES else ShardStore()
    return TopicRegistry(ServiceSettings(data_dir=path), clock, limits, store=store)


def test_each_report_is_a_sample_at_the_registry_clock_or_the_reporters_time(
    tmp_path: os.PathLike[str],
) -> None:
    clock = ManualClock()
    topics = registry(str(tmp_path), clock)
    topics.create_topic("t", 2)
    assert topics.set_end_offsets({("t", 0): 5, ("t", 1): 1}) == (Errors.NONE, "", "")
    clock.now += MINUTE_MS
    topics.set_end_offsets({("t", 0): 9})
    topics.set_end_offsets({("t", 1): 4}, at_ms=clock.now + 5)
    assert topics.end_offset_history(None, None) == [
        ("t", 0, 1_000_000, 5),
        ("t", 0, 1_060_000, 9),
        ("t", 1, 1_000_000, 1),
        ("t", 1, 1_060_005, 4),
    ]
    assert topics.end_offsets(["t"]) == {("t", 0): 9, ("t", 1): 4}
    # since_ms: the rows from then on, plus the sample in effect at that time
    assert topics.end_offset_history(["t"], 1_030_000) == [
        ("t", 0, 1_000_000, 5),
        ("t", 0, 1_060_000, 9),
        ("t", 1, 1_000_000, 1),
        ("t", 1, 1_060_005, 4),
    ]
    assert topics.end_offset_history(["t"], 1_060_000) == [
        ("t", 0, 1_060_000, 9),
        ("t", 1, 1_000_000, 1),
        ("t", 1, 1_060_005, 4),
    ]
    assert topics.end_offset_history(["t"], 1_060_005) == [("t", 0, 1_060_000, 9), ("t", 1, 1_060_005, 4)]
    assert topics.end_offset_history(["other"], None) == []


@pytest.mark.parametrize(
    ("offsets", "at_ms", "error", "why"),
    [
        ({("t", 0): 3}, None, Errors.INVALID_REQUEST, "below the recorded 5"),
        ({("t", 0): 6}, 10, Errors.INVALID_REQUEST, "before the last sample"),
        ({("t", 0): -1}, None, Errors.INVALID_REQUEST, "int >= 0"),
        ({("t", 0): "7"}, None, Errors.INVALID_REQUEST, "int >= 0"),
        ({("t", 0): True}, None, Errors.INVALID_REQUEST, "int >= 0"),
        ({("t", 0): 6}, -5, Errors.INVALID_REQUEST, "at_ms"),
        ({("t", 9): 6}, None, Errors.UNKNOWN_TOPIC_OR_PARTITION, ""),
        ({("nope", 0): 6}, None, Errors.UNKNOWN_TOPIC_OR_PARTITION, ""),
        ({"t": 6}, None, Errors.INVALID_REQUEST, "(topic, partition)"),
        ([("t", 0, 6)], None, Errors.INVALID_REQUEST, "dict"),
    ],
)
def test_bad_reports_are_refused_whole_and_change_nothing(
    tmp_path: os.PathLike[str], offsets: object, at_ms: object, error: Errors, why: str
) -> None:
    clock = ManualClock()
    topics = registry(str(tmp_path), clock)
    topics.create_topic("t", 2)
    topics.set_end_offsets({("t", 0): 5})
    before = (topics.end_offsets(None), topics.end_offset_history(None, None))
    clock.now += MINUTE_MS
    report = {("t", 1): 2, **offsets} if isinstance(offsets, dict) else offsets  # partition 1 is fine
    refused = topics.set_end_offsets(report, at_ms)  # type: ignore[arg-type]
    assert refused[0] is error and why in refused[2]
    assert (topics.end_offsets(None), topics.end_offset_history(None, None)) == before


def test_a_wall_clock_stepping_back_keeps_the_history_in_order(tmp_path: os.PathLike[str]) -> None:
    clock = ManualClock()
    topics = registry(str(tmp_path), clock)
    topics.create_topic("t", 1)
    topics.set_end_offsets({("t", 0): 5})
    clock.now -= 10 * MINUTE_MS
    assert topics.set_end_offsets({("t", 0): 8})[0] is Errors.NONE
    assert topics.end_offset_history(None, None) == [("t", 0, 1_000_000, 5), ("t", 0, 1_000_000, 8)]


def test_start_offsets_are_kafkas_earliest_and_never_above_the_end(tmp_path: os.PathLike[str]) -> None:
    topics = registry(str(tmp_path), ManualClock())
    topics.create_topic("t", 2)
    topics.set_end_offsets({("t", 0): 50})
    assert topics.start_offsets(["t"]) == {("t", 0): 0, ("t", 1): 0}
    assert topics.set_start_offsets({("t", 0): 20})[0] is Errors.NONE
    refused = topics.set_start_offsets({("t", 1): 1})
    assert refused[0] is Errors.INVALID_REQUEST and "above the end offset 0" in refused[2]
    again = registry(str(tmp_path), ManualClock())
    assert again.start_offsets(["t"]) == {("t", 0): 20, ("t", 1): 0}


def test_history_survives_a_restart(tmp_path: os.PathLike[str]) -> None:
    clock = ManualClock()
    topics = registry(str(tmp_path), clock)
    topics.create_topic("t", 1)
    for end in (3, 7, 12):
        topics.set_end_offsets({("t", 0): end})
        clock.now += MINUTE_MS
    kept = topics.end_offset_history(None, None)
    again = registry(str(tmp_path), clock)
    assert again.end_offset_history(None, None) == kept
    again.set_end_offsets({("t", 0): 20})
    assert registry(str(tmp_path), clock).end_offset_history(None, None)[-1] == ("t", 0, clock.now, 20)
    assert not os.listdir(tmp_path), "nothing is kept on the registry's own disk"


def test_an_older_registrys_files_are_imported_once(tmp_path: os.PathLike[str]) -> None:
    """A registry of an older raygroups kept topics.json and end-offsets.jsonl on its
    node: the first registry over the replicated log imports them, torn tail and all."""
    topics = {"t": {"partitions": 2, "end_offsets": {"0": 9, "1": 4}, "start_offsets": {"0": 2}}}
    with open(os.path.join(str(tmp_path), LEGACY_TOPICS_FILE), "w", encoding="utf-8") as f:
        json.dump({"version": 1, "topics": topics}, f)
    with open(os.path.join(str(tmp_path), HISTORY_FILE), "w", encoding="utf-8") as f:
        # the last report reached the history but not topics.json (its 9 is older), and a torn line
        f.write('[["t",0,1000,5]]\n[["t",0,2000,12]]\n[["t",0,3000,99')
    imported = registry(str(tmp_path), ManualClock())
    assert imported.describe(None) == {"t": 2}
    assert imported.end_offsets(None) == {("t", 0): 12, ("t", 1): 4}
    assert imported.start_offsets(None) == {("t", 0): 2, ("t", 1): 0}
    assert imported.end_offset_history(["t"], None) == [("t", 0, 1000, 5), ("t", 0, 2000, 12), ("t", 1, 0, 4)]
    os.remove(os.path.join(str(tmp_path), LEGACY_TOPICS_FILE))
    assert registry(str(tmp_path), ManualClock()).end_offsets(None) == {("t", 0): 12, ("t", 1): 4}


def test_an_unreadable_line_of_an_older_history_file_is_skipped(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(str(tmp_path), HISTORY_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write('[["t",0,1,3]]\n{"garbage": \n[["t",0,2,4]]\n[["t",0,3,2]]\n')
    history = EndOffsetHistory()
    dropped = history.load(read_legacy_file(str(tmp_path)), now_ms=10)
    assert history.rows(None, None) == [("t", 0, 1, 3), ("t", 0, 2, 4)]
    assert dropped == [("t", 0, 3, 2)], "out-of-order sample 2 < 4 dropped"


def test_a_flat_partition_costs_one_sample_per_interval(tmp_path: os.PathLike[str]) -> None:
    clock = ManualClock()
    topics = registry(str(tmp_path), clock)
    topics.create_topic("t", 1)
    for _ in range(121):  # a reporter every second, nothing produced for two minutes
        topics.set_end_offsets({("t", 0): 10})
        clock.now += 1000
    assert [at for _, _, at, _ in topics.end_offset_history(None, None)] == [
        1_000_000,
        1_060_000,
        1_120_000,
    ]


def test_history_is_bounded_by_count_and_retention_keeping_the_latest(tmp_path: os.PathLike[str]) -> None:
    clock = ManualClock()
    limits = HistoryLimits(samples_max=100)
    topics = registry(str(tmp_path), clock, limits)
    topics.create_topic("t", 1)
    for end in range(1, 1001):  # a sample every second, each a new end
        topics.set_end_offsets({("t", 0): end})
        clock.now += 1000
    rows = topics.end_offset_history(None, None)
    assert len(rows) <= 100
    assert rows[-1][3] == 1000, "the current end is kept"
    assert rows[0][3] == 1, "old history is thinned, not cut"
    recent = [end for _, _, _, end in rows[-40:]]
    assert recent == list(range(961, 1001)), "recent history keeps every sample"
    live = [key for key in STORES[str(tmp_path)].shard.service_state if key.kind == "end-sample"]
    assert len(live) == len(rows), "every sample the history dropped is deleted from the log"
    assert registry(str(tmp_path), clock, limits).end_offset_history(None, None) == rows

    clock.now += 8 * DAY_MS  # past Kafka's offsets retention: only the latest stays
    assert registry(str(tmp_path), clock, limits).end_offset_history(None, None) == [rows[-1]]
    topics.set_end_offsets({("t", 0): 1000})
    assert topics.end_offset_history(None, None) == [("t", 0, clock.now, 1000)]
