"""The follower role of a replicated offsets partition, in the actor (DESIGN 5b).

A follower holds its own log (`log.replica_dir`) and a HOT shard: every batch
its leader pushes is appended unchanged (`append_raw`), fsynced, decoded and
replayed into that shard, so a promotion loads nothing. The rules come from
`coordinator.replication.follower` and `divergence`; this module moves bytes:

- `replicate` (the leader's push): fenced by leader epoch (`check_push_epoch`:
  an older epoch is answered FENCED_LEADER_EPOCH with the newest epoch known
  here, which tells a deposed leader to step down; a newer one is adopted and
  written to the log directory first). Batches are appended only when the
  push starts at this log's end (`appends_at`); the answer is always where
  the log ends, durably, and the epoch of its last batch: the leader's
  acknowledgement and divergence check in one. Any gap in a push that
  starts at the log end is the leader's compaction gap (`allow_gap`).
- `truncate` (the leader's DivergingEpoch): applied only if this log is still
  where the answer it refers to left it (a late divergence about a log that
  changed since is dropped, as Kafka's fetcher drops a stale response); the
  log is cut at `truncation_offset` and the shard rebuilt from the log (rare;
  the one case where a follower replays its log).
- One push or truncation at a time (a lock): a deposed leader and the new one
  may both be pushing.
- The follower's high watermark follows `follower_high_watermark`; a
  promotion serves from it (`on_loaded` with it as the committed end).

Answers are `PushAnswer`s: plain values that cross Ray unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, NamedTuple

from actors.partition.phases import RejoinPhases
from coordinator import Shard
from coordinator.errors import Errors
from coordinator.records import Record
from coordinator.replication import (
    EpochCache,
    appends_at,
    check_push_epoch,
    follower_high_watermark,
    truncation_offset,
)
from log.codec import decode_records
from log.loader import load_into
from log.partition import PartitionLog
from log.shipping import parse_raw


class PushAnswer(NamedTuple):
    """A replica's answer to a push or a truncation request."""

    error: Errors  # NONE, or FENCED_LEADER_EPOCH: the push came from an older epoch
    leader_epoch: int  # the newest leader epoch this replica knows
    log_end: int  # durable: a follower answers only after fsync
    last_epoch: int  # epoch of the last batch (Kafka's LastFetchedEpoch), -1 for none
    high_watermark: int


class FollowerReplica:
    """One follower: its open log, its hot shard, the leader it follows."""

    def __init__(
        self,
        log: PartitionLog,
        shard: Shard,
        leader_epoch: int,
        leader: str,
        io: Executor,
        new_shard: Callable[[], Shard],
        phases: RejoinPhases | None = None,
        replica: str = "",
    ) -> None:
        self.log = log
        self.shard = shard
        self.leader_epoch = leader_epoch
        self.leader = leader
        self.high_watermark = 0
        self.pushes = self.truncations = 0
        # Set by a promotion: this replica leads now and takes no more pushes.
        self.retired = False
        self._io = io
        self._new_shard = new_shard
        self._lock = asyncio.Lock()
        # Marked when it truncates and once it has caught up (`actors.partition.phases`).
        self._phases = phases
        self._replica = replica

    async def _on_io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    def answer(self, error: Errors = Errors.NONE) -> PushAnswer:
        log = self.log
        return PushAnswer(error, self.leader_epoch, log.high_watermark, log.last_epoch, self.high_watermark)

    async def adopt(self, leader_epoch: int, leader: str) -> bool:
        """Follow `leader` at `leader_epoch` if it is not older than what is known here."""
        if self.retired or check_push_epoch(self.leader_epoch, leader_epoch) is not Errors.NONE:
            return False
        if leader_epoch > self.leader_epoch:
            # Recorded in the directory first: a writer of an older epoch is fenced there too.
            await self._on_io(self.log.bump_epoch, leader_epoch)
            self.leader_epoch = leader_epoch
        self.leader = leader
        return True

    async def replicate(
        self, leader_epoch: int, leader: str, start_offset: int | None, batches: bytes, leader_hwm: int
    ) -> PushAnswer:
        async with self._lock:
            if not await self.adopt(leader_epoch, leader):
                return self.answer(Errors.FENCED_LEADER_EPOCH)
            self.pushes += 1
            before = self.log.log_end_offset
            if batches and appends_at(start_offset, before):
                records = await self._on_io(self._append, batches)
                self.shard.replay_many(records)
            after = self.log.high_watermark
            self.high_watermark = follower_high_watermark(
                self.high_watermark, leader_hwm, start_offset, before, after
            )
            if self._phases is not None and after >= leader_hwm:
                self._phases.finish("caught up", self._replica)
            return self.answer()

    def _append(self, batches: bytes) -> list[Record]:
        """On the I/O thread: append, fsync, decode (unknown record kinds are skipped, as on load)."""
        self.log.append_raw(batches, allow_gap=True)
        self.log.sync()
        records: list[Record] = []
        for batch, _ in parse_raw(batches):
            records += decode_records(batch.payload)
        return records

    async def truncate(
        self,
        leader_epoch: int,
        leader: str,
        diverging: tuple[int, int],
        seen_log_end: int,
        seen_last_epoch: int,
    ) -> PushAnswer:
        """Cut the log where the leader's DivergingEpoch says, if it is about this log."""
        async with self._lock:
            if not await self.adopt(leader_epoch, leader):
                return self.answer(Errors.FENCED_LEADER_EPOCH)
            log = self.log
            if (log.high_watermark, log.last_epoch) != (seen_log_end, seen_last_epoch):
                return self.answer()
            cache = EpochCache(log.epoch_entries())
            offset = truncation_offset(cache, log.high_watermark, tuple(diverging)).offset  # type: ignore[arg-type]
            self.shard = await self._on_io(self._truncate_and_rebuild, offset)
            self.truncations += 1
            if self._phases is not None:
                self._phases.mark("truncate")
            self.high_watermark = min(self.high_watermark, log.high_watermark)
            return self.answer()

    def _truncate_and_rebuild(self, offset: int) -> Shard:
        self.log.truncate_to(offset)
        shard = self._new_shard()
        load_into(shard, self.log)
        return shard

    async def retire(self, leader_epoch: int) -> None:
        """Promotion: wait for the push in progress, then take no more (an older
        leader's push must not append to the new leader's log)."""
        async with self._lock:
            await self._on_io(self.log.bump_epoch, leader_epoch)
            self.leader_epoch, self.retired = leader_epoch, True

    def describe(self) -> dict[str, Any]:
        return {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "high_watermark": self.high_watermark,
            "log_end": self.log.high_watermark,
            "pushes": self.pushes,
            "truncations": self.truncations,
        }
