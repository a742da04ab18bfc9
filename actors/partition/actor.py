"""OffsetPartition: the Ray actor shell around one offsets partition's runtime.

Every decision lives in `coordinator.runtime.PartitionRuntime` (lifecycle,
write-path rule, exactly-once answers) and the shard inside it. This shell
moves requests, time and I/O results in and answers out:
- requests enter through `handle`, `handle_wire` and `handle_batch` (with
  `collect`, `actors.partition.batches`); the runtime validates each one
  and answers a bad one to its caller alone;
- the log's appends, fsyncs, opening and closing run on one I/O thread, in
  order; snapshots and compaction run on a second thread, beside appends;
- background tasks (the load, and the serving loops of
  `actors.partition.serving`: flush, timers, topics, gauges, maintenance) are
  supervised: one that raises is a failure of the partition, never a silent
  end. Any failure moves the runtime to FAILED (every request in flight is
  answered NOT_COORDINATOR), closes the log on the I/O thread and reloads
  from it with backoff; a load the runtime refuses (log missing or behind
  what the partition acknowledged) is not retried and shows in `probe`.
  A storage error (a failed write, fsync, open or rename) of a replica of
  a replicated partition is a disk failure instead: it steps aside and
  recovers by itself (`actors.partition.recovery`); without replicas the
  reload checks the disk and cuts the log at its durable end.

Consumer groups (KIP-848) read the topics the leader gives its shard: the
view its log names right after every load, then the topic registry's
(`actors.partition.topics_watch`), read when the registry nudges
(`topics_changed`) and every `topics_refresh_interval_s`; the records this
writes follow the write path as a timer's do.

Replication (DESIGN 5b): every leader releases responses at its high
watermark (`actors.partition.leader`; without replicas that is the local
durable end, as before). With `replication_factor` > 1 each replica keeps
its log in `log.replica_dir(data_dir, node_id, partition)`; `node_id` is
the node's name (`actors.core.node_names`, or the name a test passes) and
is the replica's id in ISR lists. The role methods (the controller's
contract) are inherited from `actors.partition.roles`; `probe` and `info`
from `actors.partition.inspection`.
"""


from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import ray

from actors.core.metrics import PartitionMetrics
from actors.core.node_names import current_node_name
from actors.core.settings import ServiceSettings, SystemClock
from actors.core.wire import dumps_response
from actors.partition.batches import BatchAnswers, Mailboxes, check_batch_call
from actors.partition.ends_watch import EndsWatch
from actors.partition.export import LogExport
from actors.partition.follower import FollowerReplica
from actors.partition.handoff import HandoffPart
from actors.partition.inspection import PROBE_CONCURRENCY, PROBE_GROUP, PartitionInspection
from actors.partition.kafka_plug import KafkaListening, KafkaPlug
from actors.partition.leader import LeaderReplication, Leadership
from actors.partition.link import LinkServer
from actors.partition.phases import RejoinPhases
from actors.partition.recovery import DiskRecovery, close_quietly
from actors.partition.roles import LOAD_TASK, ReplicaRoles
from actors.partition.serving import ServingLoops
from actors.partition.topics_watch import TopicsWatch
from coordinator import Shard
from coordinator.checks import InvalidRequestError
from coordinator.records import Record
from coordinator.replication import DiskHealth, EpochCache
from coordinator.runtime import PartitionRuntime, RuntimeState, load_refusal
from log.epoch import read_leader_epoch
from log.errors import FencedEpochError, LogError
from log.fsutil import check_disk
from log.loader import groups_from, load_into
from log.partition import PartitionLog
from log.replica_state import ReplicaState

logger = logging.getLogger(__name__)
GC_YOUNG_THRESHOLD = 20_000
# Reload backoff after a failed load (a log another writer still locks, an I/O error).
LOAD_RETRY_INITIAL_S = 0.05
LOAD_RETRY_MAX_S = 2.0
UNLOAD_DRAIN_TIMEOUT_S = 5.0
# The replica id of a leader without replicas (it names no one else).
SOLE_REPLICA = "local"
# An uncommitted suffix larger than this at load holds every read until it commits.
SUFFIX_SCAN_MAX_BYTES = 1 << 20


class LoadRefused(Exception):
    """The log on this node must not be served (see `coordinator.runtime.load_refusal`)."""


class OffsetPartition(
    ReplicaRoles, DiskRecovery, LogExport, KafkaListening, ServingLoops, PartitionInspection
):
    """One offsets partition, or a standby (`partition` None) waiting to take one over.

    A standby is a started process with its code imported (all but the Kafka
    listener, which comes with leadership: `kafka_plug`): the controller
    promotes it with `assume(partition, epoch, known_end)` on failover, which
    saves the seconds a new actor process takes to start.
    """

    def __init__(
        self,
        partition: int | None,
        epoch: int,
        settings: ServiceSettings,
        node_id: str | None = None,
        requested_at: float | None = None,
    ) -> None:
        logging.basicConfig(level=logging.INFO)
        # The actor owns its process. A commit of 100 partitions allocates
        # some 500 tuples, nearly all freed by reference counting; with
        # CPython's default threshold (700) the cyclic collector would run
        # after every other commit and cost it a third of its time (measured).
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        self.partition = -1 if partition is None else partition
        self.epoch = epoch
        self.settings = settings
        # The partition's own event loop, where all its state lives (an actor's constructor
        # runs on it); `probe` comes in on another (PROBE_GROUP) and reads the state here.
        self._loop = _running_loop()
        self.clock = SystemClock()
        self.runtime = PartitionRuntime(self.partition)
        # Parked requests' answers of coalesced batches.
        self.mailboxes = Mailboxes(ttl_s=settings.mailbox_ttl_s)
        self.log: PartitionLog | None = None
        self.known_end = -1
        self.load_ms = 0.0
        self.loaded_records = 0
        # Grows while a load replays the log: the controller's sign of progress.
        self.progress = 0
        self._failures_seen = 0
        self._flush_wanted = asyncio.Event()
        self._timer_wake = asyncio.Event()
        self._timer_sleep_until: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # One thread: appends, fsyncs, opening and closing of this partition's log stay in order.
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offsets-log")
        # Snapshots and compaction run beside appends, never in front of them.
        self._maintenance = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offsets-maintenance")
        self.metrics = PartitionMetrics(self.partition)
        self._node_id = node_id
        self._state_written: ReplicaState | None = None
        self._epoch_replicas_written: tuple[int, tuple[str, ...]] | None = None
        # The leader role (every serving leader) or the follower role; neither
        # while loading, and after stepping down until the controller decides.
        self.leader: LeaderReplication | None = None
        self.follower: FollowerReplica | None = None
        # What the next load leads with (None: a leader without replicas).
        self._leadership: Leadership | None = None
        self._role_lock = asyncio.Lock()
        self._link_server: LinkServer | None = None  # listening once a leader asks (actors.partition.roles)
        # The disk under this replica's log (`actors.partition.recovery`).
        self.disk = DiskHealth()
        self._follow_after_recovery: tuple[int, str] | None = None
        self._durable_after_failure: int | None = None
        # The topics the shard's consumer groups see (`actors.partition.topics_watch`).
        self.topics = TopicsWatch(settings.namespace)
        self.ends = EndsWatch(self.topics)  # end offsets for live lag (`actors.partition.ends_watch`)
        self._topics_wake = asyncio.Event()
        # How long this replica takes to rejoin its leader (a restarted replica's one log line).
        self.phases = RejoinPhases(self.partition, requested_at)
        # Kafka clients straight to this leader (`actors.partition.kafka_plug`).
        self.kafka = KafkaPlug(self)
        # Its steps in a repartition (`actors.partition.handoff`).
        self.handoff = HandoffPart(lambda: self.runtime, self._deliver_driven, self.clock.now_ms)

    # ------------------------------------------------------------ lifecycle

    async def assume(self, partition: int, epoch: int, known_end: int = -1) -> str:
        """Promote a standby: become the leader of `partition` at `epoch` and load it."""
        if self.partition >= 0:
            raise RuntimeError(f"already the leader of partition {self.partition}")
        self.partition, self.epoch = partition, epoch
        self.runtime = PartitionRuntime(partition)
        self.metrics = PartitionMetrics(partition)
        return await self.activate(known_end)

    async def activate(self, known_end: int = -1) -> str:
        """Start loading the partition (idempotent); returns at once.

        `known_end`: the durable end the partition reached under earlier
        leaders, -1 if it was never loaded anywhere (see `load_refusal`).
        """
        if self.runtime.state is RuntimeState.INITIAL and self.partition >= 0:
            self.known_end = known_end
            self._spawn(self._load(), LOAD_TASK)
        return self.runtime.state.name

    async def wait_active(self, timeout_s: float = 60.0) -> str:
        deadline = time.monotonic() + timeout_s
        while self._loading() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return self.runtime.state.name

    def _loading(self) -> bool:
        state = self.runtime.state
        return state in (RuntimeState.INITIAL, RuntimeState.LOADING) or (
            state is RuntimeState.FAILED and not self.runtime.refused
        )

    async def _load(self) -> None:
        """LOADING until ACTIVE, retrying with backoff; a refusal or a fence ends it."""
        loop = asyncio.get_running_loop()
        delay = LOAD_RETRY_INITIAL_S
        while True:
            incarnation = self.runtime.begin_load()
            started = time.perf_counter()
            try:
                log, shard, records = await self._open_on_io(self._open_and_replay)
            except FencedEpochError:
                logger.warning("partition %d: epoch %d is fenced", self.partition, self.epoch)
                self._deliver(self.runtime.unload(self.clock.now_ms()))
                return
            except LoadRefused as exc:
                logger.error("partition %d: %s", self.partition, exc)
                self.runtime.on_load_failed(str(exc), refused=True)
                self._failures_seen = self.runtime.failures
                self.metrics.load_failed(refused=True)
                return
            except Exception as exc:
                if self._storage_failed(exc, "load"):
                    return
                logger.warning("partition %d: load failed, retry in %.2f s: %r", self.partition, delay, exc)
                self.runtime.on_load_failed(f"load failed: {exc!r}")
                self._failures_seen = self.runtime.failures  # this loop retries: nothing to recover
                self.metrics.load_failed(refused=False)
                await asyncio.sleep(delay)
                delay = min(delay * 2, LOAD_RETRY_MAX_S)
                continue
            if self.runtime.state is not RuntimeState.LOADING or self.runtime.incarnation != incarnation:
                await loop.run_in_executor(self._io, log.close)  # unloaded meanwhile
                return
            self._on_loaded(log, shard, records, started)
            return

    def _on_loaded(self, log: PartitionLog, shard: Shard, records: int, started: float) -> None:
        self.log, self.loaded_records = log, records
        self.disk.on_recovered()
        self._failures_seen = self.runtime.failures
        # What was loaded lives long: keep the collector from scanning it again.
        gc.freeze()
        self.load_ms = (time.perf_counter() - started) * 1000
        leadership = self._leadership
        if leadership is None:
            me = SOLE_REPLICA
            leadership = Leadership(self.epoch, 0, (me,), (me,), high_watermark=log.high_watermark)
        else:
            me = self.replica_id
            if self.leader is not None:  # a reload: the high watermark never goes back
                leadership.high_watermark = max(leadership.high_watermark, self.leader.state.high_watermark)
        end = log.log_end_offset
        self.leader = LeaderReplication(self, leadership, me, end, EpochCache(log.epoch_entries()))
        committed = self.leader.state.high_watermark
        self.runtime.writable = self.leader.state.writable
        # Before serving, on this thread: a bounded read of the uncommitted suffix, whose
        # groups' reads wait for it while other groups' are answered (`coordinator.runtime`).
        try:
            suffix = groups_from(log, committed, SUFFIX_SCAN_MAX_BYTES)
        except LogError as exc:  # then every read waits for the suffix, as before
            logger.warning("partition %d: reading the uncommitted suffix: %r", self.partition, exc)
            suffix = None
        self._deliver(self.runtime.on_loaded(shard, committed, self.clock.now_ms(), end, suffix))
        self._apply_topics(*self.topics.view_for_load(shard))
        self.topics.reset()
        self.ends.reset()
        logger.info(
            "partition %d epoch %d: loaded %d records in %.0f ms",
            self.partition, self.epoch, records, self.load_ms,
        )
        self._spawn_serving_loops()
        self.leader.spawn_tasks()
        self.kafka.start_once()

    def _open_and_replay(self) -> tuple[PartitionLog, Shard, int]:
        """On the I/O thread: open the log (never an empty one where data must be) and replay it."""
        directory = self._directory()
        exists = os.path.isdir(directory)
        if exists and read_leader_epoch(directory) > self.epoch:
            # Checked before waiting for the directory lock the leader holds.
            raise FencedEpochError(self.epoch, read_leader_epoch(directory))
        if not exists and (refusal := load_refusal(directory, False, -1, self.known_end)) is not None:
            raise LoadRefused(f"{refusal} (node {current_node_name()})")
        if self.disk.failed:
            check_disk(directory)
        log = PartitionLog.open(
            directory, self.epoch, self.settings.log, create=self.known_end < 0,
            durable_end=self._durable_after_failure,
        )
        try:
            refusal = load_refusal(directory, True, log.high_watermark, self.known_end)
            if refusal is not None:
                raise LoadRefused(f"{refusal} (node {current_node_name()})")
            shard = self._new_shard()
            stats = load_into(_Progress(shard, self), log)
            self._record_leadership()
        except BaseException:
            log.close()
            raise
        self._durable_after_failure = None
        return log, shard, stats.records

    def _new_shard(self) -> Shard:
        seed = int.from_bytes(os.urandom(8))
        return Shard(self.settings.coordinator, partition=self.partition, member_id_seed=seed)

    async def unload(self, epoch: int) -> str:
        """Emigration: answer everything NOT_COORDINATOR, stop the tasks, close the log."""
        if epoch < self.epoch or (self.runtime.state is RuntimeState.CLOSED and self.log is None):
            return self.runtime.state.name
        if self.runtime.state is not RuntimeState.CLOSED:
            self._deliver(self.runtime.unload(self.clock.now_ms()))
            await self._drain()
            self._deliver(self.runtime.abandon())
        if self.leader is not None:
            self.leader.stopped = True
        self.follower = None
        await self._stop_tasks()
        self.metrics.flush_counts()
        log, self.log = self.log, None
        if log is not None:
            await asyncio.get_running_loop().run_in_executor(self._io, log.close)
        return self.runtime.state.name

    async def _drain(self) -> None:
        """Wait (bounded) until what was decided before now is durable, or the flush failed."""
        self._flush_wanted.set()
        deadline = time.monotonic() + UNLOAD_DRAIN_TIMEOUT_S
        while (
            self.runtime.durable_end < self.runtime.written_end
            and any(t.get_name() == "flush" for t in self._tasks)
            and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.001)

    async def _stop_tasks(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -------------------------------------------------------------- requests

    async def handle(self, request: Any) -> Any:
        """One group protocol request; parked requests wait here for their answer.
        A malformed request raises InvalidRequestError to this caller alone."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._submit(request, partial(_resolve, future), self.clock.now_ms(), time.perf_counter())
        self._after_requests()
        response = await future
        if isinstance(response, InvalidRequestError):
            raise response
        return response

    async def handle_wire(self, request: Any) -> bytes:
        """`handle` with the response pickled, as the client calls it: Ray
        returns bytes for about 170 us less CPU per call than an object
        (its cloudpickle path), measured on both sides together."""
        return dumps_response(await self.handle(request))

    async def handle_batch(self, caller: Any, batch: Any, requests: Any) -> bytes:
        """Many requests in one Ray call (the client's coalescing, `actors.partition.batches`):
        answers once every request that cannot park is answered, with the pickled
        `(answers, parked, generation)`: `(index, response)` pairs, how many requests stay
        parked, whose answers the caller (`caller`, its id; `batch`, its number for this
        batch) then `collect`s, and the generation of the mailbox they wait in (0 when none
        waits). A malformed request's entry is an InvalidRequestError."""
        check_batch_call(caller, batch, requests)
        answers = BatchAnswers(requests)
        # One clock read for the batch: its requests arrived together.
        now_ms, started = self.clock.now_ms(), time.perf_counter()
        for index, request in enumerate(requests):
            self._submit(request, partial(answers.deliver, index), now_ms, started)
        self._after_requests()
        await answers.wait()
        parked, generation = answers.park_rest(self.mailboxes, caller, batch, len(requests))
        return dumps_response((answers.answered, parked, generation))

    async def collect(self, caller: Any, oldest: Any) -> bytes:
        """The pickled `(floor, answers)`: the next answers of `caller`'s parked requests,
        `(batch, index, response)` triples, once there is one, and the generation below
        which its mailboxes are gone with their answers; at once when the mailbox of
        generation `oldest` (the oldest `caller` waits on) is gone (`actors.partition.batches`)."""
        for name, value in (("caller's id", caller), ("oldest generation", oldest)):
            if type(value) is not int:
                raise InvalidRequestError(f"collect takes the {name}, an int, got {type(value).__name__}")
        return dumps_response(await self.mailboxes.collect(caller, oldest))

    def _submit(self, request: Any, deliver: Callable[[Any], None], now_ms: int, started: float) -> None:
        """Hand a request that arrived at `now_ms` (`started` on the perf counter) to the
        runtime; `deliver` gets its response once it is released (and durable). No future,
        task or callback per request: a batch of requests costs little more than its shard work."""
        self._deliver(self.runtime.submit(request, _Waiter(request, deliver, started), now_ms))

    def _after_requests(self) -> None:
        """Once per call: start a flush if records wait, and wake the timer
        task if the shard's next deadline moved earlier."""
        if self.runtime.has_pending:
            self._flush_wanted.set()
        if self.leader is not None:
            self.leader.wake_for_reads()
        deadline = self.runtime.next_deadline_ms()
        if deadline is not None and (self._timer_sleep_until is None or deadline < self._timer_sleep_until):
            self._timer_wake.set()

    def _deliver(self, released: Iterable[tuple[Any, Any]]) -> None:
        """Answer released requests; then act on a failure the runtime just took in."""
        metrics, now = self.metrics, time.perf_counter()  # one clock read for what is released together
        for waiter, response in released:
            metrics.observe(waiter.kind, response, waiter.started, now)
            waiter.deliver(response)
        if self.runtime.rebalances:
            metrics.rebalanced(self.runtime.rebalances)
            self.runtime.rebalances.clear()
        if self.runtime.failures != self._failures_seen and self.runtime.state is RuntimeState.FAILED:
            self._recover()

    # ------------------------------------------------------------ repartitioning

    async def handoff_export(self, routing: bytes, page: int = 0) -> dict[str, Any]:
        return await self.handoff.export(routing, page)

    async def handoff_admit(self, version: int, payload: bytes) -> dict[str, Any]:
        return await self.handoff.admit(version, payload)

    async def handoff_switch(self, routing: bytes) -> dict[str, Any]:
        return await self.handoff.switch(routing)

    async def handoff_abort(self) -> dict[str, Any]:
        return await self.handoff.abort()

    async def set_routing(self, routing: bytes) -> int | None:
        return self.handoff.route(routing)

    def _deliver_driven(self, released: Iterable[tuple[Any, Any]]) -> None:
        self._deliver(released)
        self._after_requests()

    # ------------------------------------------------------------ background

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(self._supervised(coro, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # A task cancelled before it ran never started `coro`: close it quietly.
        task.add_done_callback(lambda _: coro.close())

    async def _supervised(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """A task that raises fails the partition (logged, counted), which then reloads."""
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("partition %d: the %s task failed", self.partition, name)
            self.metrics.task_failed(name)
            if self._storage_failed(exc, f"the {name} task"):
                return
            self._deliver(self.runtime.on_task_failed(f"the {name} task failed: {exc!r}"))

    def _recover(self) -> None:
        """After a failure: stop the tasks, close the log on the I/O thread, reload."""
        self._failures_seen = self.runtime.failures
        self.metrics.failed()
        self._cancel_tasks_but_recovery()
        log, self.log = self.log, None
        if log is not None:
            if log.failed:
                self._durable_after_failure = log.high_watermark
            # Queued behind any append still running on the I/O thread; the
            # reload's open is queued behind the close.
            self._io.submit(close_quietly, log, self.partition)
        if not self.runtime.refused:
            self._spawn(self._load(), LOAD_TASK)


class _Waiter:
    """A request in the partition until its response is released (the runtime's token)."""

    __slots__ = ("request", "deliver", "started", "kind")

    def __init__(self, request: Any, deliver: Callable[[Any], None], started: float) -> None:
        self.request = request
        self.deliver = deliver
        self.started = started
        self.kind = type(request).__name__


class _Progress:
    """A replay target that counts the loader's steps into `owner.progress`."""

    __slots__ = ("shard", "owner")

    def __init__(self, shard: Shard, owner: OffsetPartition) -> None:
        self.shard, self.owner = shard, owner

    def replay_many(self, records: Iterable[Record]) -> None:
        self.shard.replay_many(records)
        self.owner.progress += 1


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # built outside a loop (a test): probes answer on the caller's loop
        return None


def _resolve(future: asyncio.Future[Any], response: Any) -> None:
    if not future.done():  # the caller may have gone (cancelled)
        future.set_result(response)


# What Ray creates partition actors from (`actors.controller.ray_cluster`): the class with
# `probe`'s concurrency group declared (Ray takes concurrency groups only here, not in `options`).
RemotePartition = ray.remote(concurrency_groups={PROBE_GROUP: PROBE_CONCURRENCY})(OffsetPartition)
