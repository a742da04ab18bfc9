"""The leader role of an offsets partition, in the actor: `LeaderState` and the tasks
that move its inputs (DESIGN 5b; the rules are in `coordinator.replication`).

Every leader goes through here, a partition without replicas too: its
`LeaderState` has no followers, so the high watermark is the local durable
end and the flush loop's one extra call per fsync is the whole cost
(measured: no change in the per-request benchmark). Rules:

- Responses are released at the HIGH WATERMARK: the flush loop reports the
  local durable end (`on_local_durable`), follower answers move the HWM, and
  the runtime releases up to it (`on_durable`). `runtime.writable` follows
  `LeaderState.writable` (min.insync.replicas).
- PUSH replication, one sender task per follower: it reads whole batches
  past the follower's log end (`next_fetch_offset`, `read_raw` on the I/O
  thread, at most `replication_max_bytes`) and sends the follower actor's
  `replicate(leader_epoch, leader, start_offset, batches, hwm)` over its
  replication link (`actors.partition.link`: a TCP connection, not a Ray call
  per push); with nothing new it waits for new durable data or a heartbeat
  (a quarter of replica_lag_time_max_ms), so a quiet follower stays caught
  up and receives the HWM. A DivergingEpoch answer is sent back as
  `truncate(...)` and that answer checked again. A follower
  that does not answer within half the lag time, or whose call fails, is
  simply not acknowledging; `tick` (every half lag time, Kafka's
  isr-expiration) shrinks the ISR after the lag time. A follower whose disk
  failed answers KAFKA_STORAGE_ERROR (`actors.partition.recovery`): it is out
  of sync at once and its removal from the ISR is proposed now.
- ISR changes go to the controller one at a time through
  `propose(change) -> (error, isr, leader_epoch, partition_epoch)`, and its
  answer is applied with `on_isr_committed` / `on_isr_rejected`; RESUBMIT
  resends after a backoff, AWAIT_METADATA waits for `on_metadata`.
- READS ARE CONFIRMED (`coordinator.runtime`, read confirmation): every
  push and truncation request takes the next push number
  (`LeaderState.on_push_sent`, handed to `runtime.on_push_sent` before it is
  sent), its answer confirms that number for its follower, and after every
  answer or ISR change the runtime hears `LeaderState.confirmed_seq`
  (`runtime.on_confirmed`). A response decided without records of its own
  waits for a push sent after it; so a sender with nothing new does not
  wait for the heartbeat while the runtime's `fence_wanted` reaches its last
  push, and `wake_for_reads` (the shell's call after requests and timers)
  wakes the senders once per new fence: reads cost one round trip of the
  link, shared by all that wait. `ServiceSettings.confirm_reads` False
  turns it off (the benchmark's baseline).
- Held responses older than commit_timeout_ms are answered as timed out
  (`runtime.expire_held`), checked with the tick.
- A newer leader epoch (a follower's FENCED_LEADER_EPOCH answer, or the
  controller's) deposes this leader: `on_deposed` is called once and every
  task here ends.
- The STATE FILE (`log.replica_state`, `partition-state.json` in the
  leader's directory; the I/O is the roles' `record_state`, on the
  partition's I/O thread) holds the committed state this leader leads with:
  written before the leader serves (`actors.partition.roles`) and at every committed
  ISR change, BEFORE the change is applied when it removes a member, after
  it when it only adds one. So the file's ISR is always a subset of the ISR
  the leader acknowledges with (a shrink pending at the controller still
  counts the old members, Kafka's maximal ISR). Why that makes it safe to
  rebuild the controller's metadata from these files after a full restart
  (`actors/controller/forgotten_logs.py`): the controller commits every state before a
  replica hears of it, so a file lags the controller's metadata and never
  leads it (it names no replica the controller did not put in the ISR); and
  since a leader acknowledges only with its own view of the ISR, a superset
  of its file's, every member of the newest leader's file's ISR holds every
  record that leader, or any before it, acknowledged (an ISR member holds
  everything below the high watermark).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from actors.partition.follower import PushAnswer
from actors.partition.link import FollowerLink
from coordinator.errors import Errors
from coordinator.replication import EpochCache, IsrChange, LeaderState, RejectAction
from coordinator.runtime import RuntimeState

if TYPE_CHECKING:
    from actors.partition.host import PartitionHost
    from log.replica_state import ReplicaState

logger = logging.getLogger(__name__)
# How soon a follower that answered KAFKA_STORAGE_ERROR is pushed to again.
STORAGE_RETRY_S = 0.2
# How soon a follower that was not told this epoch (or any role) yet is pushed to again.
ROLE_RETRY_S = 0.002
Propose = Callable[[IsrChange], Awaitable[Any]]


@dataclass(slots=True)
class Leadership:
    """What the controller made this replica: the leader of an epoch, with its replicas."""

    leader_epoch: int
    partition_epoch: int
    replicas: tuple[str, ...]
    isr: tuple[str, ...]
    # Replica id -> a handle with `replicate` and `truncate` (a Ray actor
    # handle); None while the replica has no actor (its node is gone).
    followers: dict[str, Any] = field(default_factory=dict)
    propose: Propose | None = None
    # The committed end known when this leadership (re)starts: a promoted
    # follower's HWM, or the HWM before a reload.
    high_watermark: int = 0


class StateRecorder(Protocol):
    """What a leader role asks of the roles part: the state file, and stepping down."""

    def replica_state(
        self, leader_epoch: int, partition_epoch: int, replicas: Sequence[str], isr: Sequence[str]
    ) -> ReplicaState: ...

    def record_state(self, state: ReplicaState) -> None: ...

    def on_deposed(self, newer_epoch: int) -> None: ...


class LeaderReplication:
    """One leader epoch of one partition in its actor: `host` is what the actor's parts
    share (`actors.partition.host`), `roles` the part that made this role."""

    def __init__(
        self, host: PartitionHost, roles: StateRecorder, leadership: Leadership, me: str, log_end: int,
        epochs: EpochCache,
    ) -> None:
        settings = host.settings
        self.host = host
        self.roles = roles
        self.leadership = leadership
        self.me = me
        self.state = LeaderState(
            replicas=leadership.replicas,
            isr=leadership.isr,
            leader=me,
            leader_epoch=leadership.leader_epoch,
            partition_epoch=leadership.partition_epoch,
            epoch_cache=epochs,
            epoch_start_offset=log_end,
            min_insync_replicas=settings.min_insync_replicas,
            replica_lag_time_max_ms=settings.replica_lag_time_max_ms,
            now_ms=host.clock.now_ms(),
            high_watermark=min(leadership.high_watermark, log_end),
            push_seq=host.runtime.push_seq,
        )
        lag_s = settings.replica_lag_time_max_ms / 1000
        self.heartbeat_s = lag_s / 4
        self.push_timeout_s = lag_s / 2
        self.tick_s = min(lag_s / 2, settings.commit_timeout_ms / 4000)
        self.max_bytes = settings.replication_max_bytes
        self.link_enabled = settings.replication_link
        self.confirm_reads = settings.confirm_reads
        self.stopped = False
        self._wakes = {replica: asyncio.Event() for replica in self.state.replicas if replica != me}
        # Per follower, the number of the last push sent to it; the fence last woken for.
        self._sent = dict.fromkeys(self._wakes, self.state.push_seq)
        self._woken_fence = -1
        if self.confirm_reads:
            host.deliver(host.runtime.on_confirmed(self.state.confirmed_seq))
        self._isr_wake = asyncio.Event()
        self._links: dict[str, FollowerLink] = {}

    @property
    def replicated(self) -> bool:
        return bool(self._wakes)

    def spawn_tasks(self) -> None:
        """Start the sender, tick and ISR tasks (none for a partition without replicas)."""
        if not self.replicated:
            return
        for replica in self._wakes:
            self.host.spawn(self._sender(replica), f"push-{replica}")
        self.host.spawn(self._ticker(), "isr-tick")
        self.host.spawn(self._proposer(), "isr-propose")

    # ------------------------------------------------------------ inputs

    def on_local_durable(self, end_offset: int, incarnation: int) -> None:
        """The flush loop made the local log durable up to `end_offset`."""
        runtime = self.host.runtime
        if incarnation != runtime.incarnation:
            return  # a batch of an earlier load: its requests were answered when that load failed
        self.state.on_local_durable(end_offset, self.host.clock.now_ms())
        for wake in self._wakes.values():
            wake.set()
        self._release(runtime)

    async def on_metadata(self, isr: tuple[str, ...], leader_epoch: int, partition_epoch: int) -> bool:
        """The controller's committed ISR for this leader (Kafka's makeLeader, same epoch)."""
        if leader_epoch > self.state.leader_epoch:
            self._depose(leader_epoch)
            return False
        changed = await self._commit_isr(isr, leader_epoch, partition_epoch)
        self._after_change()
        return changed

    async def _commit_isr(self, isr: tuple[str, ...], leader_epoch: int, partition_epoch: int) -> bool:
        """Apply a committed ISR, the state file written first if it drops a member
        and after if not (module rules); False if it was not news."""
        host = self.host
        recorded = self.roles.replica_state(leader_epoch, partition_epoch, self.state.replicas, isr)
        drops = not set(self.state.isr) <= set(isr)
        if drops and leader_epoch == self.state.leader_epoch:
            await host.on_io(self.roles.record_state, recorded)
            if self.stopped:
                return False
        changed = self.state.on_isr_committed(isr, leader_epoch, partition_epoch, host.clock.now_ms())
        if changed and not drops:
            await host.on_io(self.roles.record_state, recorded)
        return changed

    def _release(self, runtime: Any) -> None:
        runtime.writable = self.state.writable
        hwm = self.state.high_watermark
        if hwm > runtime.durable_end and runtime.state in (RuntimeState.ACTIVE, RuntimeState.CLOSED):
            self.host.deliver(runtime.on_durable(hwm, runtime.incarnation))
        if self.confirm_reads:
            confirmed = self.state.confirmed_seq
            if confirmed != runtime.confirmed_seq:
                self.host.deliver(runtime.on_confirmed(confirmed))

    def wake_for_reads(self) -> None:
        """Responses wait for a push newer than the last one sent: wake the senders
        now rather than at the next heartbeat (module rules)."""
        wanted = self.host.runtime.fence_wanted
        if wanted > self._woken_fence and not self.stopped:
            self._woken_fence = wanted
            for wake in self._wakes.values():
                wake.set()

    def _after_change(self) -> None:
        if self.stopped:
            return
        self._release(self.host.runtime)
        if self.state.pending_isr_change is not None:
            self._isr_wake.set()

    def _depose(self, newer_epoch: int) -> None:
        """A newer epoch exists. Not when this replica already leads it: the controller
        answered an ISR change of this leader's older epoch while the replica moved on to
        the new one (`ReplicaRoles._relead`, which stops this object once the epoch is on
        disk); deposing then would step the new leadership down."""
        if newer_epoch <= self.host.epoch:
            return
        if not self.stopped:
            self.stopped = True
            logger.warning(
                "partition %d: leader epoch %d is deposed by epoch %d",
                self.host.partition, self.state.leader_epoch, newer_epoch,
            )
            self.roles.on_deposed(newer_epoch)

    # ----------------------------------------------------------- pushing

    async def _sender(self, replica: str) -> None:
        links = self._links
        try:
            while not self.stopped:
                # Read each round: the controller replaces the handle of a follower it restarted.
                handle = self.leadership.followers.get(replica)
                if replica in links and links[replica].handle is not handle:
                    links.pop(replica).close()
                if handle is None:  # no actor yet: not acknowledging until the controller sends one
                    self._wakes[replica].clear()
                    await asyncio.sleep(self.heartbeat_s)
                    continue
                if replica not in links:
                    links[replica] = FollowerLink(handle, self.link_enabled)
                await self._push(replica, links[replica])
        finally:
            if replica in links:
                links.pop(replica).close()

    async def _push(self, replica: str, link: FollowerLink) -> None:
        """One push to `replica` (new batches or a heartbeat) and the truncations it calls for."""
        wake, state = self._wakes[replica], self.state
        offset = state.next_fetch_offset(replica)
        reads_wait = self.host.runtime.fence_wanted >= self._sent[replica]
        if offset is not None and offset >= state.durable_end and not reads_wait:
            wake.clear()
            try:
                await asyncio.wait_for(wake.wait(), self.heartbeat_s)
            except TimeoutError:
                pass
            offset = state.next_fetch_offset(replica)
        batches = b""
        if offset is not None and offset < state.durable_end:
            log = self.host.log
            assert log is not None, "a serving leader has its log open"
            batches = await self.host.on_io(log.read_raw, offset, self.max_bytes)
        answer, seq = await self._call(
            link, replica, "replicate", state.leader_epoch, self.me, offset, batches, state.high_watermark
        )
        while answer is not None and not self.stopped:
            diverging = self._on_answer(replica, answer, seq)
            if diverging is None:
                break
            answer, seq = await self._call(
                link, replica, "truncate", state.leader_epoch, self.me, diverging, answer.log_end,
                answer.last_epoch,
            )
        if self.stopped:
            return
        if answer is None:
            await asyncio.sleep(self.heartbeat_s)
        elif answer.error is Errors.KAFKA_STORAGE_ERROR:
            # It retries its disk with backoff: ask again soon, so it rejoins soon after.
            await asyncio.sleep(min(self.heartbeat_s, STORAGE_RETRY_S))
        elif answer.error in (Errors.UNKNOWN_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER):
            # Not told its role or this epoch by the controller yet (it is, right after this
            # leader): ask again soon rather than at once.
            await asyncio.sleep(min(self.heartbeat_s, ROLE_RETRY_S))

    async def _call(
        self, link: FollowerLink, replica: str, kind: str, *args: Any
    ) -> tuple[PushAnswer | None, int]:
        """A follower request and its push number; no answer (None) if it failed or did
        not answer in time (not acknowledging)."""
        seq = self.state.on_push_sent()
        if self.stopped:  # a new epoch's LeaderReplication numbers the pushes now
            return None, seq
        self.host.runtime.on_push_sent(seq)
        self._sent[replica] = seq
        try:
            return await asyncio.wait_for(link.request(kind, *args), self.push_timeout_s), seq
        except Exception as exc:  # a dead, hung (TimeoutError) or failing follower: no ack
            link.close()  # its answer, if one comes, must not be read as the next request's
            logger.debug("partition %d: push failed: %r", self.host.partition, exc)
            return None, seq

    def _on_answer(self, replica: str, answer: PushAnswer, seq: int) -> tuple[int, int] | None:
        """Feed one answer to LeaderState; the DivergingEpoch to send, if any."""
        state = self.state
        if answer.error is Errors.FENCED_LEADER_EPOCH and answer.leader_epoch > state.leader_epoch:
            self._depose(answer.leader_epoch)
            return None
        now = self.host.clock.now_ms()
        if answer.error is Errors.KAFKA_STORAGE_ERROR and not self.stopped:
            state.on_follower_failed(replica, now)  # out of sync now, not after the lag time
            self._after_change()
            return None
        if answer.error is not Errors.NONE or self.stopped:
            return None
        # The follower may have learnt a newer epoch while appending this push (a
        # replica's own new epoch): its log end counts, as a confirmation it does not.
        confirms = seq if answer.leader_epoch == state.leader_epoch else None
        result = state.on_follower_ack(
            replica, state.leader_epoch, answer.log_end, answer.last_epoch, now, push_seq=confirms
        )
        self._after_change()
        return result.diverging if result.error is Errors.NONE else None

    # ---------------------------------------------------------- ISR, time

    async def _ticker(self) -> None:
        host = self.host
        timeout_ms = host.settings.commit_timeout_ms
        while not self.stopped:
            await asyncio.sleep(self.tick_s)
            now = host.clock.now_ms()
            self.state.tick(now)
            host.deliver(host.runtime.expire_held(now, timeout_ms))
            self._after_change()

    async def _proposer(self) -> None:
        propose = self.leadership.propose
        sent: IsrChange | None = None
        while not self.stopped:
            await self._isr_wake.wait()
            self._isr_wake.clear()
            change = self.state.pending_isr_change
            if change is None or change is sent or propose is None or self.stopped:
                continue
            sent = change
            try:
                error, isr, leader_epoch, partition_epoch = await asyncio.wait_for(
                    propose(change), self.push_timeout_s
                )
            except Exception as exc:  # the controller is away or hung: resubmit later
                logger.warning("partition %d: ISR change not answered: %r", self.host.partition, exc)
                sent = None
                await self._resubmit_later()
                continue
            if self.stopped:
                return
            now = self.host.clock.now_ms()
            if Errors(error) is Errors.NONE:
                await self._commit_isr(tuple(isr), leader_epoch, partition_epoch)
            elif leader_epoch > self.state.leader_epoch:
                self._depose(leader_epoch)
                return
            elif self.state.on_isr_rejected(change, Errors(error), now) is RejectAction.RESUBMIT:
                sent = None
                await self._resubmit_later()
            self._after_change()

    async def _resubmit_later(self) -> None:
        await asyncio.sleep(self.heartbeat_s)
        self._isr_wake.set()

    # ------------------------------------------------------- inspection

    def describe(self) -> dict[str, Any]:
        state = self.state
        followers = {}
        for replica in self._wakes:
            follower = state.follower(replica)
            lag = None if follower.log_end is None else state.durable_end - follower.log_end
            link = self._links.get(replica)
            transport = None if link is None else link.transport
            followers[replica] = {"log_end": follower.log_end, "lag": lag, "transport": transport}
        return {
            "leader_epoch": state.leader_epoch,
            "partition_epoch": state.partition_epoch,
            "isr": list(state.isr),
            "high_watermark": state.high_watermark,
            "log_end": state.durable_end,
            "writable": state.writable,
            "pending_isr": None if state.pending_isr_change is None else list(state.pending_isr_change.isr),
            "followers": followers,
        }
