"""Loading is replaying: consumer group records written by helpers, through the codec and the log
(full, compacted, snapshotted), replay to the groups the writer held in memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.consumer import ConsumerGroup
from coordinator.consumer.replay import replay
from coordinator.records import OffsetCommitKey
from log import LogConfig, PartitionLog, compact, decode_records, encode_payload, load_into, write_snapshot

from tests.consumer.group_history import History, Replayed, state

EPOCH = 1
SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
def test_records_through_the_codec_replay_to_the_same_groups(seed: int) -> None:
    history = History(seed).run(120)
    groups: dict[str, ConsumerGroup] = {}
    for batch in history.batches:
        decoded = decode_records(encode_payload(batch))
        assert decoded == batch
        for record in decoded:
            if type(record.key) is not OffsetCommitKey:
                replay(groups, record)

    assert state(groups) == state(history.groups)
    assert any(group.members for group in history.groups.values()), "the history is not trivial"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("retention_ms", [0, 10**12], ids=["tombstones-dropped", "tombstones-kept"])
def test_full_compacted_and_snapshotted_logs_load_the_same_groups(
    tmp_path: Path, seed: int, retention_ms: int
) -> None:
    history = History(seed).run(160)
    config = LogConfig(offsets_segment_bytes=2_000, offsets_delete_retention_ms=retention_ms, fsync=False)
    with PartitionLog.open(tmp_path, EPOCH, config) as log:
        for index, batch in enumerate(history.batches):
            log.append(batch, EPOCH, 1_000 + index)
            if index == len(history.batches) // 2:
                log.sync()
                compact(log, 10**13)
        log.sync()
        want = state(history.groups)
        assert loaded(log, use_snapshot=False) == want

        stats = compact(log, 10**13)
        assert stats.records_out < stats.records_in
        assert loaded(log, use_snapshot=False) == want

        assert write_snapshot(log, 10**13) is not None
        assert loaded(log) == want
    assert loaded(tmp_path) == want


def loaded(source: PartitionLog | Path, use_snapshot: bool = True) -> dict[str, dict[str, object]]:
    target = Replayed()
    load_into(target, source, use_snapshot=use_snapshot)
    return state(target.groups)
