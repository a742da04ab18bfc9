"""GroupMember: the consumer side of the group protocol, like Kafka's
ConsumerCoordinator or aiokafka's coordinator, over a `Client`.

A background thread joins the group, runs the assignor when this member
leads, syncs, heartbeats every `heartbeat_interval_ms` and rejoins on
REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID. The thread
works the same in plain processes, Ray tasks and Ray actors (sync or async):
it never blocks an actor's event loop.

Rules, as Kafka's consumer:
- The rebalance protocol is COOPERATIVE when every configured assignor
  supports it, else EAGER. Eager members revoke everything before they
  rejoin; cooperative members keep their partitions, revoke only those that
  move away and rejoin at once so they can be handed over (KIP-429).
- Listeners run in the member's thread: `on_revoked` before partitions are
  given up, `on_assigned` for new ones, `on_lost` when the membership is
  gone (the partitions may already belong to someone else).
- FENCED_INSTANCE_ID is fatal for this member: it stops and the error is
  raised to the user by the next call.
- `max_poll_interval_ms`: a member whose application stops calling `poll()`
  leaves the group, as Kafka's does.
- Static members (group_instance_id) do not send LeaveGroup on close.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from actors.client import Client
from coordinator.assignors.base import RebalanceProtocol
from coordinator.assignors.leader import perform_assignment, subscription_metadata
from coordinator.assignors.registry import get_assignor
from coordinator.consumer_protocol import decode_assignment, decode_subscription
from coordinator.errors import Errors
from coordinator.messages import JoinGroupRequest, MemberIdentity, OffsetCommitPartition, SyncGroupRequest
from coordinator.topic_partition import TopicPartition

logger = logging.getLogger(__name__)
Listener = Callable[[set[TopicPartition]], None]
TopicPartitions = Mapping[str, int] | Callable[[Iterable[str]], Mapping[str, int]]
REJOIN_ERRORS = {Errors.REBALANCE_IN_PROGRESS, Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID}


class FencedInstanceError(RuntimeError):
    """Another process joined with this member's group.instance.id."""


class CommitFailedError(RuntimeError):
    """The commit was refused because the group rebalanced; the member rejoins."""


