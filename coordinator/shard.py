"""The Shard: every group of one offsets partition, driven sans I/O.

Inputs: `handle(request, now_ms, token)` for every group request (dispatched
on the request's type through `HANDLERS`), `poll_timers(now_ms)` and
`replay(record)`. Output: a `Result` carrying the records to append and the
responses to release, each response tagged with the token of the request it
answers. A parked request (a JoinGroup waiting for the join phase, a
follower's SyncGroup waiting for the leader, a Ray member's assignment watch,
`coordinator/consumer/watch.py`, which the shard nudges after every request,
timer and topic change of a group with watches) is answered in a later Result.

Two group types live side by side: classic groups (`groups`) and KIP-848
consumer groups (`consumer_groups`, driven by ConsumerGroupHeartbeat through
`coordinator/consumer/`); one group id is never both in use (a classic
request for a consumer group's id goes to `group_types.py`: classic members
inside a consumer group; groups convert online between the two types,
`coordinator/consumer/migration.py`). A group id's committed offsets live on
its `groups` entry whatever its type: a consumer group's is a bare one. Consumer groups
read the topics the driver gives with `update_topics(partition_counts,
now_ms)` (volatile: set again after a load), which also bumps the group
epoch of every group whose subscribed topics changed.

Rules:
- Offset records and tombstones change state only by being applied, through
  the same functions that replay uses. A group metadata record is derived
  from the live group at the moment it is written; replaying it rebuilds the
  group's persistent part (tested as a round trip).
- The shard trusts its driver for durability: the driver releases a response
  only once every record of that Result and the ones before is durable, and
  reloads the shard from its log if an append fails.
- Broken invariants raise (IllegalStateTransition, KeyError ...); the driver
  must then discard the shard and reload it from its log.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from random import Random
from typing import TYPE_CHECKING, Any
from uuid import UUID
from weakref import WeakKeyDictionary

from coordinator import admin, handoff, lag_query, lag_watch, offsets, precopy_target, service_state
from coordinator.classic import join, rebalance
from coordinator.classic.group import Group
from coordinator.classic.state import GroupState
from coordinator.config import CoordinatorConfig
from coordinator.consumer import fencing, watch
from coordinator.consumer.assignors.spec import TopicMetadata
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.heartbeat import handle_consumer_group_heartbeat
from coordinator.consumer.replay import replay as replay_consumer_record
from coordinator.consumer.subscriptions import refresh_group, topics_from_counts
from coordinator.errors import Errors
from coordinator.group_types import CLASSIC_REQUEST_TYPES, classic_request_to_consumer_group
from coordinator.lag import LagTracker
from coordinator.messages import (
    AssignmentWatchRequest,
    AssignmentWatchResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    Request,
    SyncGroupRequest,
)
from coordinator.records import (
    CONSUMER_GROUP_KEY_TYPES,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    ServiceStateKey,
)
from coordinator.routing import Routing
from coordinator.status import error_response, is_valid_group_id
from coordinator.timers import TimerKey, TimerQueue

if TYPE_CHECKING:
    from coordinator.precopy import DirtyTracker

Token = Hashable
Response = Any
EXPIRE_OFFSETS_KEY: TimerKey = ("expire-offsets",)
_new = tuple.__new__


@dataclass(slots=True)
class Result:
    records: list[Record] = field(default_factory=list)
    responses: list[tuple[Token, Response]] = field(default_factory=list)
    # Join phases completed here (a new generation with members), each as
    # its duration in ms: the driver's rebalance metrics.
    rebalances: list[int] = field(default_factory=list)
    # The value each offset record of `records` replaced, in their order (None: none):
    # the runtime answers OffsetFetch from the committed values (coordinator.committed).
    offsets_before: list[OffsetCommitValue | None] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.records or self.responses or self.rebalances)


HANDLERS: dict[type, Callable[[Shard, Any, Token], Response | None]] = {
    JoinGroupRequest: join.handle_join_group,
    SyncGroupRequest: rebalance.handle_sync_group,
    HeartbeatRequest: rebalance.handle_heartbeat,
    LeaveGroupRequest: rebalance.handle_leave_group,
    OffsetCommitRequest: offsets.handle_offset_commit,
    OffsetFetchRequest: offsets.handle_offset_fetch,
    OffsetDeleteRequest: offsets.handle_offset_delete,
    DescribeGroupsRequest: admin.handle_describe_groups,
    ListGroupsRequest: admin.handle_list_groups,
    DeleteGroupsRequest: admin.handle_delete_groups,
    ConsumerGroupHeartbeatRequest: handle_consumer_group_heartbeat,
    ConsumerGroupDescribeRequest: admin.handle_consumer_group_describe,
    AssignmentWatchRequest: watch.handle_assignment_watch,
    **service_state.HANDLERS,
    **lag_query.HANDLERS,
    **lag_watch.HANDLERS,
}

TIMER_HANDLERS: dict[str, Callable[..., None]] = {
    "heartbeat": rebalance.on_heartbeat_expired,
    "pending": rebalance.on_pending_member_expired,
    "join": rebalance.on_join_timer,
    "sync": rebalance.on_sync_expired,
    "expire-offsets": offsets.on_expire_offsets,
    fencing.SESSION_TIMER: fencing.on_session_timeout,
    fencing.REBALANCE_TIMER: fencing.on_rebalance_timeout,
    fencing.JOIN_TIMER: fencing.on_join_timeout,
    fencing.SYNC_TIMER: fencing.on_sync_timeout,
    watch.WATCH_TIMER: watch.on_watch_timeout,
    lag_watch.LAG_WATCH_TIMER: lag_watch.on_lag_watch_timeout,
}


class Shard:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        partition: int = 0,
        member_id_seed: int = 0,
    ) -> None:
        self.config = config or CoordinatorConfig()
        self.partition = partition
        self.groups: dict[str, Group] = {}
        # KIP-848 consumer groups, beside the classic ones (one id is never both in use).
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # When each consumer group's assignor last ran (KIP-1263's batching): volatile, as in
        # Kafka; keyed by the group object, so a deleted group's entry goes with it.
        self.consumer_assignment_ms: WeakKeyDictionary[ConsumerGroup, int] = WeakKeyDictionary()
        # Parked assignment watches of Ray members, by group (coordinator/consumer/watch.py).
        self.assignment_watches: dict[str, watch.GroupWatches] = {}
        # The topics the driver gives (`update_topics`): volatile, set again after a load.
        self.topics: dict[str, TopicMetadata] = {}
        self.topics_version = 0
        # The routing under which this shard owns its groups (coordinator/handoff.py);
        # None: every group sent here, as before any repartition.
        self.owner: Routing | None = None
        # The routing of a repartition: as this partition's log records its switch (the
        # commit point), as the controller last pushed it, and as an export froze groups
        # under it (volatile: a new leader has served them since).
        self.switched: Routing | None = None
        self.pushed: Routing | None = None
        self.frozen: Routing | None = None
        self.frozen_ids: list[str] = []  # the groups frozen under `frozen`, in id order
        # A pre-copy's dirty groups (coordinator/precopy.py; the leader's, volatile): every
        # write below touches it while a copy runs.
        self.copying: DirtyTracker | None = None
        # Groups admitted from another partition that this shard does not own yet (a copy,
        # coordinator/handoff.py `adopt`): no timer runs for them and nothing writes to them.
        self.copies: set[str] = set()
        # Partition 0's service-wide state (coordinator/service_state.py): entry -> its bytes.
        self.service_state: dict[ServiceStateKey, bytes] = {}
        # Live lag and health of the committed offsets (coordinator/lag.py): fed by every
        # offset record applied (so a follower's replay keeps it hot) and by the end
        # offsets the driver gives (`update_end_offsets`).
        self.lag = LagTracker(self.config.lag_window_ms)
        # Parked lag watches of consumer pools, by group and watcher (coordinator/lag_watch.py).
        self.lag_watches: dict[str, dict[str, tuple[Token, lag_watch.LagWatchRequest, int]]] = {}
        self.timers = TimerQueue()
        self.now_ms = 0
        self._ids = Random(member_id_seed)
        self._out = Result()

    # ------------------------------------------------------------ requests

    def handle(self, request: Request, now_ms: int, token: Token = None) -> Result:
        """Decide on one request; the Result may answer it and earlier ones."""
        handler = HANDLERS.get(type(request))
        if handler is None:
            raise TypeError(f"not a group protocol request: {type(request).__name__}")
        self.now_ms = now_ms
        out = self._out = Result()
        group_id = getattr(request, "group_id", None)
        if group_id is not None and not is_valid_group_id(group_id, request):
            response = error_response(request, Errors.INVALID_GROUP_ID)
        elif group_id is not None and self.owner is not None and not handoff.owns(self, group_id):
            response = error_response(request, Errors.NOT_COORDINATOR)
        elif group_id in self.consumer_groups and type(request) in CLASSIC_REQUEST_TYPES:
            response = classic_request_to_consumer_group(self, request, token)
        else:
            response = handler(self, request, token)
        if response is not None:
            out.responses.append((token, response))
        if self.assignment_watches:
            if type(request) is ConsumerGroupHeartbeatRequest:
                watch.follow_heartbeat(self, request.group_id, request.member_id)
            for changed in getattr(request, "group_ids", None) or (group_id,):
                if changed is not None:  # ListGroups names no group
                    watch.nudge(self, changed)
        if self.lag_watches and group_id in self.lag_watches:
            lag_watch.check_group(self, group_id)
        return out

    # -------------------------------------------------------------- timers

    def poll_timers(self, now_ms: int) -> list[Result]:
        """Fire every timer due at `now_ms`, earliest first, one Result each."""
        results = []
        while (timer := self.timers.pop_expired(now_ms)) is not None:
            self._begin(now_ms)
            kind, *args = timer.key
            TIMER_HANDLERS[str(kind)](self, *args, payload=timer.payload)
            if args and args[0] in self.assignment_watches:
                watch.nudge(self, args[0])
            result = self._end()
            if result:
                results.append(result)
        return results

    def next_deadline_ms(self) -> int | None:
        return self.timers.next_deadline_ms()

    # ----------------------------------------------------- load and unload

    def replay(self, record: Record) -> None:
        """Apply one log record: loading a partition is replaying its log."""
        key = record.key
        if type(key) is OffsetCommitKey:
            offsets.apply_offset_record(self, key, record.value)  # type: ignore[arg-type]
        elif type(key) is GroupMetadataKey:
            self.apply_group_record(key.group_id, record.value)  # type: ignore[arg-type]
        elif type(key) in CONSUMER_GROUP_KEY_TYPES:
            replay_consumer_record(self.consumer_groups, record)
        elif type(key) is ServiceStateKey:
            if key.kind == handoff.ROUTING_KIND:
                handoff.replay_switch(self, record.value)  # type: ignore[arg-type]
            else:
                service_state.replay(self.service_state, key, record.value)  # type: ignore[arg-type]
        else:
            raise TypeError(f"unknown record key {key!r}")

    def replay_many(self, records: Iterable[Record]) -> None:
        """`replay` for each record, with the common case inlined: loading is
        the failover path and most records overwrite an offset of a known group."""
        groups = self.groups
        replay = self.replay
        on_commit = self.lag.on_commit_record
        for record in records:
            key, value = record
            if value is not None and type(key) is OffsetCommitKey:
                group = groups.get(key[0])
                if group is not None:
                    group.offsets[key] = value  # type: ignore[assignment]
                    on_commit(key, value)
                    continue
            replay(record)

    def on_loaded(self, now_ms: int) -> Result:
        """Start timers after a load, as Kafka's onLoaded/onGroupLoaded do."""
        self._begin(now_ms)
        # Loaded without the controller's routing: a fence in the log names the repartition
        # whose copies this shard may hold; they stay copies until a push says their source
        # switched (a copy owned before its switch would run timers and expiries on it).
        if (planned := precopy_target.planned_routing(self)) is not None:
            self.owner = planned.merged(self.owner)
        # A copy of a group another partition still owns gets no timer (handoff.adopt starts
        # them once owned). Only after a repartition: before one, every group is owned.
        if self.owner is not None:
            self.copies = {g for g in (*self.groups, *self.consumer_groups) if not handoff.owns(self, g)}
        for group in list(self.groups.values()):
            if group.group_id in self.copies:
                continue
            for member in group.members.values():
                rebalance.schedule_heartbeat(self, group, member)
            if group.size > self.config.group_max_size:
                rebalance.prepare_rebalance(self, group)
        for consumer_group in self.consumer_groups.values():
            if consumer_group.group_id not in self.copies:
                fencing.schedule_group_timers(self, consumer_group)
        self.timers.schedule(EXPIRE_OFFSETS_KEY, now_ms + self.config.offsets_retention_check_interval_ms)
        return self._end()

    def update_topics(
        self, partition_counts: Mapping[str, int], now_ms: int, topic_ids: Mapping[str, UUID] | None = None
    ) -> Result:
        """The driver's view of the topics (name -> partition count, optional ids) changed.

        Every consumer group whose subscription metadata or regex topics change
        gets the records that say so and a bumped group epoch (Kafka's
        `onNewMetadataImage`, refreshed at once).
        """
        self._begin(now_ms)
        self.topics = topics_from_counts(partition_counts, topic_ids, self.topics)
        self.topics_version += 1
        for group in list(self.consumer_groups.values()):
            refresh_group(self, group, self.topics_version)
        for group_id in list(self.assignment_watches):
            watch.nudge(self, group_id)
        return self._end()

    def update_end_offsets(
        self, samples: list[tuple[str, int, int, int]], whole: bool, now_ms: int | None = None
    ) -> Result:
        """End offsets the driver got from the topic registry, (topic, partition, at_ms, end)
        in time order per partition: new samples, or (`whole`) every one kept, replacing
        what the lag tracker had (after a load or a restarted registry). Writes nothing;
        the Result answers the lag watches the new ends wake (coordinator/lag_watch.py)."""
        self._begin(self.now_ms if now_ms is None else now_ms)
        self._update_ends(samples, whole)
        if self.lag_watches:
            lag_watch.check_all(self)
        return self._end()

    def _update_ends(self, samples: list[tuple[str, int, int, int]], whole: bool) -> None:
        if whole:
            history: dict[tuple[str, int], list[tuple[int, int]]] = {}
            for topic, partition, at_ms, end in samples:
                history.setdefault((topic, partition), []).append((at_ms, end))
            self.lag.load_ends(history)
            return
        for topic, partition, at_ms, end in samples:
            self.lag.on_end((topic, partition), end, at_ms)

    # ------------------------------------------- handoffs (coordinator/handoff.py)

    def begin_handoff(self, routing: Routing, now_ms: int) -> Result:
        self._begin(now_ms)
        handoff.begin_handoff(self, routing)
        return self._end()

    def admit_groups(self, records: list[Record], now_ms: int) -> Result:
        self._begin(now_ms)
        handoff.admit_groups(self, records)
        return self._end()

    def abort_handoff(self, routing: Routing | None, now_ms: int) -> Result:
        self._begin(now_ms)
        handoff.abort_handoff(self, routing)
        return self._end()

    def drive(self, step: Callable[[Shard, Token], None], now_ms: int, token: Token) -> Result:
        """One of the driver's own steps (a handoff's, `coordinator/handoff.py`), answered
        to `token` through the Result like a request."""
        self._begin(now_ms)
        step(self, token)
        return self._end()

    def unload(self, now_ms: int) -> Result:
        """Emigration: every parked request gets NOT_COORDINATOR, timers stop."""
        self._begin(now_ms)
        for group in self.groups.values():
            rebalance.answer_parked_not_coordinator(self, group)
            group.state = GroupState.DEAD
        watch.answer_all(self, AssignmentWatchResponse(Errors.NOT_COORDINATOR))
        lag_watch.answer_all(self, Errors.NOT_COORDINATOR)
        self.lag.forget_groups(list(self.lag.committed))
        self.groups.clear()
        self.consumer_groups.clear()
        self.copies.clear()
        self.copying = None  # a copy session is its leader's: a new one begins elsewhere
        self.timers.clear()
        return self._end()

    # ------------------------------------------------------- used by handlers

    def reply(self, token: Token, response: Response) -> None:
        self._out.responses.append((token, response))

    def note_rebalance(self, join_phase_ms: int) -> None:
        self._out.rebalances.append(join_phase_ms)

    def write(self, record: Record) -> None:
        """Append a record to the current Result and apply it."""
        self._out.records.append(record)
        self.replay(record)
        if self.copying is not None:
            self.copying.touch(record.key.group_id)

    def write_offset(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """`write` for an offset record, without the dispatch on the key type."""
        group = self.groups.get(key.group_id)
        self._out.offsets_before.append(None if group is None else group.offsets.get(key))
        self._out.records.append(Record(key, value))
        offsets.apply_offset_record(self, key, value)
        if self.copying is not None:
            self.copying.touch(key.group_id)

    def write_offsets(
        self, group: Group, keys: list[OffsetCommitKey], values: list[OffsetCommitValue]
    ) -> None:
        """`write_offset` for many commits (not tombstones) of one live group."""
        self._out.offsets_before.extend(map(group.offsets.get, keys))
        self._out.records.extend(map(_new, repeat(Record), zip(keys, values)))
        offsets.apply_offset_commits(group, keys, values)
        self.lag.on_commits(group.group_id, keys, values)
        if self.copying is not None:
            self.copying.touch(group.group_id)

    def write_group(self, group: Group) -> None:
        """Append the group's metadata record; the live group is its source."""
        self._out.records.append(Record(GroupMetadataKey(group.group_id), group.to_record_value()))
        if self.copying is not None:
            self.copying.touch(group.group_id)

    def apply_group_record(self, group_id: str, value: GroupMetadataValue | None) -> None:
        group = self.groups.get(group_id)
        if value is None:
            if group is not None:
                rebalance.forget_group(self, group)
                if group.offsets:
                    # The group's membership goes, its committed offsets stay (Kafka keeps
                    # offsets apart from groups): a group converted to a consumer group
                    # keeps them. Deleting a group tombstones its offsets first.
                    self.groups[group_id] = Group(group_id, self.now_ms)
                    self.groups[group_id].offsets = group.offsets
            return
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.now_ms)
        group.load_record_value(value)

    def random_uuid(self) -> UUID:
        """A UUID from the shard's seeded random source (deterministic per seed)."""
        return UUID(int=self._ids.getrandbits(128), version=4)

    def new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{UUID(int=self._ids.getrandbits(128), version=4)}"

    def get_or_create_group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.now_ms)
        return group

    def _begin(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self._out = Result()

    def _end(self) -> Result:
        return self._out

    # --------------------------------------------------------- inspection

    def persistent_view(self) -> dict[str, tuple[GroupMetadataValue | None, dict[Any, Any]]]:
        """What a reload would rebuild: per group, its stored record and offsets."""
        view = {}
        for group_id, group in self.groups.items():
            stored = group.to_record_value() if group.generation_id > 0 else None
            view[group_id] = (stored, dict(group.offsets))
        return view

    def member_count(self) -> int:
        return sum(g.size for g in self.groups.values())
