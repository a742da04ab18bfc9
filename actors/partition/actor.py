"""OffsetPartition: the Ray actor shell around one offsets partition's runtime.

Every decision lives in `coordinator.runtime.PartitionRuntime` (lifecycle,
write-path rule, exactly-once answers) and the shard inside it. This shell
moves requests, time and I/O results in and answers out:
- requests enter through `handle`, `handle_wire` and `handle_batch` (with
  `collect`, `actors.partition.batches`); the runtime validates each one
  and answers a bad one to its caller alone; with the Ray path's
  authorizer on (`ServiceSettings.ray_credentials`) each call's credential
  and each request are checked first (`actors.partition.ray_guard`); the
  service's own components and the leader's Kafka listener (which
  authorizes its clients itself) use the unchecked `serve`, `serve_wire`
  and `serve_batch`;
- the log's appends, fsyncs, opening and closing run on one I/O thread, in
  order; snapshots and compaction run on a second thread, beside appends;
- background tasks (the load, and the serving loops: flush, timers, topics,
  gauges, maintenance) are supervised: one that raises is a failure of the
  partition, never a silent end. Any failure moves the runtime to FAILED
  (every request in flight is answered NOT_COORDINATOR), closes the log on
  the I/O thread and reloads from it with backoff; a load the runtime
  refuses (log missing or behind what the partition acknowledged) is not
  retried and shows in `probe`. A storage error (a failed write, fsync,
  open or rename) of a replica of a replicated partition is a disk failure
  instead: it steps aside and recovers by itself; without replicas the
  reload checks the disk and cuts the log at its durable end.

Consumer groups (KIP-848) read the topics the leader gives its shard: the
view its log names right after every load, then the topic registry's
(`actors.partition.topics_watch`), read when the registry nudges
(`topics_changed`) and every `topics_refresh_interval_s`; the records this
writes follow the write path as a timer's do.

Replication (DESIGN 5b): every leader releases responses at its high
watermark (`actors.partition.leader`; without replicas that is the local
durable end). With `replication_factor` > 1 each replica keeps its log in
`log.replica_dir(data_dir, node_id, partition)`; `node_id` is the node's name
(`actors.core.node_names`, or the name a test passes) and is the replica's
id in ISR lists.

Structure: the actor is PARTS, each an object that owns its state; the
actor builds them, wires them and delegates every actor method to one of
them. A part sees the others only through the narrow interface it declares
(a `Protocol` in its own module), and what they all share through the host.

  part (module)                 owns                                  actor methods
  PartitionHost (host)          partition, epoch, settings, clock,    -
                                runtime, log, metrics, I/O threads,
                                the tasks (spawn, cancel), deliver
  PartitionLoader (loading)     known_end, LoadStats (load_ms,        activate, assume, wait_active,
                                loaded_records, progress); the        unload
                                lifecycle
  ReplicaRoles (roles)          leader, follower, leadership, role    become_follower, become_leader,
                                lock, link listener, state files,     isr_committed, set_follower,
                                rejoin phases                         replicate, truncate,
                                                                      replication_endpoint
  DiskRecovery (recovery)       disk health, the leader to follow     -
                                after it, the failed log's end
  ServingLoops (serving)        flush/timer/topic wake-ups, topics,   topics_changed
                                settings changed online
  LogExport (export)            the latest listing, backups' holds    log_files, read_log_file,
                                                                      hold_backup, read_held_file,
                                                                      release_backup
  KafkaPlug (kafka_plug)        the Kafka listener                    kafka_listener
  RayGuard (ray_guard)          the Ray path's credentials and ACLs   - (the request path's check)
  HandoffPart (handoff)         nothing (drives the runtime)          handoff_export, handoff_fence,
                                                                      handoff_admit, handoff_switch,
                                                                      handoff_abort, precopy_begin,
                                                                      precopy_round, precopy_export,
                                                                      precopy_confirm, precopy_admit,
                                                                      precopy_switch,
                                                                      set_routing (and retire: the
                                                                      loader's unload, then the rename)
  PartitionInspection           nothing (reads the others)            probe, info
    (inspection)
  the actor itself              mailboxes; the request path           handle, handle_wire,
                                                                      handle_batch, serve,
                                                                      serve_wire, serve_batch,
                                                                      collect, ping, noop, noop_batch

Who calls whom: the loader starts the others serving once a load is done
(`on_loaded`: roles.start_leading, serving.apply_load_view and spawn_loops,
the leader's tasks, kafka.start_once) and reloads after a failure (the
host's `deliver` and task supervisor call `loader.recover`). The roles call
the loader (`activate`, `on_loaded` for a promotion, `stop_loading`) and the
disk part (`DiskGuard`: is the disk failed, take a failure); the disk part
calls the roles (`RoleHolder`: `step_aside`, `resume_following`, the lock).
The serving loops, the export and the listener only read the roles
(`leader`, `follower`, `leads`). Only the roles assign `leader` and
`follower`; only the loader, the roles and the disk part assign the host's
`log`, `epoch` and `runtime` (and `assume`, a standby's promotion). The
handoff part runs a repartition's steps on the runtime for the controller. A
new part is one more module: a class
taking the host and the narrow interfaces of the parts it needs, built in
`__init__` below, its actor methods delegating to it, its tasks spawned
through the host (so a failure fails the partition and a role change
cancels them). A part that feeds the runtime outside a request (as the
topics do) hands what the runtime released to `host.deliver`, then calls
`serving.after_requests` so that new records are flushed and timers rearmed.

The read-only properties below (`runtime`, `log`, `leader`...) are views
for tests and tools; the parts never go through them.
"""


