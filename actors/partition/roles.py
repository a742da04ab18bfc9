"""Role changes of a replicated offsets partition: the controller's contract (DESIGN 5b).

`ReplicaRoles` is a part of `OffsetPartition` (`actors.partition.actor`): the
actor's role methods delegate here. It owns the replica's roles: the leader
role (`leader`, a `LeaderReplication`), the follower role (`follower`, a
`FollowerReplica`), the `Leadership` the next load leads with, the role lock,
the replication link's listener, the state files last written and the rejoin
phases. Only this part assigns `leader` and `follower`; the others read them.
It reaches the rest through the host (`actors.partition.host`), the disk part
(`DiskGuard`) and the loader (`Loading`). Every method is idempotent for Ray's
retries, and a call naming an older leader epoch than this replica knows
changes nothing.
While the replica's disk has failed (`actors.partition.recovery`) it follows
no one and leads nothing: `become_follower` is remembered for when the disk
works again, `become_leader` raises, and pushes are answered
KAFKA_STORAGE_ERROR; a storage error in any of them is a disk failure.

- `become_follower(leader_epoch, leader, must_exist=False, replicas=())`: follow
  replica `leader`. The log is opened (or kept, with the new epoch recorded in its
  directory, and the epoch's `replicas` beside it: `epoch-replicas.json`, for a full
  restart's recovery) and replayed once into a hot shard; client requests are
  answered NOT_COORDINATOR. A leader told this steps down first
  (`on_deposed`). A missing directory is created empty (a new replica
  catching up), except with `must_exist` (an ISR member of a partition
  that holds data): then the call fails, so a lost disk never becomes a hot
  follower the controller could promote; the leader drops it from the ISR
  after the lag time and it follows afresh.
- `become_leader(leader_epoch, partition_epoch, replicas, isr, followers,
  controller=None, known_end=-1)`: lead. `followers` maps every other replica id to its
  actor handle (None: no actor yet); `controller` has `alter_isr.remote(partition, change)`
  answering `(error, isr, leader_epoch, partition_epoch)` (None: the ISR
  never changes). A follower is promoted with its hot shard: the runtime is
  ACTIVE on return, committed end its HWM, written end its log end, and
  nothing is loaded. A serving leader given a newer epoch (a replica moved)
  keeps its shard and serves on. Any other replica loads its log first (as
  `activate(known_end)`: `known_end` is the committed end the controller
  knows, so a missing or shorter log is refused, never served empty, and
  the leader starts with it as its high watermark).
  Every leader records the state it leads with in its directory
  (`partition-state.json`, `log.replica_state`) before it serves: see
  `actors/partition/leader.py` for when it is rewritten and why it is safe.
- `isr_committed(leader_epoch, partition_epoch, isr)`: an ISR the controller
  committed on its own (a dead node removed); a newer leader epoch deposes.
- `set_follower(leader_epoch, replica, handle)`: the controller restarted a
  follower's actor (same node, same disk); the leader pushes to it from now.
- `replicate(leader_epoch, leader, start_offset, batches, hwm)` and
  `truncate(leader_epoch, leader, diverging, seen_log_end, seen_last_epoch)`:
  a leader's pushes, answered with a `PushAnswer`. Leaders send them over
  the replication link (`replication_endpoint()`: this actor's listener,
  `actors.partition.link`); as Ray methods they stay callable. A push of an epoch
  the controller has not given this replica yet is UNKNOWN_LEADER_EPOCH, and deposes
  a leader it reaches (the controller's `become_follower` follows right after; the
  leader retries). A push of an older epoch is FENCED_LEADER_EPOCH; one to a replica
  with no role yet is NOT_LEADER_OR_FOLLOWER (the leader retries).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import ray

from actors.partition.follower import FollowerReplica, PushAnswer
from actors.partition.host import PartitionHost
from actors.partition.leader import LeaderReplication, Leadership
from actors.partition.link import LinkServer
from actors.partition.maintenance import MaintenanceProgress, maintain_once
from actors.partition.phases import RejoinPhases
from coordinator import Shard
from coordinator.errors import Errors
from coordinator.handoff import committed_routing
from coordinator.replication import UNDEFINED_EPOCH, DiskHealth, EpochCache
from coordinator.routing import Routing
from coordinator.runtime import PartitionRuntime, RuntimeState
from log.errors import is_storage_error
from log.loader import load_into
from log.partition import PartitionLog
from log.replica_state import ReplicaState, write_epoch_replicas, write_replica_state

logger = logging.getLogger(__name__)
# The replica id of a leader without replicas (it names no one else).
SOLE_REPLICA = "local"


class DiskGuard(Protocol):
    """What the roles ask of the disk part (`actors.partition.recovery.DiskRecovery`)."""

    disk: DiskHealth

    def note_follow_while_failed(self, leader_epoch: int, leader: str) -> None: ...

    def on_disk_failure(self, exc: BaseException, where: str) -> None: ...

    def storage_refusal(self) -> PushAnswer: ...


class Loading(Protocol):
    """What the roles ask of the loader (`actors.partition.loading.PartitionLoader`)."""

    async def activate(self, known_end: int = -1) -> str: ...

    def on_loaded(self, log: PartitionLog, shard: Shard, records: int, started: float) -> None: ...

    async def stop_loading(self) -> None: ...


class ReplicaRoles:
    """The follower and leader roles of one partition replica (module docstring)."""

    def __init__(self, host: PartitionHost, disk: DiskGuard, phases: RejoinPhases) -> None:
        self.host = host
        self._disk = disk
        # How long this replica takes to rejoin its leader (a restarted replica's one log line).
        self.phases = phases
        # The leader role (every serving leader) or the follower role; neither
        # while loading, and after stepping down until the controller decides.
        self.leader: LeaderReplication | None = None
        self.follower: FollowerReplica | None = None
        # What the next load leads with (None: a leader without replicas).
        self.leadership: Leadership | None = None
        self.lock = asyncio.Lock()
        self._link_server: LinkServer | None = None  # listening once a leader asks
        # The state file last written (read and written on the I/O thread only).
        self._state_written: ReplicaState | None = None
        # The epoch replicas file last written (I/O thread only).
        self._epoch_replicas_written: tuple[int, tuple[str, ...]] | None = None
        # The newest leader epoch the controller gave this replica (a role it took up): a
        # push of a newer one waits for it (`_pushed_follower`).
        self._told_epoch = UNDEFINED_EPOCH
        self._loading: Loading | None = None

    def attach(self, loading: Loading) -> None:
        """The loader, made after this part (it reads the roles)."""
        self._loading = loading

    @property
    def loading(self) -> Loading:
        assert self._loading is not None, "ReplicaRoles.attach was not called"
        return self._loading

    # ------------------------------------------------------------ contract

    async def become_follower(
        self, leader_epoch: int, leader: str, must_exist: bool = False, replicas: Sequence[str] = ()
    ) -> None:
        async with self.lock:
            if self._disk.disk.failed:
                self._disk.note_follow_while_failed(leader_epoch, leader)
                self._told(leader_epoch)
            else:
                try:
                    await self._follow(leader_epoch, leader, must_exist)
                    if replicas and self.follower is not None and self.host.epoch == leader_epoch:
                        await self.host.on_io(self._record_epoch_replicas, leader_epoch, tuple(replicas))
                    self._told(leader_epoch)  # its pushes are taken from now: the record is on disk
                except Exception as exc:
                    if not is_storage_error(exc):
                        raise
                    self._disk.on_disk_failure(exc, "following")

    async def become_leader(
        self,
        leader_epoch: int,
        partition_epoch: int,
        replicas: Sequence[str],
        isr: Sequence[str],
        followers: Mapping[str, Any],
        controller: Any = None,
        known_end: int = -1,
    ) -> None:
        host = self.host
        me = host.replica_id
        if me not in isr or not set(isr) <= set(replicas) or set(followers) != set(replicas) - {me}:
            raise ValueError(
                f"replica {me} cannot lead replicas {tuple(replicas)} with ISR {tuple(isr)} "
                f"and followers {sorted(followers)}"
            )
        async with self.lock:
            current = self.leader
            already = current is not None and current.state.leader_epoch == leader_epoch
            if leader_epoch < host.epoch or already:
                return
            disk = self._disk.disk
            if disk.failed:
                raise RuntimeError(
                    f"replica {me} of partition {host.partition} cannot lead: its disk failed "
                    f"({disk.error}); it retries by itself"
                )
            self._told(leader_epoch)
            leadership = Leadership(
                leader_epoch, partition_epoch, tuple(replicas), tuple(isr), dict(followers),
                None if controller is None else _proposer(controller, host.partition),
            )
            try:
                await self._lead(leadership, known_end)
            except Exception as exc:
                if is_storage_error(exc):
                    self._disk.on_disk_failure(exc, "becoming the leader")
                raise

    async def _lead(self, leadership: Leadership, known_end: int) -> None:
        """`become_leader`'s work, under the role lock."""
        host = self.host
        self.phases.abandon()  # a leader does not rejoin anyone
        if self._leads_in_place():
            await self._relead(leadership)
            return
        leader_epoch = leadership.leader_epoch
        # The state file first, on every path: no directory (this one, or a follower's, which
        # hears of the epoch only from this leader or once it leads) ever holds a leader epoch
        # that no state file records (forgotten_logs refuses such a partition). Where no
        # directory exists yet, one is made for it only if the partition may start empty.
        if self.follower is not None or host.log is not None:
            await host.on_io(self.record_state, self._leadership_state(leadership))
        else:
            self.leadership = leadership
            await host.on_io(self.record_leadership, known_end < 0)
        if self.follower is None and host.log is not None:
            await self._follow(leader_epoch, host.replica_id)  # a deposed leader: rebuild its shard
        if self.follower is not None:
            await self._promote(self.follower, leadership)
        else:
            # What the controller saw committed is committed in this ISR member's log too.
            leadership.high_watermark = max(leadership.high_watermark, known_end)
            host.epoch, self.leadership = leader_epoch, leadership
            if host.runtime.state is RuntimeState.CLOSED:  # unloaded, or its disk lost the log
                host.runtime = PartitionRuntime(host.partition)
            await self.loading.activate(known_end)

    async def isr_committed(self, leader_epoch: int, partition_epoch: int, isr: Sequence[str]) -> bool:
        leader = self.leader
        return leader is not None and await leader.on_metadata(tuple(isr), leader_epoch, partition_epoch)

    async def set_follower(self, leader_epoch: int, replica: str, handle: Any) -> bool:
        """The controller restarted follower `replica` as actor `handle`: push there now."""
        leadership = self.leadership
        if self.leader is None or leadership is None or leadership.leader_epoch != leader_epoch:
            return False
        if replica not in leadership.followers:
            raise ValueError(f"{replica!r} is not a follower of partition {self.host.partition}")
        leadership.followers[replica] = handle
        return True

    async def replicate(
        self, leader_epoch: int, leader: str, start_offset: int | None, batches: bytes, leader_hwm: int
    ) -> PushAnswer:
        follower = await self._pushed_follower(leader_epoch, leader)
        if not isinstance(follower, FollowerReplica):
            return follower
        try:
            answer = await follower.replicate(leader_epoch, leader, start_offset, batches, leader_hwm)
        except Exception as exc:
            return self._push_failed(exc, "replicated append")
        self.host.gc.tick()  # between pushes: freeze what they built once it grew enough
        return answer

    async def truncate(
        self,
        leader_epoch: int,
        leader: str,
        diverging: tuple[int, int],
        seen_log_end: int,
        seen_last_epoch: int,
    ) -> PushAnswer:
        follower = await self._pushed_follower(leader_epoch, leader)
        if not isinstance(follower, FollowerReplica):
            return follower
        try:
            return await follower.truncate(leader_epoch, leader, diverging, seen_log_end, seen_last_epoch)
        except Exception as exc:
            return self._push_failed(exc, "truncation")

    async def replication_endpoint(self) -> tuple[str, int, bytes]:
        """(host, port, token) of this replica's replication link, listening from now on."""
        if self._link_server is None:
            settings = self.host.settings
            self._link_server = LinkServer(
                self._link_request,
                max(settings.replication_max_bytes, settings.log.offsets_segment_bytes),
                idle_timeout_s=2 * settings.replica_lag_time_max_ms / 1000,
            )
        return await self._link_server.endpoint(ray.util.get_node_ip_address())

    async def _link_request(self, kind: str, args: tuple[Any, ...]) -> PushAnswer:
        return await (self.replicate(*args) if kind == "replicate" else self.truncate(*args))

    # ------------------------------------------------- for the other parts

    def start_leading(self, log: PartitionLog) -> LeaderReplication:
        """A load (or a promotion) is done: the leader role over `log`, with the leadership
        this replica was given (a leader without replicas when none was)."""
        host = self.host
        leadership = self.leadership
        if leadership is None:
            me = SOLE_REPLICA
            leadership = Leadership(host.epoch, 0, (me,), (me,), high_watermark=log.high_watermark)
        else:
            me = host.replica_id
            if self.leader is not None:  # a reload: the high watermark never goes back
                leadership.high_watermark = max(leadership.high_watermark, self.leader.state.high_watermark)
        end = log.log_end_offset
        self.leader = LeaderReplication(host, self, leadership, me, end, EpochCache(log.epoch_entries()))
        return self.leader

    def leads(self) -> bool:
        """Serving the partition as its leader."""
        leader = self.leader
        return self.host.runtime.state is RuntimeState.ACTIVE and leader is not None and not leader.stopped

    def stop(self) -> None:
        """The partition unloads: the leader role's tasks end, the follower role is dropped."""
        if self.leader is not None:
            self.leader.stopped = True
        self.follower = None

    def step_aside(self) -> tuple[int, str] | None:
        """The disk failed: drop both roles now; the (leader epoch, leader) followed, if any."""
        follower, leader = self.follower, self.leader
        followed = None if follower is None else (follower.leader_epoch, follower.leader)
        if follower is not None:
            follower.retired = True
            self.follower = None
        if leader is not None:
            leader.stopped = True
            self.leader = None
        return followed

    def resume_following(self, log: PartitionLog, shard: Shard, leader: str) -> None:
        """The disk works again: follow `leader` with the reopened log and its shard."""
        host = self.host
        self.follower = FollowerReplica(log, shard, host.epoch, leader, host.io, host.new_shard)
        host.spawn(self._follower_maintenance(self.follower), "follower-maintenance")

    def view(self) -> dict[str, Any]:
        """Role, epochs, ISR, high watermark, log end; per follower its log end and lag."""
        view: dict[str, Any] = dict.fromkeys(_ROLE_KEYS)
        view["leader_epoch"] = self.host.epoch
        if self.follower is not None:
            view.update(self.follower.describe(), role="follower")
        elif self.leader is not None:
            view.update(self.leader.describe(), role="leader")
        elif self._disk.disk.failed:
            view["role"] = "failed"
        else:
            view["role"] = "deposed" if self.host.log is not None else "none"
        return view

    # ------------------------------------------------------- state files

    def replica_state(
        self, leader_epoch: int, partition_epoch: int, replicas: Sequence[str], isr: Sequence[str]
    ) -> ReplicaState:
        """The state file's content for this replica leading with these epochs and ISR, and
        the routing its shard owns groups by once a repartition ran (a full restart resumes or
        ends the repartition from it, `actors/controller/forgotten_logs.py`)."""
        settings = self.host.settings
        shard = self.host.runtime.shard
        owner = committed_routing(shard) if shard is not None else None
        count = settings.num_partitions if owner is None else owner.partitions
        routing = "" if owner is None else owner.encode().decode("ascii")
        return ReplicaState(
            tuple(replicas), tuple(isr), self.host.replica_id, leader_epoch, partition_epoch,
            count, settings.replication_factor, routing,
        )

    def _leadership_state(self, leadership: Leadership) -> ReplicaState:
        return self.replica_state(
            leadership.leader_epoch, leadership.partition_epoch, leadership.replicas, leadership.isr
        )

    def record_state(self, state: ReplicaState) -> None:
        """On the I/O thread (which orders the writes): write the state file unless what it
        says was written already. The epochs and ISR are the newest of the two; the routing
        is what either knows (`Routing.merged`: a routing only grows), so a routing pushed
        after an ISR change moved the partition epoch past this replica's leadership (whose
        state then reads as older) is recorded still, and a state computed before a push
        never takes the push's routing back out."""
        written = self._state_written
        if written is not None:
            newest = written if state.version < written.version else state
            state = _with_routing(newest, written.routing if newest is state else state.routing)
            if state == written:
                return
        write_replica_state(self.host.directory(), state, self.host.settings.log.fsync)
        self._state_written = state

    def _record_epoch_replicas(self, leader_epoch: int, replicas: tuple[str, ...]) -> None:
        """On the I/O thread: the replica set of the epoch this follower follows (log/replica_state.py)."""
        if self._epoch_replicas_written != (leader_epoch, replicas):
            write_epoch_replicas(self.host.directory(), leader_epoch, replicas, self.host.settings.log.fsync)
            self._epoch_replicas_written = (leader_epoch, replicas)

    def record_leadership(self, create: bool = True) -> None:
        """On the I/O thread: the state the next load leads with, in the replica's
        directory, which is made first with `create` (else skipped while it is missing)."""
        if self.leadership is None or self.host.settings.replication_factor == 1:
            return
        directory = self.host.directory()
        if create:
            os.makedirs(directory, exist_ok=True)
        if os.path.isdir(directory):
            self.record_state(self._leadership_state(self.leadership))

    # --------------------------------------------------------- transitions

    def _told(self, leader_epoch: int) -> None:
        self._told_epoch = max(self._told_epoch, leader_epoch)

    async def _pushed_follower(self, leader_epoch: int, leader: str) -> FollowerReplica | PushAnswer:
        """The follower a push goes to, or the answer that refuses it.

        A push of a leader epoch the controller has not given this replica yet is refused
        UNKNOWN_LEADER_EPOCH (Kafka's follower learns epochs from the controller alone), and
        a leader it reaches is deposed: the epoch enters this replica's directory only with
        `become_follower`, after the epoch's replica set is recorded beside it. Otherwise a
        full restart that lost the new leader's disk could find a directory of an epoch no
        record names the replicas of, and hold the partition for an operator
        (`actors.controller.forgotten_logs`). The leader pushes again shortly."""
        if self._disk.disk.failed:
            return self._disk.storage_refusal()
        if leader_epoch > self._told_epoch:
            if self.leader is not None and leader_epoch > self.host.epoch:
                async with self.lock:  # not in the middle of a role change
                    if self.leader is not None and leader_epoch > self.host.epoch:
                        self.on_deposed(leader_epoch)
            return PushAnswer(Errors.UNKNOWN_LEADER_EPOCH, self.host.epoch, -1, UNDEFINED_EPOCH, 0)
        return self._refusal(leader_epoch) if self.follower is None else self.follower

    def _push_failed(self, exc: Exception, where: str) -> PushAnswer:
        """A push that raised: a failed disk is answered KAFKA_STORAGE_ERROR, anything else raises."""
        if not is_storage_error(exc):
            raise exc
        self._disk.on_disk_failure(exc, where)
        return self._disk.storage_refusal()

    def _refusal(self, leader_epoch: int) -> PushAnswer:
        epoch = self.host.epoch
        error = Errors.FENCED_LEADER_EPOCH if leader_epoch < epoch else Errors.NOT_LEADER_OR_FOLLOWER
        return PushAnswer(error, epoch, -1, UNDEFINED_EPOCH, 0)

    async def _follow(self, leader_epoch: int, leader: str, must_exist: bool = False) -> None:
        """Become (or stay) a follower; under the role lock."""
        host = self.host
        if leader_epoch < host.epoch:
            return
        if self.follower is not None:
            await self.follower.adopt(leader_epoch, leader)
            host.epoch = self.follower.leader_epoch
            return
        if self.leader is not None:
            self.on_deposed(leader_epoch)
        host.epoch = leader_epoch
        await self.loading.stop_loading()
        self.phases.mark("role")
        log, shard = await host.on_io(self._open_for_follower, host.log, leader_epoch, must_exist)
        host.log = log
        self.phases.mark("log open")
        self.follower = FollowerReplica(
            log, shard, leader_epoch, leader, host.io, host.new_shard, self.phases, host.replica_id
        )
        host.deliver(host.runtime.follow(host.clock.now_ms()))
        host.spawn(self._follower_maintenance(self.follower), "follower-maintenance")
        host.gc.freeze_now()  # the replayed log lives long
        host.heap.settle()

    async def _follower_maintenance(self, follower: FollowerReplica) -> None:
        """A follower maintains its own log as a leader does (`actors.partition.maintenance`; Kafka's
        log cleaner runs on every replica), up to its high watermark: its disk
        does not fill with history, and a later load replays live state. Until
        its role ends; a failed round is logged and counted, and the next one
        tries again; a round the disk failed is a disk failure
        (`actors.partition.recovery`)."""
        host = self.host
        progress = MaintenanceProgress(follower.high_watermark)
        while True:
            await asyncio.sleep(host.settings.maintenance_interval_s)
            if self.follower is not follower or follower.retired:
                return
            try:
                await maintain_once(
                    follower.log, follower.high_watermark, progress, host.settings, host.maintenance,
                    host.clock.now_ms,
                )
            except Exception as exc:
                logger.exception("partition %d: follower log maintenance failed", host.partition)
                host.metrics.task_failed("follower-maintenance")
                if is_storage_error(exc):
                    self._disk.on_disk_failure(exc, "log maintenance")
                    return

    def _open_for_follower(
        self, log: PartitionLog | None, leader_epoch: int, must_exist: bool = False
    ) -> tuple[PartitionLog, Any]:
        """On the I/O thread: the replica's log at `leader_epoch`, replayed into a new shard."""
        if log is not None and log.failed:
            log.close()
            log = None
        host = self.host
        if log is None:
            log = PartitionLog.open(host.directory(), leader_epoch, host.settings.log, create=not must_exist)
        else:
            log.bump_epoch(leader_epoch)
        try:
            shard = host.new_shard()
            load_into(shard, log)
        except BaseException:
            log.close()
            raise
        return log, shard

    async def _promote(self, follower: FollowerReplica, leadership: Leadership) -> None:
        """Follower -> leader with the hot shard: no load (the log is already durable)."""
        host = self.host
        log = follower.log
        await follower.retire(leadership.leader_epoch)
        host.epoch = leadership.leader_epoch
        leadership.high_watermark = follower.high_watermark
        self.leadership, self.follower, self.leader = leadership, None, None
        host.runtime = PartitionRuntime(host.partition)
        host.runtime.begin_load()
        self.loading.on_loaded(log, follower.shard, 0, time.perf_counter())

    def _leads_in_place(self) -> bool:
        """Leading and serving: a new epoch of this leader keeps its shard (`_relead`)."""
        leader = self.leader
        return (
            leader is not None and not leader.stopped and self.follower is None and self.host.log is not None
            and self.host.runtime.state is RuntimeState.ACTIVE
        )

    async def _relead(self, leadership: Leadership) -> None:
        """A new epoch of this leader (a replica moved, Kafka bumps the epoch): the
        same shard serves on, nothing is loaded. Appends switch to the new epoch
        first; the epoch starts where the log ends once the appends queued before
        the switch are written; responses held for the old epoch's high watermark
        are released by the new one's."""
        host = self.host
        log, old = host.log, self.leader
        assert log is not None and old is not None
        # Before the epoch is on disk (`_lead`), and before the new ISR counts (a moved
        # replica left it: module rules of actors.partition.leader). Only then do appends
        # take the new epoch: an append queued on the I/O thread before the state file
        # reads `host.epoch` when it runs, and would put the epoch on disk first.
        await host.on_io(self.record_state, self._leadership_state(leadership))
        host.epoch = leadership.leader_epoch
        await host.on_io(log.bump_epoch, leadership.leader_epoch)
        old.stopped = True  # its senders, ticker and proposer end; the flush loop reads `leader`
        leadership.high_watermark = old.state.high_watermark
        self.leadership = leadership
        epochs = EpochCache(log.epoch_entries())
        self.leader = LeaderReplication(host, self, leadership, host.replica_id, log.log_end_offset, epochs)
        host.runtime.writable = self.leader.state.writable
        self.leader.spawn_tasks()

    def on_deposed(self, newer_epoch: int) -> None:
        """A newer leader epoch exists: stop serving now, keep the log, wait for the controller."""
        host = self.host
        leader, self.leader = self.leader, None
        if leader is not None:
            leader.stopped = True
        host.deliver(host.runtime.step_down(host.clock.now_ms()))
        host.cancel_tasks()


_ROLE_KEYS = ("role", "leader_epoch", "partition_epoch", "isr", "high_watermark", "log_end", "followers")


def _proposer(controller: Any, partition: int) -> Any:
    def propose(change: Any) -> Any:
        return controller.alter_isr.remote(partition, change)

    return propose


def _with_routing(state: ReplicaState, other: str) -> ReplicaState:
    """`state` knowing the routing `other` records too (both committed: switch records and
    the controller's pushes)."""
    if not other or other == state.routing:
        return state
    known = Routing.decode(other.encode("ascii"))
    if state.routing:
        known = Routing.decode(state.routing.encode("ascii")).merged(known)
    return dataclasses.replace(state, routing=known.encode().decode("ascii"), num_partitions=known.partitions)
