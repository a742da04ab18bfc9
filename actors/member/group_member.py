"""GroupMember: the consumer side of the group protocol for plain processes, Ray tasks and sync actors.

Like Kafka's KafkaConsumer group management (ConsumerCoordinator): the member
joins, runs the assignor when it leads, syncs, heartbeats and rejoins in a
background thread, calls the rebalance listeners in that thread, and commits
and fetches offsets. The decisions live in `loop.MemberLoop`, shared
with `async_group_member.AsyncGroupMember` (the same API as coroutines, for async
actors and asyncio programs); this module owns the constructor both share
(`MemberBase`) and the blocking driver.

Rules:
- With no `client`, `start()` connects to the running service
  (`actors.connect(credential=credential)`: the Ray-path credential, if
  given, docs/security.md); with no `topic_partitions`, partition counts come
  from the service's topic registry.
- `poll()` (or `wait_for_assignment()`) tells the member the application is
  alive: without one for `max_poll_interval_ms` the member leaves the group.
- `close()` returns once the loop has stopped; a loop parked in a JoinGroup
  or SyncGroup is released by the LeaveGroup of a dynamic member, and
  abandoned (it drops its answer) for a static one, which sends none.
- Listeners run in the member's thread, which sends keep-alive heartbeats
  from a helper thread meanwhile, so a listener slower than the session
  timeout keeps the membership (Kafka's heartbeat thread does the same),
  also across a leader failover: one not answered is sent again. Their
  exceptions are logged, not raised: the membership goes on.
- `group_protocol="consumer"` makes a KIP-848 member (`consumer_loop.ConsumerLoop`):
  the coordinator assigns (`group_remote_assignor` names its assignor; the
  classic `assignors`, `session_timeout_ms` and `heartbeat_interval_ms` are
  not used, as in Kafka), `subscription_pattern` subscribes by a regex the
  coordinator resolves, `generation_id` is the member epoch. It keeps an
  assignment watch parked at the coordinator, answered as soon as a
  heartbeat would change its partitions (not Kafka's: it hears of a new
  assignment in milliseconds, not a heartbeat interval later;
  `assignment_watch=False` for Kafka's behaviour).
- A `topic_partitions` callable gets the wanted topics (None: every topic)
  and returns a mapping (for AsyncGroupMember it may return an awaitable).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from actors.client.client import Client
from actors.client.connect import connect
from actors.member.api import (
    Describe,
    Effect,
    MemberConfig,
    Notify,
    OffsetAndMetadata,
    Send,
    Steps,
    TopicIds,
    Watch,
    advance,
    committed_offsets,
)
from actors.member.consumer_loop import ConsumerLoop
from actors.member.loop import MemberLoop
from coordinator.errors import Errors
from coordinator.messages import OffsetFetchRequest
from coordinator.topic_partition import TopicPartition

logger = logging.getLogger(__name__)
Listener = Callable[[set[TopicPartition]], Any]
# A mapping of partition counts, or a callable given the wanted topics (None: all of them).
TopicPartitions = (
    Mapping[str, int]
    | Callable[[tuple[str, ...] | None], Mapping[str, int] | Awaitable[Mapping[str, int]]]
)
Offsets = Mapping[TopicPartition | tuple[str, int], int]
DEFAULT_ASSIGNORS = ("range", "cooperative-sticky")  # Kafka's partition.assignment.strategy
# A consumer-protocol member's OffsetFetch refused for a stale epoch is sent again with
# the newer one its heartbeat brings, as Kafka's consumer retries it, this many times.
STALE_FETCH_RETRIES = 3


def log_keep_alive_failure(group_id: str, failures: int, exc: BaseException) -> None:
    """A keep-alive heartbeat not answered: the first, and every tenth after, logged."""
    log = logger.warning if failures == 1 or failures % 10 == 0 else logger.debug
    log("%s: keep-alive heartbeat not answered (%d times), sent again: %r", group_id, failures, exc)


class MemberBase(ABC):
    """What GroupMember and AsyncGroupMember share: configuration, state reads, listeners."""

    def __init__(
        self,
        group_id: str,
        topics: Iterable[str] = (),
        *,
        pattern: re.Pattern[str] | str | None = None,
        client: Client | None = None,
        topic_partitions: TopicPartitions | None = None,
        assignors: Iterable[str] = DEFAULT_ASSIGNORS,
        session_timeout_ms: int = 45_000,
        rebalance_timeout_ms: int | None = None,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        metadata_max_age_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        group_instance_id: str | None = None,
        client_id: str = "raygroups",
        client_host: str = "",
        on_assigned: Listener | None = None,
        on_revoked: Listener | None = None,
        on_lost: Listener | None = None,
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        subscription_pattern: str | None = None,
        assignment_watch: bool = True,
        credential: str | None = None,
    ) -> None:
        self.config = MemberConfig(
            group_id=group_id,
            topics=tuple(dict.fromkeys(topics)),
            pattern=re.compile(pattern) if isinstance(pattern, str) else pattern,
            assignors=tuple(assignors),
            session_timeout_ms=session_timeout_ms,
            # Kafka sends max.poll.interval.ms as the rebalance timeout.
            rebalance_timeout_ms=rebalance_timeout_ms or max_poll_interval_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            retry_backoff_ms=retry_backoff_ms,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            group_protocol=group_protocol,
            group_remote_assignor=group_remote_assignor,
            subscription_pattern=subscription_pattern,
            assignment_watch=assignment_watch,
        )
        self.client = client
        # Without a client: the Ray-path credential of the one it connects (docs/security.md).
        self.credential = credential
        self.topic_partitions = topic_partitions
        self.listeners = {"assigned": on_assigned, "revoked": on_revoked, "lost": on_lost}
        self._init_driver()
        loop = ConsumerLoop if group_protocol == "consumer" else MemberLoop
        self.core: MemberLoop | ConsumerLoop = loop(
            self.config, wake=self._wake_loop, set_stable=self._set_stable
        )

    @abstractmethod
    def _init_driver(self) -> None: ...

    # The driver's events (threading's or asyncio's): wake the loop; stable, for waiters.
    _wake: threading.Event | asyncio.Event
    _stable: threading.Event | asyncio.Event

    def _wake_loop(self) -> None:
        self._wake.set()

    def _set_stable(self, stable: bool) -> None:
        if stable:
            self._stable.set()
        else:
            self._stable.clear()

    # ------------------------------------------------------------ state

    @property
    def group_id(self) -> str:
        return self.config.group_id

    @property
    def member_id(self) -> str:
        return self.core.member_id

    @property
    def generation_id(self) -> int:
        return self.core.generation_id

    @property
    def protocol_name(self) -> str | None:
        """The assignor the group selected."""
        return self.core.protocol_name

    @property
    def is_leader(self) -> bool:
        return bool(self.core.member_id) and self.core.leader_id == self.core.member_id

    @property
    def is_stable(self) -> bool:
        """In a completed generation with nothing pending (Kafka's state STABLE)."""
        return self.core.stable and self.core.fatal is None

    @property
    def group_protocol(self) -> str:
        return self.config.group_protocol

    @property
    def rebalances(self) -> int:
        """Completed SyncGroup rounds of this member (consumer protocol: reconciliations)."""
        return self.core.rebalances

    @property
    def subscription(self) -> tuple[str, ...]:
        return self.core.subscription or ()

    def assignment(self) -> set[TopicPartition]:
        self.core.raise_fatal()
        return self.core.assignment()

    def poll(self) -> set[TopicPartition]:
        """The application is alive (max.poll.interval.ms); returns the assignment."""
        self.core.poll()
        return self.assignment()

    def _static_counts(self, topics: tuple[str, ...] | None) -> Mapping[str, int] | Awaitable[Any]:
        source = self.topic_partitions
        assert source is not None
        if callable(source):
            return source(topics)
        return dict(source) if topics is None else {t: source[t] for t in topics if t in source}

    def _fetch_request(self, partitions: list[tuple[str, int]]) -> OffsetFetchRequest:
        """OffsetFetch; a consumer-protocol member in the group names itself and its
        epoch (OffsetFetch v9), as Kafka's consumer does."""
        core, group_id = self.core, self.config.group_id
        if isinstance(core, ConsumerLoop) and core.member_epoch > 0:
            return OffsetFetchRequest(
                group_id, tuple(partitions), member_id=core.member_id, member_epoch=core.member_epoch
            )
        return OffsetFetchRequest(group_id, tuple(partitions))

    def _keep_alive_interval_s(self) -> float:
        """Keep-alive heartbeats while a listener runs go at the interval the coordinator
        gave a consumer-protocol member, else at the member's own."""
        core = self.core
        if isinstance(core, ConsumerLoop):
            return core.heartbeat_interval_ms / 1000
        return self.config.heartbeat_interval_ms / 1000

    def _listener(self, effect: Notify) -> Listener | None:
        return self.listeners[effect.listener]

    def _listener_failed(self, effect: Notify) -> None:
        logger.exception("%s: on_%s listener failed", self.config.group_id, effect.listener)


class GroupMember(MemberBase):
    """A group member driven by a background thread; see the module docstring."""

    def _init_driver(self) -> None:
        self._wake = threading.Event()
        self._stable = threading.Event()
        self._thread: threading.Thread | None = None
        self._watching: concurrent.futures.Future[Any] | None = None  # the parked assignment watch

    def _connected(self) -> Client:
        if self.client is None:
            self.client = connect(credential=self.credential)
        return self.client

    # ------------------------------------------------------------ public

    def start(self) -> GroupMember:
        if self._thread is None:
            client = self._connected()
            if self.topic_partitions is None:
                client.describe_topics(())  # fails here, not in the loop, when there is no registry
            self.core.poll()
            self._thread = threading.Thread(
                target=self._run, name=f"group-member-{self.config.group_id}", daemon=True
            )
            self._thread.start()
        return self

    def __enter__(self) -> GroupMember:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_for_assignment(self, timeout: float | None = None) -> set[TopicPartition]:
        """Block until the member is in a stable generation; returns its partitions."""
        self.core.poll()
        if self.core.closed:
            raise RuntimeError("the member is closed")
        if not self._stable.wait(timeout):
            self.core.raise_fatal()
            raise TimeoutError(f"member of {self.config.group_id!r} not stable after {timeout} s")
        return self.poll()

    def commit(self, offsets: Offsets, metadata: str = "") -> None:
        """OffsetCommit with this member's generation; CommitFailedError if refused."""
        self.core.raise_fatal()
        response = self._connected().send(self.core.commit_request(offsets, metadata))
        self.core.on_commit_response(response)

    async def commit_async(self, offsets: Offsets, metadata: str = "") -> None:
        self.core.raise_fatal()
        response = await self._connected().send_async(self.core.commit_request(offsets, metadata))
        self.core.on_commit_response(response)

    def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where nothing was committed)."""
        wanted = [(t, p) for t, p in partitions]
        response = self._connected().send(self._fetch_request(wanted))
        for _ in range(STALE_FETCH_RETRIES):
            if response.error is not Errors.STALE_MEMBER_EPOCH:
                break
            time.sleep(self.config.retry_backoff_ms / 1000)  # the heartbeat brings the newer epoch
            response = self._connected().send(self._fetch_request(wanted))
        return committed_offsets(response)

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the loop, revoke the partitions and (dynamic members) leave the group."""
        if not self.core.close():
            return
        deadline = time.monotonic() + timeout_s
        thread = self._thread
        while thread is not None and thread.is_alive() and not self.core.parked:
            if time.monotonic() > deadline:
                break
            thread.join(0.05)
        if self.client is not None:
            self._drive(self.core.leave())
        if thread is not None and (self.config.group_instance_id is None or not self.core.parked):
            thread.join(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------ driver

    def _run(self) -> None:
        try:
            self._drive(self.core.run(), until_closed=True)
        except BaseException as exc:
            self.core.fail(exc)

    def _drive(self, steps: Steps[None], until_closed: bool = False) -> None:
        value: Any = None
        error: BaseException | None = None
        while (effect := advance(steps, value, error)) is not None:
            try:
                value, error = self._perform(effect), None
            except Exception as exc:
                value, error = None, exc
            if until_closed and self.core.closed:
                steps.close()
                return

    def _perform(self, effect: Effect) -> Any:
        if isinstance(effect, Send):
            return self._connected().send(effect.request, timeout_s=effect.timeout_s)
        if isinstance(effect, Describe):
            if self.topic_partitions is None:
                return self._connected().describe_topics(effect.topics)
            return self._static_counts(effect.topics)
        if isinstance(effect, TopicIds):
            return self._connected().topic_ids()
        if isinstance(effect, Notify):
            self._notify(effect)
            return None
        if isinstance(effect, Watch):
            return self._watch(effect)
        self._wake.wait(effect.timeout_s)
        self._wake.clear()
        return None

    def _watch(self, effect: Watch) -> Any:
        """Wait, with the parked watch's answer (if it comes first) as the result."""
        answer = self._watching
        if answer is None:
            try:
                answer = self._connected().send_later(effect.request)
            except Exception as exc:  # no route now: the loop's heartbeat finds the coordinator
                answer = concurrent.futures.Future()
                answer.set_exception(exc)
            answer.add_done_callback(lambda _: self._wake.set())
            self._watching = answer
        self._wake.wait(effect.timeout_s)
        self._wake.clear()
        if not answer.done():
            return None
        self._watching = None
        return answer.result()  # or raises the watch's failure

    def _notify(self, effect: Notify) -> None:
        listener = self._listener(effect)
        if listener is None:
            return
        done = threading.Event()
        threading.Thread(target=self._keep_alive, args=(done,), daemon=True).start()
        try:
            listener(set(effect.partitions))
        except Exception:
            self._listener_failed(effect)
        finally:
            done.set()

    def _keep_alive(self, done: threading.Event) -> None:
        """Heartbeats while a listener runs; the loop's own heartbeat handles any error.
        One not answered (the coordinator moving: a leader failover) is sent again at the
        next interval, as Kafka's heartbeat thread goes on looking for the coordinator."""
        interval_s = self._keep_alive_interval_s()
        failures = 0
        while not done.wait(interval_s):
            request = self.core.heartbeat_request()
            if request is None:
                return
            try:
                self._connected().send(request, timeout_s=interval_s)
            except Exception as exc:
                failures += 1
                log_keep_alive_failure(self.config.group_id, failures, exc)
