"""PartitionRuntime: the lifecycle and the write-path rule of one offsets partition, sans I/O.

Kafka's `CoordinatorRuntime` is the model. The runtime owns the partition's
`Shard` and everything between a request and its response; its driver (the
Ray actor, or a test) moves requests, time and I/O results in, and records
and released responses out. It never reads a clock or touches a file.

Lifecycle, a transition table (`ALLOWED_FROM`):
INITIAL -> LOADING -> ACTIVE -> CLOSED, and FAILED -> LOADING after any
failure. A load that finds the log missing or behind what the partition
acknowledged is *refused*: FAILED for good, until an operator moves it.

Rules:
- Every submitted request gets exactly one response: a request is in flight
  (`_inflight`) from `submit` until its response is released, and only a
  request still in flight can be answered.
- A bad request (`validate_request`) is answered `InvalidRequestError` and
  never reaches the shard; the partition goes on serving everyone else.
- Write path: the shard decides and applies in memory; its records join the
  pending batch (`take_batch`), and its responses are held until every
  record that could have affected them is durable (`on_durable`), so
  nothing is observed that a failure could take back. That BARRIER is the
  written end for a Result that wrote records (its own are the last
  written). A response of a Result without records (a read, a heartbeat, an
  error) waits only for the records of the groups its request names
  (`REQUEST_GROUPS`; a record's key carries its group): the runtime keeps,
  per group, the written end after that group's last record. ListGroups and
  any request not in the table wait for the written end. So a read of a
  group whose records are all committed is answered at once even while
  another group's write waits for a commit that cannot happen yet (Kafka's
  new coordinator reads at the last committed offset from a snapshot of its
  timeline state; without such snapshots a read waits for its own group's
  writes, as Kafka's OffsetFetch with require_stable does).
- Failures are inputs (`on_append_failed`, `on_task_failed`, a shard that
  raises, a log that reports an unexpected offset): the runtime moves to
  FAILED, drops the shard and the pending records, and answers every
  request in flight NOT_COORDINATOR. The driver then reloads from the log,
  which holds only durable records.

Replication (DESIGN 5b) adds these inputs, all free for a partition without
followers (its driver releases at its own durable end, as before):
- `on_durable` receives the high watermark, not the local fsync. A promoted
  follower's log may hold an uncommitted suffix, so `on_loaded` takes a
  committed end and a written end that may differ, and the groups whose
  records are in that suffix (`suffix_groups`): their responses wait for
  the written end. Unknown suffix groups (None): every response waits for
  it, as a read that observed the suffix must.
- `writable` False (the ISR is below min.insync.replicas): requests that
  write (`WRITE_REQUESTS`) are answered at submit COORDINATOR_NOT_AVAILABLE
  (Kafka's NOT_ENOUGH_REPLICAS, `coordinator.replication.outcomes`) and
  never reach the shard; reads and heartbeats go on.
- READ CONFIRMATION (`on_push_sent`, `on_confirmed`; the sequence numbers
  are `coordinator.replication.leader`'s): while other replicas could be
  elected in this leader's place (`confirmed_seq` not None), a response of
  a Result without records is released only once every follower of the
  maximal ISR answered, in this leader epoch, a push sent after the
  response was decided (its FENCE is the last push number sent by then):
  a deposed leader that resumes from a pause answers no read from its
  stale state, since its next push meets the new epoch and `step_down`
  answers NOT_COORDINATOR. A response released at the high watermark past
  its own records needs nothing more: those records were acknowledged by
  every ISR follower after they were written. `fence_wanted` tells the
  driver to push at once (one round trip, shared by every waiting read).
- `expire_held(now_ms, timeout_ms)`: a response held longer than
  offsets.commit.timeout.ms (for a commit, or for a confirmation) is
  answered as REQUEST_TIMED_OUT maps (COORDINATOR_NOT_AVAILABLE, OffsetFetch
  NOT_COORDINATOR), once: the high watermark reaching it later finds it
  answered; a driver's step (`drive`) held as long is answered TIMED_OUT, which the
  controller retries like any refused step. `step_down` answers everything in flight NOT_COORDINATOR at
  once: a deposed leader's held records may never be committed, so none of
  them may be acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from enum import Enum
from typing import Any
from uuid import UUID

from coordinator.checks import InvalidRequestError, validate_request
from coordinator.committed import CommittedOffsets, offset_writes
from coordinator.errors import Errors
from coordinator.handoff import HandoffAnswer
from coordinator.held import Held, HeldResponses
from coordinator.lag_watch import LagWatchRequest
from coordinator.messages import (
    AssignmentWatchRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    Request,
    SyncGroupRequest,
)
from coordinator.records import Record
from coordinator.replication.outcomes import group_error
from coordinator.service_state import ServiceStateWriteRequest
from coordinator.shard import Result, Shard
from coordinator.status import CoordinatorStatus, error_response, precheck

Token = Hashable
Released = list[tuple[Token, Any]]
_MISSING = object()
# The stand-in request of a driver's step (`PartitionRuntime.drive`) while its answer waits.
_DRIVEN = object()
NOT_SERVING = HandoffAnswer(Errors.NOT_COORDINATOR, "the partition is not serving as its leader")
NOT_WRITABLE = HandoffAnswer(Errors.NOT_ENOUGH_REPLICAS, "the partition is below min.insync.replicas")
TIMED_OUT = HandoffAnswer(Errors.REQUEST_TIMED_OUT, "not committed within offsets.commit.timeout.ms")

# Requests whose handling may write records: refused while the ISR is below
# min.insync.replicas (Kafka's appendRecordsToLeader check, before writing).
WRITE_REQUESTS: frozenset[type] = frozenset(
    {
        ConsumerGroupHeartbeatRequest,
        JoinGroupRequest,
        SyncGroupRequest,
        LeaveGroupRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        DeleteGroupsRequest,
        ServiceStateWriteRequest,
    }
)



def _group_of(request: Any) -> tuple[str, ...]:
    return (request.group_id,)


def _groups_of(request: Any) -> tuple[str, ...]:
    return tuple(request.group_ids)


# The groups whose records a request's response may depend on (module rules);
# a request type not here (ListGroups) depends on every group.
REQUEST_GROUPS: dict[type, Callable[[Any], tuple[str, ...]]] = {
    ConsumerGroupHeartbeatRequest: _group_of,
    JoinGroupRequest: _group_of,
    SyncGroupRequest: _group_of,
    HeartbeatRequest: _group_of,
    LeaveGroupRequest: _group_of,
    OffsetCommitRequest: _group_of,
    OffsetFetchRequest: _group_of,
    OffsetDeleteRequest: _group_of,
    DescribeGroupsRequest: _groups_of,
    DeleteGroupsRequest: _groups_of,
    ConsumerGroupDescribeRequest: _groups_of,
    AssignmentWatchRequest: _group_of,
    LagWatchRequest: _group_of,
}
# Group ends kept before those already committed are dropped (then twice the survivors).
GROUP_ENDS_PRUNE_AT = 65_536


class RuntimeState(Enum):
    INITIAL = "INITIAL"
    LOADING = "LOADING"
    ACTIVE = "ACTIVE"
    FAILED = "FAILED"
    CLOSED = "CLOSED"


S = RuntimeState
# Target state -> the states it may be entered from.
ALLOWED_FROM: dict[RuntimeState, frozenset[RuntimeState]] = {
    S.INITIAL: frozenset(),
    S.LOADING: frozenset({S.INITIAL, S.FAILED}),
    S.ACTIVE: frozenset({S.LOADING}),
    S.FAILED: frozenset({S.LOADING, S.ACTIVE}),
    S.CLOSED: frozenset({S.INITIAL, S.LOADING, S.ACTIVE, S.FAILED}),
}

# What a request gets from a partition that is not ACTIVE (Kafka's
# validateGroupStatus): loading, and failed while it reloads, are "load in
# progress"; closed is "not the coordinator".
STATUS_BY_STATE = {
    S.INITIAL: CoordinatorStatus.LOADING,
    S.LOADING: CoordinatorStatus.LOADING,
    S.FAILED: CoordinatorStatus.LOADING,
    S.ACTIVE: CoordinatorStatus.ACTIVE,
    S.CLOSED: CoordinatorStatus.NOT_COORDINATOR,
}


class IllegalRuntimeTransition(RuntimeError):
    def __init__(self, current: RuntimeState, target: RuntimeState) -> None:
        super().__init__(f"illegal partition runtime transition {current.value} -> {target.value}")


def load_refusal(directory: str, exists: bool, log_end: int, known_end: int) -> str | None:
    """Why a log must not be served, or None.

    `known_end` is what the partition acknowledged under earlier leaders: -1
    for a partition never loaded anywhere (a new, empty directory is then
    right); otherwise its directory must exist and reach that offset. A
    missing or shorter log means this node does not hold the partition's
    data (a node-local disk): serving it would forget acknowledged commits.
    """
    if known_end < 0:
        return None
    if not exists:
        return (
            f"log directory {directory} is missing, but the partition was served before "
            f"with durable end {known_end}: refusing to serve it empty"
        )
    if log_end < known_end:
        return (
            f"log in {directory} ends at offset {log_end}, behind the durable end {known_end} "
            "the partition acknowledged: refusing to serve it"
        )
    return None


class PartitionRuntime:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.state = RuntimeState.INITIAL
        self.shard: Shard | None = None
        # Why the partition last failed (None while all is well), and whether
        # that failure is a refusal to serve, which no reload can mend.
        self.failure: str | None = None
        self.refused = False
        self.failures = 0
        # Bumped by every load: a batch taken before a failure must not be
        # acknowledged after it.
        self.incarnation = 0
        # Released up to here (the high watermark) and written up to here.
        self.durable_end = 0
        self.written_end = 0
        # False while the ISR is below min.insync.replicas: writes are refused.
        self.writable = True
        # Join phases completed (their durations, ms), for the driver's metrics.
        self.rebalances: list[int] = []
        self._inflight: dict[Token, Request] = {}
        self._held = HeldResponses()
        # Group id -> the written end after its last record (only ends above the
        # committed end matter); every response waits at least for `_floor` (a
        # loaded suffix whose groups are unknown).
        self._group_ends: dict[str, int] = {}
        # The groups whose records the loaded log held above its committed end, with
        # that written end: their earlier values are unknown, so OffsetFetch waits.
        self._suffix_ends: dict[str, int] = {}
        # Offsets before their uncommitted writes: OffsetFetch answers the committed ones.
        self._committed = CommittedOffsets()
        self._group_ends_prune_at = GROUP_ENDS_PRUNE_AT
        self._floor = 0
        # Read confirmation (module rules): the last push number sent, and how far every
        # maximal-ISR follower confirmed (None: reads need no confirmation).
        self.push_seq = 0
        self.confirmed_seq: int | None = None
        self._pending: list[Record] = []

    # ------------------------------------------------------------ lifecycle

    def _transition(self, target: RuntimeState) -> None:
        if self.state not in ALLOWED_FROM[target]:
            raise IllegalRuntimeTransition(self.state, target)
        self.state = target

    def begin_load(self) -> int:
        """INITIAL or FAILED -> LOADING; returns the new incarnation."""
        self._transition(RuntimeState.LOADING)
        self.incarnation += 1
        return self.incarnation

    def on_loaded(
        self,
        shard: Shard,
        durable_end: int,
        now_ms: int,
        written_end: int | None = None,
        suffix_groups: Iterable[str] | None = None,
    ) -> Released:
        """LOADING -> ACTIVE with a shard replayed from a log durable (committed) up to
        `durable_end` and written up to `written_end` (default: the same), the
        records in between being of `suffix_groups` (None: unknown)."""
        written = durable_end if written_end is None else written_end
        if written < durable_end:
            raise ValueError(f"written end {written} is below the committed end {durable_end}")
        self._transition(RuntimeState.ACTIVE)
        self.shard = shard
        self.durable_end, self.written_end = durable_end, written
        self._group_ends = {} if suffix_groups is None else dict.fromkeys(suffix_groups, written)
        self._suffix_ends = dict(self._group_ends)
        self._committed.clear()
        self._floor = written if suffix_groups is None else durable_end
        self.failure, self.refused = None, False
        return self._run(lambda: shard.on_loaded(now_ms), "starting the loaded partition's timers", now_ms)

    def on_load_failed(self, reason: str, refused: bool = False) -> None:
        """LOADING -> FAILED; a refused load is not retried."""
        self._transition(RuntimeState.FAILED)
        self.failure, self.refused = reason, refused
        self.failures += 1

    def follow(self, now_ms: int) -> Released:
        """The replica follows a leader now: `unload` (it is not the coordinator),
        and a refusal to serve its log from an earlier load no longer stands,
        since that log is now the leader's copy (it may lead again once the
        leader has it back in the ISR)."""
        released = self.unload(now_ms) if self.state is not RuntimeState.CLOSED else []
        self.failure, self.refused = None, False
        return released

    def unload(self, now_ms: int) -> Released:
        """Emigration: -> CLOSED. Parked requests are answered NOT_COORDINATOR;
        held responses still wait for `on_durable`, then `abandon` answers the rest."""
        shard, self.shard = self.shard, None
        was_active = self.state is RuntimeState.ACTIVE
        self._transition(RuntimeState.CLOSED)
        if not was_active or shard is None:
            return self.abandon()
        try:
            return self._apply(shard.unload(now_ms), now_ms)
        except Exception as exc:  # the shard is discarded either way
            self.failure = f"unloading failed: {exc!r}"
            return self.abandon()

    def abandon(self) -> Released:
        """Answer every request still in flight NOT_COORDINATOR (after unload's drain, or on failure)."""
        inflight, self._inflight = self._inflight, {}
        self._held.clear()
        self._committed.clear()
        self._pending = []
        return [(token, _error_response(request)) for token, request in inflight.items()]

    def step_down(self, now_ms: int) -> Released:
        """This replica lost leadership: -> CLOSED, everything in flight NOT_COORDINATOR now.

        Unlike `unload`, nothing waits for `on_durable`: the held records may
        never reach the new leader's log."""
        if self.state is RuntimeState.CLOSED:
            return self.abandon()
        return self.unload(now_ms) + self.abandon()

    # -------------------------------------------------------------- failure

    def on_append_failed(self, reason: str) -> Released:
        return self._fail(f"append failed: {reason}")

    def on_task_failed(self, reason: str) -> Released:
        return self._fail(reason)

    def _fail(self, reason: str) -> Released:
        """-> FAILED: only durable records survive, as in Kafka's runtime."""
        if self.state not in ALLOWED_FROM[RuntimeState.FAILED]:
            return self.abandon() if self.state is RuntimeState.CLOSED else []
        self._transition(RuntimeState.FAILED)
        self.failure, self.refused = reason, False
        self.failures += 1
        self.shard = None
        return self.abandon()

    # -------------------------------------------------------------- requests

    def submit(self, request: Request, token: Token, now_ms: int, validated: bool = False) -> Released:
        """Decide on one request; returns the responses released now (maybe its own).
        `validated`: the caller checked it already (`validate_request`, as the Ray path's
        authorizer does before it reads a request's fields): not checked twice."""
        if not validated:
            try:
                validate_request(request)
            except InvalidRequestError as exc:
                return [(token, exc)]
        if self.state is not RuntimeState.ACTIVE:
            return [(token, precheck(request, STATUS_BY_STATE[self.state]))]
        if not self.writable and type(request) in WRITE_REQUESTS:
            return [(token, error_response(request, group_error(Errors.NOT_ENOUGH_REPLICAS)))]
        shard = self.shard
        assert shard is not None
        self._inflight[token] = request
        return self._run(
            lambda: shard.handle(request, now_ms, token), f"handling {type(request).__name__}", now_ms
        )

    def poll_timers(self, now_ms: int) -> Released:
        """Fire the shard's expired timers."""
        shard = self.shard
        if self.state is not RuntimeState.ACTIVE or shard is None:
            return []
        try:
            results = shard.poll_timers(now_ms)
        except Exception as exc:
            return self._fail(f"the shard broke an invariant firing timers: {exc!r}")
        released: Released = []
        for result in results:
            released += self._apply(result, now_ms)
        return released

    def next_deadline_ms(self) -> int | None:
        return self.shard.next_deadline_ms() if self.shard is not None else None

    def update_topics(
        self, partition_counts: Mapping[str, int], topic_ids: Mapping[str, UUID], now_ms: int
    ) -> Released:
        """The driver's view of the topics changed (`Shard.update_topics`): its
        records join the pending batch and follow the write path, as a timer's do."""
        shard = self.shard
        if self.state is not RuntimeState.ACTIVE or shard is None:
            return []
        return self._run(
            lambda: shard.update_topics(partition_counts, now_ms, topic_ids), "updating the topics", now_ms
        )

    def drive(self, step: Any, token: Token, now_ms: int, writes: bool) -> Released:
        """A driver's step on the shard (`Shard.drive`), answered to `token` once every
        record before its answer is durable, as a request's. A step that `writes` is
        refused below min ISR like a write request."""
        shard = self.shard
        if self.state is not RuntimeState.ACTIVE or shard is None:
            return [(token, NOT_SERVING)]
        if writes and not self.writable:
            return [(token, NOT_WRITABLE)]
        self._inflight[token] = _DRIVEN  # type: ignore[assignment]
        return self._run(lambda: shard.drive(step, now_ms, token), "driving a handoff", now_ms)
    def update_end_offsets(
        self, samples: list[tuple[str, int, int, int]], whole: bool, now_ms: int
    ) -> Released | None:
        """End offsets for the shard's live lag (`Shard.update_end_offsets`): the lag watches
        they answer, released as any response; None when no shard is serving (the driver
        then asks the registry for the whole view again)."""
        shard = self.shard
        if self.state is not RuntimeState.ACTIVE or shard is None:
            return None
        return self._run(
            lambda: shard.update_end_offsets(samples, whole, now_ms), "updating end offsets", now_ms
        )

    def _run(self, step: Any, what: str, now_ms: int) -> Released:
        try:
            result = step()
        except Exception as exc:
            return self._fail(f"the shard broke an invariant {what}: {exc!r}")
        return self._apply(result, now_ms)

    def _apply(self, result: Result, now_ms: int) -> Released:
        """Queue a Result's records; release its responses now or hold them (module rules)."""
        records = result.records
        if records:
            self._pending.extend(records)
            if result.offsets_before:
                writes = offset_writes(records, self.written_end + 1, result.offsets_before)
                self._committed.on_written(writes)
            end = self.written_end = self.written_end + len(records)
            ends = self._group_ends
            for record in records:
                ends[record.key.group_id] = end
            if len(ends) > self._group_ends_prune_at:
                self._prune_group_ends()
        if result.rebalances:
            self.rebalances.extend(result.rebalances)
        released: Released = []
        inflight, durable_end = self._inflight, self.durable_end
        confirming = self.confirmed_seq is not None and self.state is RuntimeState.ACTIVE
        for token, response in result.responses:
            if records:
                self._held.hold_write(self.written_end, token, response, now_ms)
                continue
            request = inflight.get(token, _MISSING)
            if request is _MISSING:
                continue
            if type(request) is OffsetFetchRequest:
                response = self._committed.rewrite(request, response)
                barrier = self._suffix_barrier(request.group_id)
            else:
                barrier = self._barrier(request)
            fence = self.push_seq if confirming else None
            if barrier > durable_end or fence is not None:
                self._held.hold_read(barrier, fence, token, response, now_ms, durable_end)
            else:
                del inflight[token]
                released.append((token, response))
        return released

    def _barrier(self, request: Any) -> int:
        """The end of the last record a response to `request` may depend on."""
        groups_of = REQUEST_GROUPS.get(type(request))
        if groups_of is None:
            return self.written_end
        ends, barrier = self._group_ends, self._floor
        for group in groups_of(request):
            end = ends.get(group, 0)
            if end > barrier:
                barrier = end
        return barrier

    def _suffix_barrier(self, group: str) -> int:
        """What an OffsetFetch of `group` waits for: its records in the loaded suffix."""
        return max(self._floor, self._suffix_ends.get(group, 0))

    def _prune_group_ends(self) -> None:
        durable_end = self.durable_end
        self._group_ends = {g: end for g, end in self._group_ends.items() if end > durable_end}
        self._group_ends_prune_at = max(GROUP_ENDS_PRUNE_AT, 2 * len(self._group_ends))

    def _answer(self, ready: list[Held]) -> Released:
        """The responses of `ready` entries whose requests still wait for them."""
        inflight = self._inflight
        return [(h.token, h.response) for h in ready if inflight.pop(h.token, _MISSING) is not _MISSING]

    # ------------------------------------------------------------ durability

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def take_batch(self) -> list[Record]:
        """The records to append next, in order; they end at `written_end`."""
        batch, self._pending = self._pending, []
        return batch

    def on_durable(self, end_offset: int, incarnation: int) -> Released:
        """The log is durable up to `end_offset`: release what waited for it."""
        if incarnation != self.incarnation or self.state not in (RuntimeState.ACTIVE, RuntimeState.CLOSED):
            return []  # a batch of an earlier load: its requests were answered when that load failed
        if not self.durable_end <= end_offset <= self.written_end:
            return self._fail(
                f"the log reported durable end {end_offset}, outside [{self.durable_end}, {self.written_end}]"
            )
        self.durable_end = end_offset
        self._committed.on_committed(end_offset)
        if end_offset == self.written_end and self._group_ends:
            self._group_ends = {}  # every group's records are committed
            self._suffix_ends = {}
        return self._answer(self._held.on_committed(end_offset, self.confirmed_seq))

    def on_push_sent(self, push_seq: int) -> None:
        """The driver sent push number `push_seq`: responses decided from now on wait for a later one."""
        self.push_seq = max(self.push_seq, push_seq)

    def on_confirmed(self, confirmed_seq: int | None) -> Released:
        """Every follower of the maximal ISR answered push `confirmed_seq` or a later
        one in this leader epoch (None: no follower needs to): release the
        responses decided before it was sent whose barrier is durable."""
        self.confirmed_seq = confirmed_seq
        return self._answer(self._held.on_confirmed(confirmed_seq))

    def expire_held(self, now_ms: int, timeout_ms: int) -> Released:
        """Answer responses held `timeout_ms` or longer as a timed-out write (module rules).

        Held responses are in the order they were decided, so the oldest lead."""
        released: Released = []
        inflight = self._inflight
        for held in self._held.expire(now_ms, timeout_ms):
            request = inflight.pop(held.token, _MISSING)
            if request is _DRIVEN:
                released.append((held.token, TIMED_OUT))
            elif request is not _MISSING:
                fetch = type(request) is OffsetFetchRequest
                error = group_error(Errors.REQUEST_TIMED_OUT, offset_fetch=fetch)
                released.append((held.token, error_response(request, error)))  # type: ignore[arg-type]
        return released

    @property
    def oldest_held_ms(self) -> int | None:
        """When the oldest held response was decided, or None."""
        return self._held.oldest_ms

    @property
    def fence_wanted(self) -> int:
        """The newest fence a held response waited on (-1: none): the driver pushes at
        once while its last push to a follower is not newer."""
        return self._held.fence_wanted

    # ------------------------------------------------------------ inspection

    @property
    def inflight(self) -> int:
        return len(self._inflight)


def _error_response(request: Request) -> Any:
    if request is _DRIVEN:
        return NOT_SERVING
    return error_response(request, Errors.NOT_COORDINATOR)