class GroupMember:
    def __init__(
        self,
        client: Client,
        group_id: str,
        topics: Iterable[str],
        *,
        topic_partitions: TopicPartitions,
        assignors: Iterable[str] = ("range", "cooperative-sticky"),
        session_timeout_ms: int = 45_000,
        rebalance_timeout_ms: int | None = None,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        group_instance_id: str | None = None,
        client_id: str = "raygroups",
        client_host: str = "",
        on_assigned: Listener | None = None,
        on_revoked: Listener | None = None,
        on_lost: Listener | None = None,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.topics = tuple(dict.fromkeys(topics))
        self.topic_partitions = topic_partitions
        self.assignors = tuple(assignors)
        if not self.assignors:
            raise ValueError("at least one assignor is needed")
        for name in self.assignors:
            get_assignor(name)
        self.protocol = (
            RebalanceProtocol.COOPERATIVE
            if all(
                RebalanceProtocol.COOPERATIVE in get_assignor(a).supported_protocols for a in self.assignors
            )
            else RebalanceProtocol.EAGER
        )
        self.session_timeout_ms = session_timeout_ms
        # Kafka sends max.poll.interval.ms as the rebalance timeout.
        self.rebalance_timeout_ms = rebalance_timeout_ms or max_poll_interval_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.listeners = {"assigned": on_assigned, "revoked": on_revoked, "lost": on_lost}
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name: str | None = None
        self.rebalances = 0
        self._owned: set[TopicPartition] = set()
        self._last_assignment: list[TopicPartition] | None = None
        self._last_generation = -1
        self._lock = threading.RLock()
        self._stable = threading.Event()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._need_rejoin = True
        self._last_poll = time.monotonic()
        self._fatal: BaseException | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ public

    def start(self) -> GroupMember:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"group-member-{self.group_id}", daemon=True
            )
            self._thread.start()
        return self

    def __enter__(self) -> GroupMember:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def assignment(self) -> set[TopicPartition]:
        self._raise_fatal()
        with self._lock:
            return set(self._owned)

    def wait_for_assignment(self, timeout: float | None = None) -> set[TopicPartition]:
        """Block until the member is in a stable generation; returns its partitions."""
        if not self._stable.wait(timeout):
            self._raise_fatal()
            raise TimeoutError(f"member of {self.group_id!r} not stable after {timeout} s")
        return self.assignment()

    def poll(self) -> set[TopicPartition]:
        """Tell the member the application is alive (max.poll.interval.ms)."""
        self._last_poll = time.monotonic()
        return self.assignment()

    def commit(self, offsets: Mapping[TopicPartition | tuple[str, int], int], metadata: str = "") -> None:
        self._raise_fatal()
        with self._lock:
            generation, member_id = self.generation_id, self.member_id
        parts = tuple(OffsetCommitPartition(t, p, o, metadata) for (t, p), o in offsets.items())
        response = self.client.commit_offsets(
            self.group_id,
            {(p.topic, p.partition): p for p in parts},
            generation,
            member_id,
            self.group_instance_id,
        )
        failed = {(p.topic, p.partition): p.error for p in response.partitions if p.error is not Errors.NONE}
        if failed:
            if set(failed.values()) & REJOIN_ERRORS:
                self._request_rejoin()
                raise CommitFailedError(f"commit refused, the group rebalanced: {failed}")
            raise RuntimeError(f"commit failed: {failed}")

    async def commit_async(
        self, offsets: Mapping[TopicPartition | tuple[str, int], int], metadata: str = ""
    ) -> None:
        import asyncio

        await asyncio.get_running_loop().run_in_executor(None, self.commit, offsets, metadata)

    def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> dict[TopicPartition, int]:
        response = self.client.fetch_offsets(self.group_id, [(t, p) for t, p in partitions])
        return {TopicPartition(p.topic, p.partition): p.offset for p in response.partitions}

    def close(self, leave: bool = True) -> None:
        """Stop; a dynamic member leaves the group (a static one keeps its place)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self._lock:
            member_id = self.member_id
        if leave and member_id and self.group_instance_id is None and self._fatal is None:
            self._revoke(set(self._owned))
            try:
                self.client.leave_group(self.group_id, [MemberIdentity(member_id)])
            except Exception:
                logger.warning("%s: LeaveGroup failed", self.group_id, exc_info=True)

    # ---------------------------------------------------------- the loop

    def _run(self) -> None:
        try:
            while not self._closed.is_set():
                if self._poll_timed_out():
                    self._leave_for_poll_timeout()
                elif self._need_rejoin:
                    self._join_and_sync()
                else:
                    self._wake.wait(self.heartbeat_interval_ms / 1000)
                    self._wake.clear()
                    if not self._closed.is_set() and not self._need_rejoin:
                        self._heartbeat()
        except FencedInstanceError as exc:
            self._fatal = exc
            self._stable.set()
        except Exception as exc:
            logger.exception("%s: member loop failed", self.group_id)
            self._fatal = exc
            self._stable.set()

    def _poll_timed_out(self) -> bool:
        return (time.monotonic() - self._last_poll) * 1000 > self.max_poll_interval_ms and bool(
            self.member_id
        )

    def _leave_for_poll_timeout(self) -> None:
        logger.warning(
            "%s: poll() not called for %d ms: leaving the group", self.group_id, self.max_poll_interval_ms
        )
        self._lose()
        if self.group_instance_id is None:
            self.client.leave_group(self.group_id, [MemberIdentity(self.member_id)])
        with self._lock:
            self.member_id, self.generation_id = "", -1
        while not self._closed.is_set() and self._poll_timed_out_since_leave():
            self._wake.wait(0.1)
            self._wake.clear()
        self._need_rejoin = True

    def _poll_timed_out_since_leave(self) -> bool:
        return (time.monotonic() - self._last_poll) * 1000 > self.max_poll_interval_ms

    def _heartbeat(self) -> None:
        with self._lock:
            generation, member_id = self.generation_id, self.member_id
        error = self.client.heartbeat(self.group_id, generation, member_id, self.group_instance_id).error
        self._on_error(error)

    def _on_error(self, error: Errors) -> None:
        if error is Errors.NONE:
            return
        if error is Errors.FENCED_INSTANCE_ID:
            raise FencedInstanceError(f"{self.group_instance_id!r} was fenced by a newer member")
        if error in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID):
            self._lose()
            if error is Errors.UNKNOWN_MEMBER_ID:
                with self._lock:
                    self.member_id = ""
        self._request_rejoin()

    def _request_rejoin(self) -> None:
        self._need_rejoin = True
        self._stable.clear()
        self._wake.set()

    # ------------------------------------------------------- join & sync

    def _join_and_sync(self) -> None:
        if self.protocol is RebalanceProtocol.EAGER:
            self._revoke(set(self._owned))
        response = self.client.join_group(self._join_request())
        if response.error is Errors.MEMBER_ID_REQUIRED:
            with self._lock:
                self.member_id = response.member_id
            return
        if response.error is not Errors.NONE:
            self._on_join_error(response.error)
            return
        with self._lock:
            self.member_id, self.generation_id = response.member_id, response.generation_id
            self.protocol_name = response.protocol_name
        assignments = ()
        if response.leader == response.member_id and not response.skip_assignment:
            assignments = tuple(self._assign(response).items())
        sync = self.client.sync_group(
            SyncGroupRequest(
                self.group_id,
                response.generation_id,
                response.member_id,
                self.group_instance_id,
                response.protocol_type,
                response.protocol_name,
                assignments,
            )
        )
        if sync.error is not Errors.NONE:
            self._on_error(sync.error)
            return
        self._on_assignment(decode_assignment(sync.assignment).partitions if sync.assignment else ())

    def _join_request(self) -> JoinGroupRequest:
        owned = sorted(self._owned) if self.protocol is RebalanceProtocol.COOPERATIVE else []
        protocols = tuple(
            (
                name,
                subscription_metadata(
                    name,
                    self.topics,
                    owned_partitions=owned,
                    generation_id=self.generation_id,
                    last_assignment=self._last_assignment,
                    last_generation=self._last_generation,
                ),
            )
            for name in self.assignors
        )
        return JoinGroupRequest(
            self.group_id,
            self.session_timeout_ms,
            self.rebalance_timeout_ms,
            "consumer",
            protocols,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            client_id=self.client_id,
            client_host=self.client_host,
        )

    def _on_join_error(self, error: Errors) -> None:
        if error in (Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_MAX_SIZE_REACHED):
            with self._lock:
                self.member_id, self.generation_id = "", -1
        if error is Errors.FENCED_INSTANCE_ID:
            raise FencedInstanceError(f"{self.group_instance_id!r} was fenced by a newer member")
        if error in (
            Errors.INCONSISTENT_GROUP_PROTOCOL,
            Errors.INVALID_SESSION_TIMEOUT,
            Errors.INVALID_GROUP_ID,
        ):
            raise RuntimeError(f"JoinGroup for {self.group_id!r} failed: {error.name}")
        time.sleep(0.1)

    def _assign(self, response: Any) -> dict[str, bytes]:
        metadata = {m.member_id: m.metadata for m in response.members}
        instance_ids = {m.member_id: m.group_instance_id for m in response.members}
        topics = {t for md in metadata.values() for t in decode_subscription(md).topics}
        counts = self.topic_partitions(topics) if callable(self.topic_partitions) else self.topic_partitions
        return perform_assignment(response.protocol_name, metadata, counts, instance_ids)

    def _on_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        new = set(partitions)
        with self._lock:
            owned = set(self._owned)
        revoked, added = owned - new, new - owned
        self._last_assignment, self._last_generation = sorted(new), self.generation_id
        if revoked:
            self._revoke(revoked)
        with self._lock:
            self._owned = new
        self.rebalances += 1
        self._call("assigned", added)
        if revoked and self.protocol is RebalanceProtocol.COOPERATIVE:
            # KIP-429: give up what moved, then rejoin so it can be handed over.
            self._request_rejoin()
            return
        self._need_rejoin = False
        self._stable.set()

    def _revoke(self, partitions: set[TopicPartition]) -> None:
        if partitions:
            self._call("revoked", partitions)
            with self._lock:
                self._owned -= partitions

    def _lose(self) -> None:
        with self._lock:
            lost, self._owned = set(self._owned), set()
            self.generation_id = -1
        self._stable.clear()
        if lost:
            self._call("lost", lost)

    def _call(self, event: str, partitions: set[TopicPartition]) -> None:
        listener = self.listeners[event]
        if listener is not None and (partitions or event == "assigned"):
            try:
                listener(set(partitions))
            except Exception:
                logger.exception("%s: on_%s listener failed", self.group_id, event)

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal
