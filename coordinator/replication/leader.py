"""The leader's view of its partition's replicas: follower progress, ISR proposals, HWM.

Kafka's Partition.scala and Replica.scala (replication notes sections 1, 2
and 4), for one leader epoch: a new epoch, on this replica or another, is a
new `LeaderState` (the new leader's `makeLeader`).

Inputs: the leader's own log end (`on_local_append`) and durable end
(`on_local_durable`), each push it sends (`on_push_sent`), each follower's
answer to a push (`on_follower_ack`), time (`tick`), and the controller's
answers (`on_isr_committed`, `on_isr_rejected`). Outputs: `high_watermark`,
`writable`, `pending_isr_change` (to send to the controller),
`confirmed_seq` (how far reads are confirmed) and, per follower,
`next_fetch_offset` (where the next push starts).

Rules:
- Follower state starts unknown at promotion (`resetReplicaState`): no log
  end; ISR members count as caught up now, others never did.
- An answer from another leader epoch is refused and changes nothing. A
  diverging answer (`diverging_epoch`) is not an acknowledgement either: the
  leader sends the DivergingEpoch and waits for the next answer.
- Caught up (`isCaughtUp`): log end reached the leader's, or caught up
  within `replica_lag_time_max_ms`; the caught-up time follows
  `updateFetchStateOrThrow` (an answer that reached the leader's end seen at
  the previous answer dates the catch-up back to that previous answer).
- At most one ISR change in flight. Shrink (on `tick`): ISR followers not
  caught up. Expand (on an accepted answer): a follower whose log end is at
  least the HWM and the epoch start offset (KAFKA-7128).
- The HWM uses the maximal ISR: a pending shrink still counts the leaving
  members, a pending expand already counts the candidate; caught-up
  followers outside the ISR hold it back too, except one the committed ISR
  just dropped, until it answers again. It does not move while the
  committed ISR is below the effective min ISR, never goes back, and never
  passes the leader's durable end.
- Read confirmation (Raft's read index, adapted to push replication): every
  push gets the next number of one sequence (`on_push_sent`), and an answer
  of this leader epoch to push `s` confirms `s` for its follower, whether it
  acknowledges records or diverges (it proves the follower knew no newer
  epoch after the push was sent). `confirmed_seq` is the lowest confirmed
  push over the followers of the maximal ISR. Once it reaches `s`, no
  successor had served when this leader sent push `s`: a successor is
  elected only from that ISR (the controller's ISR is within the maximal
  one) and leads before it serves, and every member still answered this
  epoch after `s` was sent. So whatever the leader observed before sending
  `s` was no stale state. None: no other ISR member, no successor possible.

Departures: "never caught up" is None where Kafka uses time 0 (our clocks
may start at 0); a follower at the leader's log end is caught up only if it
answered within `replica_lag_time_max_ms` (push: the leader heartbeats every
follower, so a silent one is seen on a quiet partition too, where Kafka's
leader keeps it and leaves it to the controller's broker fencing); the
leader's log end may not shrink during an epoch (a leader whose log lost a
tail must step down, since followers may hold that tail under the same
epoch and a rewrite there could not be detected); the KIP-841 eligibility
check is left to the controller (`validate_isr_change`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from coordinator.errors import Errors
from coordinator.replication.controller import Replica, in_assignment_order
from coordinator.replication.divergence import check_leader_epoch, diverging_epoch
from coordinator.replication.epochs import EpochCache


class IsrChangeKind(Enum):
    EXPAND = "expand"
    SHRINK = "shrink"


@dataclass(frozen=True, slots=True)
class IsrChange:
    """A proposed ISR (an AlterPartition request): based on `partition_epoch`."""

    kind: IsrChangeKind
    isr: tuple[Replica, ...]
    leader: Replica
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AckResult:
    """NONE, or why the answer was refused; `diverging` is the DivergingEpoch to send."""

    error: Errors
    diverging: tuple[int, int] | None = None


class RejectAction(Enum):
    """What the leader does after the controller refused its ISR change."""

    IGNORED = "ignored"  # not the change in flight
    REVERTED = "reverted"  # back to the committed ISR; a new proposal may follow
    AWAIT_METADATA = "await-metadata"  # stays pending until on_isr_committed
    RESUBMIT = "resubmit"  # send the same change again


# Partition.scala `handleAlterPartitionError`.
_REVERT_ON = frozenset({Errors.OPERATION_NOT_ATTEMPTED, Errors.INELIGIBLE_REPLICA})
_AWAIT_ON = frozenset(
    {
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.FENCED_LEADER_EPOCH,
        Errors.INVALID_UPDATE_VERSION,
        Errors.INVALID_REQUEST,
    }
)


@dataclass(slots=True)
class FollowerState:
    """Replica.scala `ReplicaState`, as far as the leader needs it."""

    log_end: int | None = None  # from the last accepted answer; None = unknown
    last_caught_up_ms: int | None = None  # None = never
    last_ack_ms: int | None = None
    last_ack_leader_end: int | None = None
    diverged: bool = False
    # The newest push it answered in this leader epoch; 0 until it answers one
    # (a push of this epoch is numbered above every earlier push of this leader).
    confirmed_seq: int = 0


class LeaderState:
    """One leader epoch of one partition, seen from its leader."""

    def __init__(
        self,
        *,
        replicas: Sequence[Replica],
        isr: Sequence[Replica],
        leader: Replica,
        leader_epoch: int,
        partition_epoch: int,
        epoch_cache: EpochCache,
        epoch_start_offset: int,
        min_insync_replicas: int,
        replica_lag_time_max_ms: int,
        now_ms: int,
        high_watermark: int = 0,
        push_seq: int = 0,
    ) -> None:
        """`epoch_start_offset` is the leader's log end at promotion, all of it durable
        (a follower answers only after fsync). The leader's epoch cache gets
        (leader_epoch, epoch_start_offset) here, as in `makeLeader`; the log
        layer persists the same entry (`epoch_cache.entries`). `push_seq` is the
        last push number already used (a new epoch of the same leader goes on
        from its predecessor's, so reads held across it keep their numbers).
        """
        if leader not in isr or not set(isr) <= set(replicas):
            raise ValueError(f"leader {leader} and ISR {tuple(isr)} must be within {tuple(replicas)}")
        if high_watermark > epoch_start_offset:
            raise ValueError("the high watermark cannot be past the log end")
        self.replicas = tuple(replicas)
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.epoch_start_offset = epoch_start_offset
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._cache = epoch_cache.copy()
        self._cache.assign(leader_epoch, epoch_start_offset)
        self._isr = in_assignment_order(self.replicas, isr)
        self._pending: IsrChange | None = None
        self._log_end = epoch_start_offset
        self._durable_end = epoch_start_offset
        self._hwm = high_watermark
        self._push_seq = push_seq
        self._followers = {
            r: FollowerState(last_caught_up_ms=now_ms if r in self._isr else None)
            for r in self.replicas
            if r != leader
        }
        self._maybe_advance_hwm(now_ms)

    # -- outputs ---------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._hwm

    @property
    def isr(self) -> tuple[Replica, ...]:
        """The committed ISR."""
        return self._isr

    @property
    def maximal_isr(self) -> tuple[Replica, ...]:
        """The committed ISR plus the candidate of a pending expand."""
        if self._pending is not None and self._pending.kind is IsrChangeKind.EXPAND:
            return self._pending.isr
        return self._isr

    @property
    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, len(self.replicas))

    @property
    def writable(self) -> bool:
        """Whether an append is allowed (`appendRecordsToLeader`'s min ISR check)."""
        return len(self._isr) >= self.effective_min_isr

    @property
    def pending_isr_change(self) -> IsrChange | None:
        return self._pending

    @property
    def epoch_cache(self) -> EpochCache:
        return self._cache.copy()

    @property
    def log_end(self) -> int:
        return self._log_end

    @property
    def durable_end(self) -> int:
        return self._durable_end

    @property
    def push_seq(self) -> int:
        """The number of the newest push sent."""
        return self._push_seq

    @property
    def confirmed_seq(self) -> int | None:
        """The lowest push number every follower of the maximal ISR answered in this
        epoch; None when the maximal ISR is the leader alone (module rules)."""
        followers = self._followers
        confirmed = [followers[r].confirmed_seq for r in self.maximal_isr if r != self.leader]
        return min(confirmed) if confirmed else None

    def follower(self, replica: Replica) -> FollowerState:
        return self._followers[replica]

    def next_fetch_offset(self, replica: Replica) -> int | None:
        """Where the next push to `replica` starts; None: its log end is unknown (after
        promotion) or it must truncate first, so send an empty push and let
        its answer say where it is."""
        state = self._followers[replica]
        return None if state.diverged else state.log_end

    def is_caught_up(self, replica: Replica, now_ms: int) -> bool:
        state = self._followers[replica]
        lag_ms = self.replica_lag_time_max_ms
        heard = state.last_ack_ms
        if state.log_end is not None and state.log_end >= self._log_end and heard is not None:
            # Push departure: at the leader's end counts only while the follower still
            # answers the leader's heartbeats (module docstring).
            return now_ms - heard <= lag_ms
        caught_up = state.last_caught_up_ms
        return caught_up is not None and now_ms - caught_up <= lag_ms

    # -- inputs ----------------------------------------------------------

    def on_local_append(self, log_end: int, now_ms: int) -> None:
        """The leader's log now ends at `log_end` (written, maybe not durable yet)."""
        if log_end < self._log_end:
            raise ValueError(f"leader log end went back from {self._log_end} to {log_end}")
        self._log_end = log_end
        self._maybe_advance_hwm(now_ms)

    def on_local_durable(self, offset: int, now_ms: int) -> None:
        """Everything below `offset` is durable in the leader's own log."""
        self._durable_end = max(self._durable_end, offset)
        self._log_end = max(self._log_end, self._durable_end)
        self._maybe_advance_hwm(now_ms)

    def on_push_sent(self) -> int:
        """A push is being sent now: its number (module rules, read confirmation)."""
        self._push_seq += 1
        return self._push_seq

    def on_follower_ack(
        self,
        replica: Replica,
        leader_epoch: int,
        durable_leo: int,
        last_epoch: int,
        now_ms: int,
        push_seq: int | None = None,
    ) -> AckResult:
        """A follower answered push number `push_seq` of `leader_epoch`: its durable log
        end and the epoch of its last batch (Kafka's next Fetch)."""
        error = check_leader_epoch(self.leader_epoch, leader_epoch)
        if error is not Errors.NONE:
            return AckResult(error)
        if replica not in self._followers:
            return AckResult(Errors.NOT_LEADER_OR_FOLLOWER)
        state = self._followers[replica]
        if push_seq is not None:
            if push_seq > self._push_seq:
                raise ValueError(f"an answer to push {push_seq}, but the last push sent is {self._push_seq}")
            state.confirmed_seq = max(state.confirmed_seq, push_seq)
        diverging = diverging_epoch(self._cache, self._log_end, durable_leo, last_epoch)
        if diverging is not None:
            state.diverged = True
            return AckResult(Errors.NONE, diverging)
        self._update_fetch_state(state, durable_leo, now_ms)
        self._maybe_expand(replica, durable_leo)
        self._maybe_advance_hwm(now_ms)
        return AckResult(Errors.NONE)

    def on_follower_failed(self, replica: Replica, now_ms: int) -> None:
        """`replica` answered that its disk failed (KAFKA_STORAGE_ERROR): it holds
        nothing it can acknowledge until it recovered its log, so it is out of
        sync now rather than after the lag time, and an ISR member's removal is
        proposed at once."""
        state = self._followers.get(replica)
        if state is None:
            return
        state.log_end = state.last_caught_up_ms = state.last_ack_ms = state.last_ack_leader_end = None
        self.tick(now_ms)

    def tick(self, now_ms: int) -> None:
        """Time passed: propose removing ISR followers that fell out of sync."""
        if self._pending is None:
            out_of_sync = [r for r in self._isr if r != self.leader and not self.is_caught_up(r, now_ms)]
            if out_of_sync:
                remaining = tuple(r for r in self._isr if r not in out_of_sync)
                self._pending = self._change(IsrChangeKind.SHRINK, remaining)
        self._maybe_advance_hwm(now_ms)

    def on_isr_committed(
        self, isr: Sequence[Replica], leader_epoch: int, partition_epoch: int, now_ms: int
    ) -> bool:
        """The controller committed an ISR (an AlterPartition answer or new metadata).

        Ignored (False) for another leader epoch or an older partition epoch;
        a newer one is adopted, whatever was pending (`handleAlterPartitionUpdate`,
        `makeLeader`). The same partition epoch is news only as the answer
        "already so" to the pending change (Kafka's equal-epoch case): any other
        copy of the current version must not clear a proposal still in flight,
        or the controller could commit it after the HWM stopped counting it.
        """
        if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            return False
        if partition_epoch == self.partition_epoch and (
            self._pending is None or tuple(isr) != self._pending.isr
        ):
            return False
        if self.leader not in isr or not set(isr) <= set(self.replicas):
            raise ValueError(f"committed ISR {tuple(isr)} must hold the leader {self.leader}")
        for replica in set(self._isr) - set(isr):
            self._forget_caught_up(replica)
        self._isr = in_assignment_order(self.replicas, isr)
        self.partition_epoch = partition_epoch
        self._pending = None
        self._maybe_advance_hwm(now_ms)
        return True

    def on_isr_rejected(self, change: IsrChange, error: Errors, now_ms: int) -> RejectAction:
        """The controller refused `change` with `error` (`handleAlterPartitionError`)."""
        if change != self._pending:
            return RejectAction.IGNORED
        if error in _REVERT_ON:
            self._pending = None
            self._maybe_advance_hwm(now_ms)
            return RejectAction.REVERTED
        if error in _AWAIT_ON:
            return RejectAction.AWAIT_METADATA
        return RejectAction.RESUBMIT

    # -- rules -----------------------------------------------------------

    def _update_fetch_state(self, state: FollowerState, log_end: int, now_ms: int) -> None:
        """Replica.scala `updateFetchStateOrThrow`."""
        caught_up = state.last_caught_up_ms
        if log_end >= self._log_end:
            caught_up = now_ms if caught_up is None else max(caught_up, now_ms)
        elif (
            state.last_ack_leader_end is not None
            and state.last_ack_ms is not None
            and log_end >= state.last_ack_leader_end
        ):
            caught_up = state.last_ack_ms if caught_up is None else max(caught_up, state.last_ack_ms)
        state.last_caught_up_ms = caught_up
        state.last_ack_leader_end = max(self._log_end, state.last_ack_leader_end or 0)
        state.last_ack_ms = now_ms
        state.log_end = log_end
        state.diverged = False

    def _forget_caught_up(self, replica: Replica) -> None:
        """A replica the committed ISR dropped (the controller's verdict: gone, fenced, or
        restarting in a rolling restart) holds the HWM back again only once it answers
        again: never on the strength of answers from before (Kafka leaves fenced and
        shutting-down brokers out of the HWM, KIP-841). Its log end stays: pushes go on
        from it."""
        state = self._followers.get(replica)
        if state is not None:
            state.last_caught_up_ms = state.last_ack_ms = state.last_ack_leader_end = None

    def _maybe_expand(self, replica: Replica, log_end: int) -> None:
        """Partition.scala `maybeExpandIsr`: in sync = at the HWM and past the epoch start."""
        if self._pending is not None or replica in self._isr:
            return
        if log_end >= self._hwm and log_end >= self.epoch_start_offset:
            self._pending = self._change(IsrChangeKind.EXPAND, self._isr + (replica,))

    def _change(self, kind: IsrChangeKind, isr: tuple[Replica, ...]) -> IsrChange:
        ordered = in_assignment_order(self.replicas, isr)
        return IsrChange(kind, ordered, self.leader, self.leader_epoch, self.partition_epoch)

    def _maybe_advance_hwm(self, now_ms: int) -> None:
        """Partition.scala `maybeIncrementLeaderHW`."""
        if len(self._isr) < self.effective_min_isr:
            return
        candidate = self._durable_end
        maximal = self.maximal_isr
        for replica, state in self._followers.items():
            if replica in maximal or self.is_caught_up(replica, now_ms):
                if state.log_end is None:
                    return
                candidate = min(candidate, state.log_end)
        self._hwm = max(self._hwm, candidate)
