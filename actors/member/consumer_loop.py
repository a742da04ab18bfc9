"""The decisions of a consumer-protocol member (KIP-848), shared by `GroupMember` and `AsyncGroupMember`.

`GroupMember(..., group_protocol="consumer")` runs this loop instead of the
classic one (`actors.member.loop`); it yields the same effects (`Send`,
`Notify`, `Wait`, plus `TopicIds` to name the topic ids of an assignment),
so both drivers serve it unchanged. The coordinator computes every
assignment; the member only heartbeats and reconciles, as Kafka's
ConsumerMembershipManager / ConsumerHeartbeatRequestManager do:

- Join with epoch 0 and a member id the member makes (ConsumerGroupHeartbeat
  v1: a random UUID, kept for the member's life), its subscription (topic
  names, or `subscription_pattern`, a regex the coordinator resolves with RE2
  full-match semantics), `group_remote_assignor` (Kafka's
  group.remote.assignor) and max.poll.interval.ms as the rebalance timeout.
- Heartbeat at the interval the coordinator returns. Each heartbeat sends
  only what changed since the last acknowledged one (Kafka's HeartbeatState),
  everything after a join, an error or an unanswered request.
- Not Kafka's (`assignment_watch`, on by default): the member idles with an
  assignment watch parked at the coordinator (`Watch`; the driver keeps one
  parked across heartbeats; coordinator/consumer/watch.py) and heartbeats
  at once when it answers `changed`: a new assignment, or a partition
  released for it, reaches the member in milliseconds, not up to an
  interval later. A watch answered otherwise (timed out, refused), or one
  that woke the member for nothing, is not sent again before the next
  regular heartbeat: a wrong answer can cost a heartbeat, never a loop.
- Reconcile each new assignment: revoked partitions go to `on_revoked`
  first and leave the owned set, then added ones join it and go to
  `on_assigned`; the next heartbeat, sent at once, acknowledges the new
  owned set (TopicPartitions), which is what lets the coordinator hand a
  revoked partition to its next owner.
- FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: the partitions are lost
  (`on_lost`), and the member rejoins at once with epoch 0 and the same id.
  UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, INVALID_REQUEST,
  GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR, UNSUPPORTED_VERSION,
  GROUP_AUTHORIZATION_FAILED and any error Kafka's client does not expect
  (INVALID_REGULAR_EXPRESSION, GROUP_ID_NOT_FOUND ...) are fatal: the loop
  stops and the application's next call raises. The coordinator errors
  (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS)
  and unanswered heartbeats are retried after `retry_backoff_ms`.
- Commits carry the member epoch (OffsetCommit v9). A refused commit raises
  CommitFailedError; fencing is the heartbeat's business. `committed()`
  names the member and its epoch (OffsetFetch v9) and is sent again, a few
  times, when the coordinator answers STALE_MEMBER_EPOCH.
- max.poll.interval.ms: without `poll()` for that long the member leaves
  (epoch -1, -2 for a static member) and loses its partitions; the next
  `poll()` rejoins with epoch 0.
- Close: the partitions are revoked (lost when the member is not in the
  group), then a heartbeat with epoch -1 leaves (-2: a static member leaves
  for now and keeps its assignment for its return).

While a listener runs, the drivers send keep-alive heartbeats
(`heartbeat_request`: the epoch only) at the coordinator's interval, as
Kafka's background thread heartbeats meanwhile; a revocation listener longer
than the rebalance timeout still fences the member, as in Kafka.

A commit refused with STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID raises
CommitFailedError, as Kafka's current client fails it (older ones retried a
stale epoch); the application may commit again once the member caught up.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from actors.member.api import (
    CommitFailedError,
    FencedInstanceError,
    GroupMemberError,
    MemberConfig,
    Notify,
    Send,
    Steps,
    TopicIds,
    Wait,
    Watch,
)
from actors.member.loop_base import LoopBase
from coordinator.consumer.watch import MAX_WATCH_MS
from coordinator.credentials import CredentialError
from coordinator.errors import Errors
from coordinator.messages import (
    AssignmentWatchRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
)
from coordinator.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
# OffsetCommit v9: members of consumer groups commit with their member epoch.
COMMIT_VERSION = 9
FENCED_ERRORS = frozenset({Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID})
RETRIED_ERRORS = frozenset(
    {Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS}
)
Assignment = tuple[ConsumerGroupTopicPartitions, ...]
# Shorter idle times are waited out: a watch would cost more than it could save.
MIN_WATCH_S = 0.05


def new_member_id() -> str:
    """A client-made member id as Kafka's (Uuid.randomUuid().toString(): URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class _Sent:
    """The fields of the last heartbeat that carried them (Kafka's HeartbeatState.SentFields)."""

    names: tuple[str, ...] | None
    owned: Assignment


