"""The decisions of a group member, shared by `GroupMember` (thread) and `AsyncGroupMember` (task).

`MemberLoop.run()` is a generator of effects, in the spirit of the sans-I/O
core: it yields `Send` (a group request), `Describe` (topic partition
counts), `Notify` (a rebalance listener call) and `Wait` (sleep until woken
or a timeout), and receives each effect's result. A driver performs the
effects, blocking (`group_member.GroupMember`) or awaiting
(`async_group_member.AsyncGroupMember`), and throws a failed effect's exception
back in at the yield. The driver stops the generator at the first effect
boundary after `close()`, so nothing is decided after a close.

Rules, as Kafka's ConsumerCoordinator / AbstractCoordinator:
- The rebalance protocol is COOPERATIVE when every configured assignor
  supports it, else EAGER. Eager members revoke everything before joining;
  cooperative members keep their partitions, revoke only those that move
  away, and then rejoin at once so they can be handed over (KIP-429).
- REBALANCE_IN_PROGRESS: rejoin keeping the partitions. ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID: the partitions are lost (`on_lost`), then rejoin
  (UNKNOWN_MEMBER_ID also drops the member id). FENCED_INSTANCE_ID and the
  JoinGroup errors no retry can fix are fatal: the loop stops and the
  application's next call raises.
- A request the coordinator could not answer before the client's deadline
  (the client already rediscovers the coordinator and retries) is retried
  after `retry_backoff_ms`, keeping the membership.
- max.poll.interval.ms: when the application has not called `poll()` for
  that long, the member leaves the group (a static member only stops
  heartbeating, as Kafka's) and loses its partitions; the next `poll()`
  rejoins.
- Metadata refresh (metadata.max.age.ms): the leader re-reads the partition
  counts of every topic the group subscribes to and rejoins when one changed;
  a pattern member re-evaluates its pattern against all topics and rejoins
  when its subscription changed. A leader's JoinGroup always rebalances.
- Close (onLeavePrepare): the partitions are revoked, or lost when the
  generation is gone or a dynamic member is mid-rebalance; only a dynamic
  member sends LeaveGroup, so a static member's restart within the session
  timeout keeps its assignment without a rebalance (KIP-345).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from actors.member.api import (
    FATAL_JOIN_ERRORS,
    LOST_ERRORS,
    REJOIN_ERRORS,
    CommitFailedError,
    Describe,
    FencedInstanceError,
    GroupMemberError,
    MemberConfig,
    Notify,
    Send,
    Steps,
    Wait,
)
from actors.member.loop_base import LoopBase
from coordinator.assignors.base import RebalanceProtocol
from coordinator.assignors.leader import perform_assignment, subscription_metadata
from coordinator.consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription
from coordinator.credentials import CredentialError
from coordinator.errors import Errors
from coordinator.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    Request,
    SyncGroupRequest,
)
from coordinator.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class MemberLoop(LoopBase):
    """One member's state and decisions. State read by the application is guarded by `lock`."""

    def __init__(
        self,
        config: MemberConfig,
        wake: Callable[[], None],
        set_stable: Callable[[bool], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(config, wake, set_stable, clock)
        self.protocol = config.protocol
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.subscription: tuple[str, ...] | None = None if config.pattern else config.topics
        self.need_rejoin = True
        self.parked = False  # a JoinGroup or SyncGroup is waiting at the coordinator
        self.next_metadata = 0.0
        self._last_assignment: list[TopicPartition] | None = None
        self._last_generation = -1
        self._metadata_snapshot: dict[str, int] | None = None  # the leader's view of group topics

    # ------------------------------------------------- called by the application

    def request_rejoin(self) -> None:
        self.need_rejoin = True
        self._change_stable(False)
        self.wake()

    def commit_request(
        self, offsets: Mapping[TopicPartition | tuple[str, int], int], metadata: str
    ) -> OffsetCommitRequest:
        with self.lock:
            generation, member_id = self.generation_id, self.member_id
        parts = tuple(OffsetCommitPartition(t, p, o, metadata) for (t, p), o in offsets.items())
        return OffsetCommitRequest(
            self.config.group_id, parts, generation, member_id, self.config.group_instance_id
        )

    def on_commit_response(self, response: OffsetCommitResponse) -> None:
        failed = {
            TopicPartition(p.topic, p.partition): p.error
            for p in response.partitions
            if p.error is not Errors.NONE
        }
        if Errors.FENCED_INSTANCE_ID in failed.values():
            self.fail(FencedInstanceError(f"{self.config.group_instance_id!r} was fenced by a newer member"))
        elif set(failed.values()) & REJOIN_ERRORS:
            self.request_rejoin()
        if failed:
            raise CommitFailedError(failed)

    # ------------------------------------------------------------ the loop

    def run(self) -> Steps[None]:
        while not self.closed:
            if self._poll_expired():
                yield from self._leave_for_poll_timeout()
            elif self.need_rejoin:
                yield from self._join_group()
            else:
                yield Wait(self._idle_s())
                yield from self._periodic()

    def _idle_s(self) -> float:
        due = [self.next_heartbeat, self.last_poll + self.config.max_poll_interval_ms / 1000]
        if self._watches_metadata():
            due.append(self.next_metadata)
        return max(0.0, min(due) - self.clock())

    def _periodic(self) -> Steps[None]:
        now = self.clock()
        if not self.need_rejoin and now >= self.next_heartbeat:
            yield from self._heartbeat()
        if not self.need_rejoin and self._watches_metadata() and now >= self.next_metadata:
            yield from self._refresh_metadata()

    def _send(self, request: Request, timeout_s: float) -> Steps[Any]:
        """The response, or None when no coordinator answered in time (the caller retries)."""
        try:
            return (yield Send(request, timeout_s))
        except CredentialError:  # refused for good (docs/security.md): the member fails, saying why
            raise
        except Exception as exc:  # the client gave up: coordinator unavailable or unreachable
            logger.warning("%s: %s not answered: %r", self.config.group_id, type(request).__name__, exc)
            return None

    def _backoff(self) -> Steps[None]:
        yield Wait(self.config.retry_backoff_ms / 1000)

    # ------------------------------------------------------- heartbeat & errors

    def heartbeat_request(self) -> HeartbeatRequest | None:
        """A Heartbeat for the current membership; None without one.

        Drivers also send it, answer ignored, while a listener runs: Kafka's
        heartbeat thread keeps the session alive during listener calls.
        """
        with self.lock:
            generation, member_id = self.generation_id, self.member_id
        if not member_id or generation < 0:
            return None
        return HeartbeatRequest(self.config.group_id, generation, member_id, self.config.group_instance_id)

    def _heartbeat(self) -> Steps[None]:
        self.next_heartbeat = self.clock() + self.config.heartbeat_interval_ms / 1000
        request = self.heartbeat_request()
        if request is None:
            self.request_rejoin()
            return
        response = yield from self._send(request, self.config.session_timeout_ms / 1000)
        if response is not None and response.error is not Errors.NONE:
            yield from self._on_error(response.error, "Heartbeat")

    def _on_error(self, error: Errors, api: str) -> Steps[None]:
        """Heartbeat and SyncGroup errors (Kafka's response handlers)."""
        if error is Errors.FENCED_INSTANCE_ID:
            raise FencedInstanceError(f"{self.config.group_instance_id!r} was fenced by a newer member")
        if error in LOST_ERRORS:
            logger.info("%s: %s got %s: partitions lost", self.config.group_id, api, error.name)
            yield from self._lose(reset_member_id=error is Errors.UNKNOWN_MEMBER_ID)
        elif error is not Errors.REBALANCE_IN_PROGRESS:
            logger.warning("%s: %s got %s", self.config.group_id, api, error.name)
            if api == "Heartbeat":
                return  # the next heartbeat tries again
            yield from self._backoff()
        self.request_rejoin()

    def _lose(self, reset_member_id: bool) -> Steps[None]:
        with self.lock:
            lost, self.owned = self.owned, frozenset()
            self.generation_id = -1
            if reset_member_id:
                self.member_id = ""
        self._metadata_snapshot = None
        self._change_stable(False)
        if lost:
            yield Notify("lost", lost)

    def _revoke(self, partitions: frozenset[TopicPartition]) -> Steps[None]:
        if partitions:
            yield Notify("revoked", partitions)
            with self.lock:
                self.owned -= partitions

    # ---------------------------------------------------------- join & sync

    def _join_group(self) -> Steps[None]:
        self.need_rejoin = False
        self._change_stable(False)
        if not (yield from self._join_once()):
            self.need_rejoin = True

    def _join_once(self) -> Steps[bool]:
        """One JoinGroup + SyncGroup round; False when it must be tried again."""
        if self.subscription is None and not (yield from self._refresh_metadata()):
            yield from self._backoff()
            return False
        yield from self._prepare_join()
        response = yield from self._send_parked(self._join_request())
        if response is None:
            yield from self._backoff()
            return False
        if response.error is Errors.MEMBER_ID_REQUIRED:
            with self.lock:
                self.member_id = response.member_id
            return False
        if response.error is not Errors.NONE:
            yield from self._on_join_error(response.error)
            return False
        with self.lock:
            self.member_id, self.generation_id = response.member_id, response.generation_id
        self.protocol_name, self.leader_id = response.protocol_name, response.leader
        assignments: tuple[tuple[str, bytes], ...] = ()
        if response.leader == response.member_id:
            assignments = yield from self._lead(response)
        sync = yield from self._send_parked(self._sync_request(response, assignments))
        if sync is None:
            yield from self._backoff()
            return False
        if sync.error is not Errors.NONE:
            yield from self._on_error(sync.error, "SyncGroup")
            return False
        partitions = decode_assignment(sync.assignment).partitions if sync.assignment else ()
        return (yield from self._on_assignment(partitions))

    def _prepare_join(self) -> Steps[None]:
        """Kafka's onJoinPrepare: eager revokes all; cooperative what left the subscription."""
        with self.lock:
            owned = self.owned
        if self.protocol is RebalanceProtocol.EAGER:
            yield from self._revoke(owned)
        else:
            topics = set(self.subscription or ())
            yield from self._revoke(frozenset(tp for tp in owned if tp.topic not in topics))

    def _send_parked(self, request: Request) -> Steps[Any]:
        self.parked = True
        try:
            return (yield from self._send(request, self.config.rebalance_timeout_ms / 1000 + 5))
        finally:
            self.parked = False

    def _join_request(self) -> JoinGroupRequest:
        with self.lock:
            owned = sorted(self.owned) if self.protocol is RebalanceProtocol.COOPERATIVE else []
            member_id, generation = self.member_id, self.generation_id
        protocols = tuple(
            (
                name,
                subscription_metadata(
                    name,
                    self.subscription or (),
                    owned_partitions=owned,
                    generation_id=generation,
                    last_assignment=self._last_assignment,
                    last_generation=self._last_generation,
                ),
            )
            for name in self.config.assignors
        )
        return JoinGroupRequest(
            self.config.group_id,
            self.config.session_timeout_ms,
            self.config.rebalance_timeout_ms,
            PROTOCOL_TYPE,
            protocols,
            member_id=member_id,
            group_instance_id=self.config.group_instance_id,
            client_id=self.config.client_id,
            client_host=self.config.client_host,
        )

    def _sync_request(
        self, response: JoinGroupResponse, assignments: tuple[tuple[str, bytes], ...]
    ) -> SyncGroupRequest:
        return SyncGroupRequest(
            self.config.group_id,
            response.generation_id,
            response.member_id,
            self.config.group_instance_id,
            response.protocol_type,
            response.protocol_name,
            assignments,
        )

    def _on_join_error(self, error: Errors) -> Steps[None]:
        if error is Errors.FENCED_INSTANCE_ID:
            raise FencedInstanceError(f"{self.config.group_instance_id!r} was fenced by a newer member")
        if error in FATAL_JOIN_ERRORS:
            raise GroupMemberError(f"JoinGroup for {self.config.group_id!r} failed: {error.name}")
        if error is Errors.UNKNOWN_MEMBER_ID:
            yield from self._lose(reset_member_id=True)
            return  # rejoin at once with no member id, as Kafka
        if error is not Errors.REBALANCE_IN_PROGRESS:
            logger.warning("%s: JoinGroup got %s", self.config.group_id, error.name)
        yield from self._backoff()

    def _lead(self, response: JoinGroupResponse) -> Steps[tuple[tuple[str, bytes], ...]]:
        """Kafka's onLeaderElected: read the metadata of the group's topics, run the assignor."""
        metadata = {m.member_id: m.metadata for m in response.members}
        topics = tuple(sorted({t for md in metadata.values() for t in decode_subscription(md).topics}))
        counts = yield from self._describe(topics)
        if counts is None:
            logger.warning("%s: no topic metadata: assigning as if no topic existed", self.config.group_id)
            counts = {}
        self._metadata_snapshot = {t: counts.get(t, 0) for t in topics}
        if response.skip_assignment:  # KIP-814: a static leader rejoined a Stable group
            return ()
        instance_ids = {m.member_id: m.group_instance_id for m in response.members}
        assert response.protocol_name is not None
        return tuple(perform_assignment(response.protocol_name, metadata, counts, instance_ids).items())

    def _on_assignment(self, partitions: Iterable[TopicPartition]) -> Steps[bool]:
        new = frozenset(partitions)
        with self.lock:
            owned = self.owned
        revoked, added = owned - new, new - owned
        self._last_assignment, self._last_generation = sorted(new), self.generation_id
        yield from self._revoke(revoked)
        with self.lock:
            self.owned = new
        self.rebalances += 1
        yield Notify("assigned", added)
        if revoked and self.protocol is RebalanceProtocol.COOPERATIVE:
            return False  # KIP-429: rejoin so the revoked partitions can be handed over
        now = self.clock()
        self.next_heartbeat = now + self.config.heartbeat_interval_ms / 1000
        self.next_metadata = now + self.config.metadata_max_age_ms / 1000
        if not self.need_rejoin:
            self._change_stable(True)
        return True

    # ---------------------------------------------------------------- metadata

    def _watches_metadata(self) -> bool:
        return self._metadata_snapshot is not None or self.config.pattern is not None

    def _describe(self, topics: tuple[str, ...] | None) -> Steps[dict[str, int] | None]:
        try:
            return dict((yield Describe(topics)))
        except Exception as exc:
            logger.warning("%s: topic metadata not available: %r", self.config.group_id, exc)
            return None

    def _refresh_metadata(self) -> Steps[bool]:
        """Re-read metadata; rejoin when the pattern's topics or a group topic's size changed."""
        self.next_metadata = self.clock() + self.config.metadata_max_age_ms / 1000
        pattern, snapshot = self.config.pattern, self._metadata_snapshot
        wanted = None if pattern is not None or snapshot is None else tuple(snapshot)
        counts = yield from self._describe(wanted)
        if counts is None:
            return False
        if pattern is not None:
            matched = tuple(sorted(t for t in counts if pattern.fullmatch(t)))
            if self.subscription is not None and matched != self.subscription:
                logger.info("%s: pattern subscription is now %s", self.config.group_id, matched)
                self.request_rejoin()
            self.subscription = matched
        if snapshot is not None and {t: counts.get(t, 0) for t in snapshot} != snapshot:
            logger.info("%s: partition counts changed: rejoining", self.config.group_id)
            self.request_rejoin()
        return True

    # ------------------------------------------------------------------ leaving

    def _leave_for_poll_timeout(self) -> Steps[None]:
        logger.warning(
            "%s: poll() not called for %d ms (max_poll_interval_ms): leaving the group",
            self.config.group_id,
            self.config.max_poll_interval_ms,
        )
        with self.lock:
            member_id = self.member_id
        yield from self._lose(reset_member_id=True)
        if member_id and self.config.group_instance_id is None:
            request = LeaveGroupRequest(
                self.config.group_id, (MemberIdentity(member_id, reason="consumer poll timeout has expired"),)
            )
            yield from self._send(request, self.config.session_timeout_ms / 1000)
        self.need_rejoin = True
        while self._poll_expired():
            yield Wait(self.config.heartbeat_interval_ms / 1000)

    def leave(self) -> Steps[None]:
        """Kafka's onLeavePrepare + maybeLeaveGroup, run once by `close()`."""
        if self.fatal is not None:
            return
        with self.lock:
            owned, member_id = self.owned, self.member_id
        dynamic = self.config.group_instance_id is None
        if owned:
            lost = self.generation_id < 0 or (dynamic and self.need_rejoin)
            yield Notify("lost" if lost else "revoked", owned)
        with self.lock:
            self.owned, self.generation_id = frozenset(), -1
        if member_id and dynamic:
            request = LeaveGroupRequest(
                self.config.group_id, (MemberIdentity(member_id, reason="the consumer is being closed"),)
            )
            yield from self._send(request, self.config.session_timeout_ms / 1000)
        self._change_stable(False)