from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import ray

from actors.core.metrics import PartitionMetrics
from actors.core.settings import ServiceSettings, SystemClock
from actors.core.wire import dumps_response
from actors.partition.batches import BatchAnswers, Mailboxes, check_batch_call
from actors.partition.export import LogExport
from actors.partition.follower import FollowerReplica, PushAnswer
from actors.partition.handoff import HandoffPart
from actors.partition.host import PartitionHost
from actors.partition.inspection import (
    NOOP_RESPONSE,
    PROBE_CONCURRENCY,
    PROBE_GROUP,
    PartitionInspection,
    noop_batch_response,
)
from actors.partition.kafka_plug import KafkaPlug, ListenerView
from actors.partition.leader import LeaderReplication
from actors.partition.loading import LoadStats, PartitionLoader
from actors.partition.phases import RejoinPhases
from actors.partition.ray_guard import RayGuard, completing, decisions_for
from actors.partition.recovery import DiskRecovery
from actors.partition.roles import ReplicaRoles
from actors.partition.serving import ServingLoops
from actors.partition.topics_watch import TopicsWatch
from coordinator.authz import Decision
from coordinator.checks import InvalidRequestError
from coordinator.handoff import owns
from coordinator.replication import DiskHealth
from coordinator.runtime import PartitionRuntime
from log.fsutil import retire_directory
from log.partition import PartitionLog

GC_YOUNG_THRESHOLD = 20_000


class OffsetPartition:
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
        number = -1 if partition is None else partition
        self.host = host = PartitionHost(number, epoch, settings, node_id)
        # Parked requests' answers of coalesced batches.
        self.mailboxes = Mailboxes(ttl_s=settings.mailbox_ttl_s)
        self.recovery = DiskRecovery(host)
        self.roles = ReplicaRoles(host, self.recovery, RejoinPhases(number, requested_at))
        self.recovery.attach(self.roles)
        # What the loads did: written by the loader, read by the gauges and the probe.
        loaded = LoadStats()
        self.serving = ServingLoops(host, self.roles, loaded)
        self.serving.settings_listeners.append(self._settings_changed)
        # Kafka clients straight to this leader (`actors.partition.kafka_plug`).
        self.kafka = KafkaPlug(ListenerView(host, self.serve, self.roles.leads, self.serving.topics))
        # The Ray path's authorizer (`actors.partition.ray_guard`); off unless ray_credentials.
        self.guard = RayGuard(settings, self.serving.topics.lookup, host.clock.now_ms)
        self.loader = PartitionLoader(host, loaded, self.roles, self.recovery, self.serving, self.kafka)
        self.roles.attach(self.loader)
        host.wire(on_failure=self.loader.recover, storage_failed=self.recovery.storage_failed)
        self.export = LogExport(host, self.roles)
        self.inspection = PartitionInspection(host, loaded, self.recovery, self.roles, self.kafka)
        # Its steps in a repartition (`actors.partition.handoff`).
        self.handoff = HandoffPart(
            lambda: host.runtime, self._deliver_driven, host.clock.now_ms,
            lambda: host.on_io(self.roles.record_leadership, False),
        )
        host.heap.settle()  # what the imports and the start left free

    # ------------------------------------------------------------ lifecycle

    async def assume(self, partition: int, epoch: int, known_end: int = -1) -> str:
        """Promote a standby: become the leader of `partition` at `epoch` and load it."""
        if self.host.partition >= 0:
            raise RuntimeError(f"already the leader of partition {self.host.partition}")
        self.host.assume(partition, epoch)
        return await self.loader.activate(known_end)

    async def activate(self, known_end: int = -1) -> str:
        """Start loading the partition (idempotent); returns at once (`PartitionLoader.activate`)."""
        return await self.loader.activate(known_end)

    async def wait_active(self, timeout_s: float = 60.0) -> str:
        return await self.loader.wait_active(timeout_s)

    async def unload(self, epoch: int) -> str:
        """Emigration: answer everything NOT_COORDINATOR, stop the tasks, close the log."""
        return await self.loader.unload(epoch)

    # ---------------------------------------------------- roles (DESIGN 5b)

    async def become_follower(
        self, leader_epoch: int, leader: str, must_exist: bool = False, replicas: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Follow replica `leader` (`actors.partition.roles`); this replica's probe."""
        await self.roles.become_follower(leader_epoch, leader, must_exist, replicas)
        return await self.inspection.probe()

    async def become_leader(
        self,
        leader_epoch: int,
        partition_epoch: int,
        replicas: Sequence[str],
        isr: Sequence[str],
        followers: Mapping[str, Any],
        controller: Any = None,
        known_end: int = -1,
    ) -> dict[str, Any]:
        """Lead (`actors.partition.roles`); this replica's probe."""
        await self.roles.become_leader(
            leader_epoch, partition_epoch, replicas, isr, followers, controller, known_end
        )
        return await self.inspection.probe()

    async def isr_committed(self, leader_epoch: int, partition_epoch: int, isr: Sequence[str]) -> bool:
        return await self.roles.isr_committed(leader_epoch, partition_epoch, isr)

    async def set_follower(self, leader_epoch: int, replica: str, handle: Any) -> bool:
        """The controller restarted follower `replica` as actor `handle`: push there now."""
        return await self.roles.set_follower(leader_epoch, replica, handle)

    async def replicate(
        self, leader_epoch: int, leader: str, start_offset: int | None, batches: bytes, leader_hwm: int
    ) -> PushAnswer:
        return await self.roles.replicate(leader_epoch, leader, start_offset, batches, leader_hwm)

    async def truncate(
        self,
        leader_epoch: int,
        leader: str,
        diverging: tuple[int, int],
        seen_log_end: int,
        seen_last_epoch: int,
    ) -> PushAnswer:
        return await self.roles.truncate(leader_epoch, leader, diverging, seen_log_end, seen_last_epoch)

    async def replication_endpoint(self) -> tuple[str, int, bytes]:
        """(host, port, token) of this replica's replication link, listening from now on."""
        return await self.roles.replication_endpoint()

    # -------------------------------------------------------------- requests

    async def handle(self, request: Any, credential: Any = None) -> Any:
        """One group protocol request, from a Ray caller presenting `credential` (checked
        where the Ray path's authorizer is on, `actors.partition.ray_guard`); parked
        requests wait here for their answer. A malformed request or a refused credential
        raises InvalidRequestError (CredentialError) to this caller alone."""
        if not self.guard.on:
            return await self.serve(request)
        (decision,) = await decisions_for(self.guard, credential, [request])
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        now_ms = self.host.clock.now_ms()
        self._submit_decided(decision, partial(_resolve, future), now_ms, time.perf_counter())
        self._after_requests()
        return _raised(await future)

    async def serve(self, request: Any) -> Any:
        """`handle` unchecked: the service's own callers (module docstring)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._submit(request, partial(_resolve, future), self.host.clock.now_ms(), time.perf_counter())
        self._after_requests()
        return _raised(await future)

    async def handle_wire(self, request: Any, credential: Any = None) -> bytes:
        """`handle` with the response pickled, as the client calls it: Ray
        returns bytes for about 170 us less CPU per call than an object
        (its cloudpickle path), measured on both sides together."""
        return dumps_response(await self.handle(request, credential))

    async def serve_wire(self, request: Any) -> bytes:
        """`serve` with the response pickled (the service's own clients)."""
        return dumps_response(await self.serve(request))

    async def handle_batch(self, caller: Any, batch: Any, requests: Any, credential: Any = None) -> bytes:
        """`serve_batch` from a Ray caller presenting `credential`, checked once for the
        batch and each request against the ACLs where the Ray path's authorizer is on."""
        if not self.guard.on:
            return await self.serve_batch(caller, batch, requests)
        check_batch_call(caller, batch, requests)
        decisions = await decisions_for(self.guard, credential, requests)
        return await self._run_batch(caller, batch, requests, decisions, self._submit_decided)

    async def serve_batch(self, caller: Any, batch: Any, requests: Any) -> bytes:
        """Many requests in one Ray call (the client's coalescing, `actors.partition.batches`):
        answers once every request that cannot park is answered, with the pickled
        `(answers, parked, generation)`: `(index, response)` pairs, how many requests stay
        parked, whose answers the caller (`caller`, its id; `batch`, its number for this
        batch) then `collect`s, and the generation of the mailbox they wait in (0 when none
        waits). A malformed request's entry is an InvalidRequestError."""
        check_batch_call(caller, batch, requests)
        return await self._run_batch(caller, batch, requests, requests, self._submit)

    async def _run_batch(
        self, caller: int, batch: int, requests: list[Any], items: list[Any],
        submit: Callable[[Any, Callable[[Any], None], int, float], None],
    ) -> bytes:
        """`submit` each of `items` (the requests, or the guard's decisions on them), then
        answer as `serve_batch` says."""
        answers = BatchAnswers(requests)
        # One clock read for the batch: its requests arrived together.
        now_ms, started = self.host.clock.now_ms(), time.perf_counter()
        for index, item in enumerate(items):
            submit(item, partial(answers.deliver, index), now_ms, started)
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
        host = self.host
        host.deliver(host.runtime.submit(request, _Waiter(request, deliver, started), now_ms))

    def _submit_decided(
        self, decision: Decision, deliver: Callable[[Any], None], now_ms: int, started: float
    ) -> None:
        """A request as the Ray guard decided: answered here when refused, else submitted
        (what it may do of it) and its answer completed (`coordinator.authz.Decision`)."""
        if decision.send is None:
            deliver(decision.answer)
            return
        deliver = completing(decision, deliver)
        host, request = self.host, decision.send  # the guard validated it before reading its fields
        host.deliver(host.runtime.submit(request, _Waiter(request, deliver, started), now_ms, validated=True))

    def _after_requests(self) -> None:
        """Once per call: wake the flush and timer loops as the requests need (`ServingLoops`)."""
        self.serving.after_requests()

    def _settings_changed(self, settings: ServiceSettings) -> None:
        self.mailboxes.ttl_s = settings.mailbox_ttl_s

    async def topics_changed(self) -> None:
        """The topic registry's nudge: read the topics now (topics_watch), and the ACLs of
        the Ray path (`ray_guard`, with its credentials) and of the Kafka listener: the
        registry nudges after their changes too."""
        self.serving.topics_changed()
        self.guard.nudge()
        self.kafka.acls_changed()

    # ---------------------------------------------------- what it tells

    @ray.method(concurrency_group=PROBE_GROUP)
    async def probe(self) -> dict[str, Any]:
        """The controller's liveness check (`actors.partition.inspection`)."""
        return await self.inspection.probe()

    async def info(self) -> dict[str, Any]:
        return await self.inspection.info()

    async def ping(self) -> int:
        return self.host.epoch

    async def noop(self, request: Any = None) -> bytes:
        """A do-nothing call: the baseline of the actor benchmark (its answer
        travels as `handle_wire`'s does, as bytes)."""
        return NOOP_RESPONSE

    async def noop_batch(self, caller: int, batch: int, requests: list[Any]) -> bytes:
        """`noop` for a coalesced batch: the baseline of coalesced calls."""
        return noop_batch_response(requests)

    async def log_files(self) -> list[tuple[str, int]]:
        """(name, bytes) of every segment file holding committed batches (`actors.partition.export`)."""
        return await self.export.log_files()

    async def read_log_file(self, name: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes of the listed file `name` from byte `offset` (`actors.partition.export`)."""
        return await self.export.read_log_file(name, offset, length)

    async def hold_backup(self, token: str) -> dict[str, Any]:
        """Hold the committed log for a backup (`actors.partition.export`)."""
        return await self.export.hold_backup(token)

    async def read_held_file(self, token: str, name: str, offset: int, length: int) -> bytes:
        return await self.export.read_held_file(token, name, offset, length)

    async def release_backup(self, token: str) -> None:
        await self.export.release_backup(token)

    async def kafka_listener(self, group_id: str | None = None) -> dict[str, Any] | None:
        """This leader's Kafka listener, or None (`KafkaPlug.address`); given a group, whether
        this leader serves it (not one it handed off in a repartition)."""
        found = await self.kafka.address()
        shard = self.host.runtime.shard
        if found is not None and type(group_id) is str and shard is not None:
            found["owns"] = owns(shard, group_id)
        return found

    # ------------------------------------------------------------ repartitioning

    async def handoff_export(self, routing: bytes, page: int = 0) -> dict[str, Any]:
        return await self.handoff.export(routing, page)

    async def handoff_fence(self, routing: bytes, source: int, session: int) -> dict[str, Any]:
        return await self.handoff.fence(routing, source, session)

    async def handoff_admit(self, version: int, payload: bytes) -> dict[str, Any]:
        return await self.handoff.admit(version, payload)

    async def precopy_begin(self, routing: bytes, session: int) -> dict[str, Any]:
        return await self.handoff.precopy_begin(routing, session)

    async def precopy_round(self, session: int, freeze: bool = False) -> dict[str, Any]:
        return await self.handoff.precopy_round(session, freeze)

    async def precopy_export(self, session: int, page: int) -> dict[str, Any]:
        return await self.handoff.precopy_export(session, page)

    async def precopy_confirm(self, session: int, page: int) -> dict[str, Any]:
        return await self.handoff.precopy_confirm(session, page)

    async def precopy_admit(
        self, routing: bytes, source: int, session: int, payload: bytes, gone: list[str]
    ) -> dict[str, Any]:
        return await self.handoff.precopy_admit(routing, source, session, payload, gone)

    async def precopy_switch(self, routing: bytes, session: int) -> dict[str, Any]:
        return await self.handoff.precopy_switch(routing, session)

    async def handoff_switch(self, routing: bytes) -> dict[str, Any]:
        return await self.handoff.switch(routing)

    async def handoff_abort(self) -> dict[str, Any]:
        return await self.handoff.abort()

    async def set_routing(self, routing: bytes) -> int | None:
        version = await self.handoff.route(routing)
        self._after_requests()  # groups it owns now may have started timers (`handoff.adopt`)
        return version

    async def retire(self, version: int) -> str:
        """A shrink emptied this partition (its groups are other partitions' now): stop
        serving and rename its directory out of the way (`log.fsutil.retire_directory`);
        the new path ("" when gone already). The controller then forgets the partition."""
        if type(version) is not int or version < 1:
            raise ValueError(f"retire takes the repartition's version, an int >= 1, got {version!r}")
        host = self.host
        await self.loader.unload(host.epoch)
        return await host.on_io(retire_directory, host.directory(), version)  # type: ignore[no-any-return]

    def _deliver_driven(self, released: Iterable[tuple[Any, Any]]) -> None:
        self.host.deliver(released)
        self._after_requests()

    def leads(self) -> bool:
        """Serving the partition as its leader."""
        return self.roles.leads()

    def topic_view(self) -> tuple[dict[str, int], dict[str, Any]]:
        """The partition counts and ids of the topics the shard's consumer groups see."""
        topics = self.serving.topics
        return topics.counts, topics.ids

    # ------------------------------------- views for tests and tools (read-only)

    @property
    def partition(self) -> int:
        return self.host.partition

    @property
    def epoch(self) -> int:
        return self.host.epoch

    @property
    def settings(self) -> ServiceSettings:
        return self.host.settings

    @property
    def clock(self) -> SystemClock:
        return self.host.clock

    @property
    def runtime(self) -> PartitionRuntime:
        return self.host.runtime

    @property
    def log(self) -> PartitionLog | None:
        return self.host.log

    @property
    def metrics(self) -> PartitionMetrics:
        return self.host.metrics

    @property
    def replica_id(self) -> str:
        return self.host.replica_id

    @property
    def leader(self) -> LeaderReplication | None:
        return self.roles.leader

    @property
    def follower(self) -> FollowerReplica | None:
        return self.roles.follower

    @property
    def phases(self) -> RejoinPhases:
        return self.roles.phases

    @property
    def disk(self) -> DiskHealth:
        return self.recovery.disk

    @property
    def topics(self) -> TopicsWatch:
        return self.serving.topics

    @property
    def known_end(self) -> int:
        return self.loader.known_end

    @property
    def load_ms(self) -> float:
        return self.loader.stats.load_ms

    @property
    def loaded_records(self) -> int:
        return self.loader.stats.loaded_records

    @property
    def progress(self) -> int:
        return self.loader.stats.progress


class _Waiter:
    """A request in the partition until its response is released (the runtime's token)."""

    __slots__ = ("request", "deliver", "started", "kind")

    def __init__(self, request: Any, deliver: Callable[[Any], None], started: float) -> None:
        self.request = request
        self.deliver = deliver
        self.started = started
        self.kind = type(request).__name__


def _raised(response: Any) -> Any:
    if isinstance(response, InvalidRequestError):
        raise response
    return response


def _resolve(future: asyncio.Future[Any], response: Any) -> None:
    if not future.done():  # the caller may have gone (cancelled)
        future.set_result(response)


# What Ray creates partition actors from (`actors.controller.ray_cluster`): the class with
# `probe`'s concurrency group declared (Ray takes concurrency groups only here, not in `options`).
RemotePartition = ray.remote(concurrency_groups={PROBE_GROUP: PROBE_CONCURRENCY})(OffsetPartition)