class ConsumerLoop(LoopBase):
    """One consumer-protocol member's state and decisions; state the application reads is under `lock`."""

    def __init__(
        self,
        config: MemberConfig,
        wake: Callable[[], None],
        set_stable: Callable[[bool], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(config, wake, set_stable, clock)
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.subscription: tuple[str, ...] | None = (
            config.topics if config.subscription_pattern is None else None
        )
        self.protocol_name = config.group_remote_assignor
        self.leader_id = ""  # no member leads: the coordinator assigns
        self.heartbeat_interval_ms = config.heartbeat_interval_ms
        self.parked = False  # never parked: no request waits at the coordinator
        self._target: Assignment | None = None  # an assignment not reconciled yet
        self._resolve_after = 0.0
        self._first_assignment = True
        self._sent: _Sent | None = None  # None: the next heartbeat sends every field
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}
        self._watch_armed = False  # idle with a watch parked (or to be sent)
        self._early = False  # this heartbeat was moved earlier by a watch

    @property
    def generation_id(self) -> int:
        """The member epoch (what a classic member's generation is to its commits)."""
        return self.member_epoch

    # ------------------------------------------------- called by the application

    def commit_request(
        self, offsets: Mapping[TopicPartition | tuple[str, int], int], metadata: str
    ) -> OffsetCommitRequest:
        with self.lock:
            epoch, member_id = self.member_epoch, self.member_id
        parts = tuple(OffsetCommitPartition(t, p, o, metadata) for (t, p), o in offsets.items())
        return OffsetCommitRequest(
            self.config.group_id,
            parts,
            epoch,
            member_id,
            self.config.group_instance_id,
            version=COMMIT_VERSION,
        )

    def on_commit_response(self, response: OffsetCommitResponse) -> None:
        failed = {
            TopicPartition(p.topic, p.partition): p.error
            for p in response.partitions
            if p.error is not Errors.NONE
        }
        if Errors.FENCED_INSTANCE_ID in failed.values():
            self.fail(FencedInstanceError(f"{self.config.group_instance_id!r} was fenced by a newer member"))
        if failed:
            raise CommitFailedError(failed)

    def heartbeat_request(self) -> ConsumerGroupHeartbeatRequest | None:
        """A keep-alive the drivers send (answer ignored) while a listener runs, as Kafka's
        background thread heartbeats meanwhile; None when the member is not in the group.

        It carries the epoch and no other field, so it changes nothing the member
        reported; whatever the coordinator answers to it, the loop's next heartbeat
        sends every field (`_reconcile`) and gets the assignment again.
        """
        with self.lock:
            epoch, member_id = self.member_epoch, self.member_id
        if epoch <= JOIN_EPOCH:
            return None
        return ConsumerGroupHeartbeatRequest(
            self.config.group_id, member_id, epoch, instance_id=self.config.group_instance_id,
            client_id=self.config.client_id, client_host=self.config.client_host,
        )

    # ------------------------------------------------------------ the loop

    def run(self) -> Steps[None]:
        while not self.closed:
            now = self.clock()
            if self._poll_expired():
                yield from self._leave_for_poll_timeout()
            elif self._target is not None and now >= self._resolve_after:
                yield from self._reconcile(self._target)
            elif now >= self.next_heartbeat:
                yield from self._heartbeat()
            elif self._watch_armed and self._idle_s() >= MIN_WATCH_S:
                yield from self._watch()
            else:
                yield Wait(self._idle_s())

    def _idle_s(self) -> float:
        due = [self.next_heartbeat, self.last_poll + self.config.max_poll_interval_ms / 1000]
        if self._target is not None:
            due.append(self._resolve_after)
        return max(0.0, min(due) - self.clock())

    def _send(self, request: ConsumerGroupHeartbeatRequest) -> Steps[ConsumerGroupHeartbeatResponse | None]:
        """The response, or None when no coordinator answered in time (the caller retries)."""
        try:
            timeout_s = self.config.session_timeout_ms / 1000
            response: ConsumerGroupHeartbeatResponse = yield Send(request, timeout_s)
            return response
        except CredentialError:  # refused for good (docs/security.md): the member fails, saying why
            raise
        except Exception as exc:  # the client gave up: coordinator unavailable or unreachable
            logger.warning("%s: ConsumerGroupHeartbeat not answered: %r", self.config.group_id, exc)
            return None

    # ------------------------------------------------------------ heartbeat

    def _heartbeat(self) -> Steps[None]:
        request = self._heartbeat_request()
        response = yield from self._send(request)
        now = self.clock()
        if response is None or response.error in RETRIED_ERRORS:
            if response is not None:
                logger.info("%s: ConsumerGroupHeartbeat got %s", self.config.group_id, response.error.name)
            self._sent = None
            self.next_heartbeat = now + self.config.retry_backoff_ms / 1000
            return
        if response.error is not Errors.NONE:
            yield from self._on_error(response)
            return
        early, self._early = self._early, False
        with self.lock:
            epoch_before = self.member_epoch
            self.member_id = response.member_id or self.member_id
            self.member_epoch = response.member_epoch
        # A watch that woke the member for nothing is not sent again before the next regular heartbeat.
        woken_for_nothing = early and response.assignment is None and response.member_epoch == epoch_before
        joined = self.member_epoch > JOIN_EPOCH
        self._watch_armed = self.config.assignment_watch and joined and not woken_for_nothing
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
        self.next_heartbeat = now + self.heartbeat_interval_ms / 1000
        if response.assignment is not None:
            self._target, self._resolve_after = response.assignment, 0.0
            self._change_stable(False)
        elif self._sent is not None and self._sent.owned == self._owned_by_id():
            self._change_stable(True)

    def _watch(self) -> Steps[None]:
        """Idle with a watch parked at the coordinator (coordinator/consumer/watch.py; the
        driver keeps one parked across heartbeats): heartbeat at once when it answers `changed`."""
        config = self.config
        request = AssignmentWatchRequest(config.group_id, self.member_id, self.member_epoch, MAX_WATCH_MS)
        try:
            response = yield Watch(request, self._idle_s())
        except Exception as exc:  # not sent, or not answered: the heartbeat finds the coordinator
            logger.debug("%s: assignment watch failed: %r", self.config.group_id, exc)
            self._watch_armed = False
            return
        if response is None:
            return  # still parked: the next idle time waits on it
        if response.error is Errors.NONE and response.changed:
            self._early = True
            self.next_heartbeat = self.clock()
        else:  # timed out, replaced or refused: another one after the next heartbeat
            self._watch_armed = False

    def _heartbeat_request(self) -> ConsumerGroupHeartbeatRequest:
        """Kafka's HeartbeatState.buildRequestData: everything when joining or after a reset,
        else only the fields that changed since the last heartbeat."""
        config, sent = self.config, self._sent
        full = sent is None or self.member_epoch == JOIN_EPOCH
        owned = self._owned_by_id()
        names = self.subscription
        request = ConsumerGroupHeartbeatRequest(
            config.group_id,
            self.member_id,
            self.member_epoch,
            instance_id=config.group_instance_id,
            rebalance_timeout_ms=config.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=names if full or sent is None or names != sent.names else None,
            subscribed_topic_regex=config.subscription_pattern if full else None,
            server_assignor=config.group_remote_assignor if full else None,
            topic_partitions=owned if full or sent is None or owned != sent.owned else None,
            client_id=config.client_id,
            client_host=config.client_host,
        )
        self._sent = _Sent(names, owned)
        return request

    def _owned_by_id(self) -> Assignment:
        with self.lock:
            owned = self.owned
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tp in owned:
            by_topic.setdefault(self._ids[tp.topic], []).append(tp.partition)
        return tuple(
            ConsumerGroupTopicPartitions(topic_id, tuple(sorted(parts)))
            for topic_id, parts in sorted(by_topic.items(), key=lambda item: str(item[0]))
        )

    def _on_error(self, response: ConsumerGroupHeartbeatResponse) -> Steps[None]:
        error, group = response.error, self.config.group_id
        detail = f": {response.error_message}" if response.error_message else ""
        if error in FENCED_ERRORS:
            logger.info(
                "%s: ConsumerGroupHeartbeat got %s%s: partitions lost, rejoining", group, error.name, detail
            )
            yield from self._lose()
            return
        if error is Errors.FENCED_INSTANCE_ID:
            raise FencedInstanceError(
                f"{self.config.group_instance_id!r} was fenced by a newer member{detail}"
            )
        raise GroupMemberError(f"ConsumerGroupHeartbeat for {group!r} failed: {error.name}{detail}")

    def _lose(self) -> Steps[None]:
        """Fenced: give up the partitions and rejoin at once with epoch 0 (Kafka's transitionToFenced)."""
        with self.lock:
            lost, self.owned = self.owned, frozenset()
            self.member_epoch = JOIN_EPOCH
        self._target, self._sent, self._first_assignment = None, None, True
        self.next_heartbeat = 0.0
        self._change_stable(False)
        if lost:
            yield Notify("lost", lost)

    # --------------------------------------------------------- reconciliation

    def _reconcile(self, target: Assignment) -> Steps[None]:
        """Revoke, then assign, then acknowledge at once (the next heartbeat)."""
        names = yield from self._topic_names(tp.topic_id for tp in target)
        if names is None:  # the registry does not name an id yet: heartbeats go on meanwhile
            self._resolve_after = self.clock() + self.config.retry_backoff_ms / 1000
            return
        new = frozenset(TopicPartition(names[tp.topic_id], p) for tp in target for p in tp.partitions)
        with self.lock:
            owned = self.owned
        revoked, added = owned - new, new - owned
        self._target = None
        if revoked:
            yield Notify("revoked", revoked)
            with self.lock:
                self.owned -= revoked
        notified = bool(revoked or added or self._first_assignment)
        if added or self._first_assignment:
            with self.lock:
                self.owned |= added
            yield Notify("assigned", added)
        self._first_assignment = False
        if notified:  # keep-alives may have been answered meanwhile: the next heartbeat sends everything
            self._sent = None
        if revoked or added:
            self.rebalances += 1
            self.next_heartbeat = 0.0  # acknowledge now
        else:
            self._change_stable(True)

    def _topic_names(self, topic_ids: Iterable[uuid.UUID]) -> Steps[dict[uuid.UUID, str] | None]:
        wanted = set(topic_ids)
        if not wanted <= self._names.keys():
            try:
                ids: Mapping[str, uuid.UUID] = yield TopicIds()
            except Exception as exc:
                logger.warning("%s: topic ids not available: %r", self.config.group_id, exc)
                return None
            self._names.update({topic_id: name for name, topic_id in ids.items()})
            self._ids.update(ids)
            if not wanted <= self._names.keys():
                logger.warning(
                    "%s: unknown topic ids %s",
                    self.config.group_id,
                    sorted(map(str, wanted - self._names.keys())),
                )
                return None
        return {topic_id: self._names[topic_id] for topic_id in wanted}

    # ------------------------------------------------------------ leaving

    def _leave_request(self) -> ConsumerGroupHeartbeatRequest:
        epoch = LEAVE_EPOCH if self.config.group_instance_id is None else STATIC_LEAVE_EPOCH
        return ConsumerGroupHeartbeatRequest(
            self.config.group_id,
            self.member_id,
            epoch,
            instance_id=self.config.group_instance_id,
            client_id=self.config.client_id,
            client_host=self.config.client_host,
        )

    def _leave_for_poll_timeout(self) -> Steps[None]:
        logger.warning(
            "%s: poll() not called for %d ms (max_poll_interval_ms): leaving the group",
            self.config.group_id,
            self.config.max_poll_interval_ms,
        )
        in_group = self.member_epoch > JOIN_EPOCH
        yield from self._lose()
        if in_group:
            yield from self._send(self._leave_request())
        while self._poll_expired() and not self.closed:
            yield Wait(self.heartbeat_interval_ms / 1000)

    def leave(self) -> Steps[None]:
        """Close: revoke (or lose) the partitions, then leave with epoch -1 (-2 when static)."""
        if self.fatal is not None:
            return
        with self.lock:
            owned, epoch = self.owned, self.member_epoch
        if owned:
            yield Notify("revoked" if epoch > JOIN_EPOCH else "lost", owned)
        with self.lock:
            self.owned = frozenset()
        if epoch > JOIN_EPOCH:
            response = yield from self._send(self._leave_request())
            if response is not None and response.error is not Errors.NONE:
                logger.info("%s: leaving got %s", self.config.group_id, response.error.name)
        with self.lock:
            self.member_epoch = LEAVE_EPOCH
        self._change_stable(False)
