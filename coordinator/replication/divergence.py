"""Log divergence between a leader and a follower, detected and repaired by leader epoch.

Kafka's truncation on fetch (Fetch v12 LastFetchedEpoch / DivergingEpoch,
replication notes section 5). In our push model the follower's answer to a
push, (durable log end, epoch of its last batch), plays the part of the next
Fetch's (FetchOffset, LastFetchedEpoch):

- the leader runs `diverging_epoch` on every answer (Partition.scala
  `readRecords`): if the follower's last epoch ended earlier on the leader,
  or under another epoch, it sends DivergingEpoch (epoch, end offset) and no
  records, and does not count that answer as an acknowledgement;
- the follower runs `truncation_offset` on it (AbstractFetcherThread
  `getOffsetTruncationState`), truncates its log and epoch cache there and
  answers again; an incomplete truncation is the KIP-279 loop, which our
  push protocol runs by itself: the next answer is checked again.

Departure: a follower that knows no epoch but has records (Kafka: truncate
to its high watermark, then fetch unchecked, the pre-KIP-101 path) is told
to truncate to 0 and copy everything again. Our batches always carry an
epoch, so this only happens when a log lost its cache; resyncing from 0 is
the one answer that cannot keep a divergent suffix and cannot loop.

Fencing (Partition.scala `checkCurrentLeaderEpoch`): a request from an older
leader epoch is FENCED_LEADER_EPOCH, from a newer one UNKNOWN_LEADER_EPOCH.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.errors import Errors
from coordinator.replication.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochCache


@dataclass(frozen=True, slots=True)
class Truncation:
    """Where a follower truncates its log to, and whether it is done."""

    offset: int
    # False: the follower's answer must be checked again (KIP-279 iteration).
    complete: bool


def diverging_epoch(
    leader_cache: EpochCache, leader_leo: int, follower_leo: int, follower_last_epoch: int
) -> tuple[int, int] | None:
    """The DivergingEpoch (epoch, end offset) for a follower's answer, or None if its log
    is a prefix of the leader's.

    `leader_leo` is the leader's log end (written, not only durable): the
    follower may already hold records the leader has not fsynced yet.
    """
    if follower_last_epoch == UNDEFINED_EPOCH:
        return None if follower_leo == 0 else (UNDEFINED_EPOCH, 0)
    if follower_last_epoch > leader_cache.latest_epoch:
        # Only a follower fenced against this leader can have seen a newer epoch;
        # its answers must never reach here.
        raise ValueError(
            f"follower epoch {follower_last_epoch} is newer than the leader's {leader_cache.latest_epoch}"
        )
    epoch, end_offset = leader_cache.end_offset_for(follower_last_epoch, leader_leo)
    if epoch < follower_last_epoch or end_offset < follower_leo:
        return epoch, end_offset
    return None


def truncation_offset(
    follower_cache: EpochCache, follower_leo: int, diverging: tuple[int, int]
) -> Truncation:
    """Where the follower truncates to on the leader's DivergingEpoch answer.

    - It knows the leader's epoch: the smallest of the leader's end for it,
      its own end for it and its log end.
    - Its largest epoch at or below the leader's is another one: truncate to
      its own end of that epoch and ask again (KIP-279).
    - It has no epoch at or below: the leader's end offset (capped by its log end).
    """
    leader_epoch, leader_end = diverging
    if leader_end == UNDEFINED_OFFSET:
        raise ValueError("a diverging answer always carries an end offset")
    own_epoch, own_end = follower_cache.end_offset_for(leader_epoch, follower_leo)
    if own_end == UNDEFINED_OFFSET:
        return Truncation(min(leader_end, follower_leo), complete=True)
    if own_epoch != leader_epoch:
        return Truncation(min(own_end, follower_leo), complete=False)
    return Truncation(min(leader_end, own_end, follower_leo), complete=True)


def check_leader_epoch(local_epoch: int, request_epoch: int) -> Errors:
    """Kafka's `checkCurrentLeaderEpoch` for a request that names a leader epoch."""
    if request_epoch < local_epoch:
        return Errors.FENCED_LEADER_EPOCH
    if request_epoch > local_epoch:
        return Errors.UNKNOWN_LEADER_EPOCH
    return Errors.NONE
