"""A follower's rules for the leader's pushes.

The follower side of our push replication (replication notes sections 2, 4
and 5; the package docstring explains the push model):

- Epoch (Partition.scala `checkCurrentLeaderEpoch`, adapted): a push from a
  leader epoch older than the newest the follower knows is refused with
  FENCED_LEADER_EPOCH, which tells a deposed leader to step down. A newer
  epoch is adopted once the controller gave it to the replica (as Kafka's
  follower, which answers UNKNOWN_LEADER_EPOCH until its metadata has it:
  `actors.partition.roles` refuses such a push before it gets here).
- Position: records are appended only when the push starts exactly at the
  follower's log end; any other push appends nothing, and the answer (log
  end, last epoch) tells the leader where to resume. An empty push (a probe)
  is answered the same way.
- High watermark (ReplicaFetcherThread `processPartitionData`): the
  follower takes the leader's HWM clamped to its own log end, and only from
  a push that starts at its log end, the one position the leader has checked
  for divergence. Taking it from a probe could mark a divergent suffix as
  committed and, after a promotion, report it.
"""

from __future__ import annotations

from coordinator.errors import Errors


def check_push_epoch(known_epoch: int, push_epoch: int) -> Errors:
    """FENCED_LEADER_EPOCH for a push from an older leader epoch, else NONE (adopt it)."""
    return Errors.FENCED_LEADER_EPOCH if push_epoch < known_epoch else Errors.NONE


def appends_at(push_offset: int | None, log_end: int) -> bool:
    """Whether a push starting at `push_offset` (None: a probe) is appended."""
    return push_offset == log_end


def follower_high_watermark(
    current: int, leader_hwm: int, push_offset: int | None, log_end_before: int, log_end_after: int
) -> int:
    """The follower's HWM after a push: never past its log end, never back (a
    truncation lowers it, and is the caller's)."""
    if not appends_at(push_offset, log_end_before):
        return current
    return max(current, min(leader_hwm, log_end_after))
