"""PoolMember: one member of a `ConsumerPool`, a Ray actor running the user's function.

The actor hosts a `GroupMember` and a consumer thread. The member is on
KIP-848's consumer protocol by default: the coordinator assigns, a partition
moves only after its owner revoked it, and assignment watches tell each
member of its new partitions at once, so a member joining takes records
within about a second (bench/pool.py: 0.7-1.2 s from the scale-up decision to
its first commit; on the classic protocol, cooperative-sticky's two rounds
took 1.7-6 s of it).
`member_options={"group_protocol": "classic"}` gives the classic protocol
with the cooperative-sticky assignor (also revoke-then-assign). The thread,
for each partition it owns in turn, calls

    process_fn(topic, partition, start_offset) -> next_offset

and commits `next_offset` when it moved (the function read and processed the
records [start_offset, next_offset) from the user's own source; returning
`start_offset` means nothing to do now). One partition is processed and
committed at a time under a lock the revoke listener takes too, so a partition
handed to another member (a scale-down, a rebalance) is revoked only after its
last processed range is committed: no partition is processed by two members at
once and no range is committed twice. A commit refused while the group
completes a rebalance is retried while the partition is still owned.

A standby (`standby=True`): the pool keeps one member started ahead, its
process up and its client connected, but not in the group; `activate()` makes
it join. Starting a Ray actor's process is most of a new member's start
(bench/pool.py), so a scale-up takes a standby and starts the next one.

A function that raises: the error is recorded (`status()["errors"]`, the
pool's `errors()`) and logged, the member leaves the group (its partitions are
revoked, their commits kept, so another member or this one takes them from
the last commit) and joins again with a fresh GroupMember after a backoff.
The process dying (a node lost): Ray restarts the actor (`max_restarts=-1`),
and the group reassigns its partitions after the session timeout meanwhile.
The restarted member reads its record (actors/pool/ledger.py, in Ray's GCS):
activated before, it joins again; a standby never activated stays out; its
errors and commits are those the dead process recorded, and `status()`'s
`incarnation` counts its processes.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import ray

from actors.member.api import CommitFailedError
from actors.member.group_member import GroupMember
from actors.pool.ledger import Ledger, memory_kv, ray_kv
from actors.service import connect
from coordinator.errors import Errors
from coordinator.topic_partition import TopicPartition

logger = logging.getLogger(__name__)
ProcessFn = Callable[[str, int, int], int]
IDLE_S = 0.02  # nothing processed in a round: wait this long before the next
COMMIT_RETRY_S = 0.05  # the backoff between two tries of a commit refused for a rebalance
COMMIT_RETRY_FOR_S = 30.0
RETRIED_COMMIT_ERRORS = frozenset({Errors.REBALANCE_IN_PROGRESS, Errors.STALE_MEMBER_EPOCH})


class PoolMemberLogic:
    """The consumer thread and its listeners, without Ray (the actor below hosts it)."""

    def __init__(self, name: str, group_id: str, topics: list[str], process_fn: ProcessFn,
                 member_options: dict[str, Any], restart_backoff_s: float = 0.5,
                 standby: bool = False, ledger: Ledger | None = None) -> None:
        self.name, self.group_id, self.topics = name, group_id, topics
        self.process_fn = process_fn
        self.member_options = {"group_protocol": "consumer", **member_options,
                               "assignors": ("cooperative-sticky",)}
        self.restart_backoff_s = restart_backoff_s
        self.lock = threading.Lock()  # held while one partition is processed and committed
        self.owned: dict[TopicPartition, int] = {}  # partition -> next offset to process
        self.member: GroupMember | None = None
        self.ledger = ledger or Ledger(name, memory_kv())  # errors, commits, activated: kept outside
        self.restarts = 0  # rejoins after the function failed, in this process
        # Wall clock, for the benchmark: started, activated (joins), first assignment, first commit.
        self.started_at = time.time()
        self.activated_at: float | None = None
        self.assigned_at: float | None = None
        self.first_commit_at: float | None = None
        self.client: Any = None
        self.active = threading.Event()
        self.ledger.start_incarnation(active=not standby)
        if self.ledger.active:  # started as a member, or a standby activated before a restart
            self.activate()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"pool-member-{name}", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------ listeners (member's thread)

    def _on_assigned(self, parts: set[TopicPartition]) -> None:
        member = self.member
        assert member is not None
        committed = member.committed(parts)
        if parts and self.assigned_at is None:
            self.assigned_at = time.time()
        with self.lock:
            for tp in parts:
                found = committed.get(tp)
                self.owned[tp] = found.offset if found is not None else 0

    def _on_revoked(self, parts: set[TopicPartition]) -> None:
        with self.lock:  # waits for the range in progress to be committed
            for tp in parts:
                self.owned.pop(tp, None)

    def _on_lost(self, parts: set[TopicPartition]) -> None:
        self._on_revoked(parts)

    # ------------------------------------------------------------ consumer thread

    def activate(self) -> None:
        """Join the group (a standby's start)."""
        if self.activated_at is None:
            self.activated_at = time.time()
        self.ledger.activate()  # before joining: a restart of this process joins again
        self.active.set()

    def _run(self) -> None:
        try:
            self.client = connect()  # warm: a standby joins without connecting first
        except Exception as exc:  # the GroupMember connects (or fails) itself at its start
            self._failed(exc)
        self.active.wait()
        while not self.stopping.is_set():
            member = GroupMember(
                self.group_id, self.topics, client=self.client, on_assigned=self._on_assigned,
                on_revoked=self._on_revoked, on_lost=self._on_lost, **self.member_options,
            )
            self.member = member
            try:
                member.start()
                self._consume(member)
            except Exception as exc:
                self._failed(exc)
            finally:
                try:
                    member.close()
                except Exception:
                    logger.exception("%s: closing the group member failed", self.name)
                with self.lock:
                    self.owned.clear()
                self.ledger.flush()  # left the group: its commits all recorded
            if not self.stopping.is_set():
                self.restarts += 1
                self.stopping.wait(min(self.restart_backoff_s * self.restarts, 10.0))

    def _failed(self, exc: BaseException) -> None:
        self.ledger.add_error({"at": time.time(), "error": repr(exc), "traceback": traceback.format_exc()})
        logger.error("%s of %s: the function failed, the member restarts: %r", self.name, self.group_id, exc)

    def _consume(self, member: GroupMember) -> None:
        while not self.stopping.is_set():
            member.poll()  # alive (max.poll.interval.ms); raises the member's fatal error
            moved = False
            for tp in sorted(self.owned):
                if self.stopping.is_set():
                    break
                moved = self._process(member, tp) or moved
            if moved:
                self.ledger.flush_due()  # the commits of the round, at most once an interval
            else:  # idle: caught up, the record too
                self.ledger.flush()
                self.stopping.wait(IDLE_S)

    def _process(self, member: GroupMember, tp: TopicPartition) -> bool:
        with self.lock:
            start = self.owned.get(tp)
            if start is None:
                return False  # revoked meanwhile
            end = self.process_fn(tp.topic, tp.partition, start)
            if isinstance(end, bool) or not isinstance(end, int) or end < start:
                call = f"process_fn({tp.topic!r}, {tp.partition}, {start})"
                raise ValueError(f"{call} must return an int >= {start}, got {end!r}")
            if end == start:
                return False
            self._commit(member, tp, end)
            self.owned[tp] = end
            self.ledger.add_commit((tp.topic, tp.partition, start, end))
            if self.first_commit_at is None:
                self.first_commit_at = time.time()
            return True

    def _commit(self, member: GroupMember, tp: TopicPartition, end: int) -> None:
        deadline = time.monotonic() + COMMIT_RETRY_FOR_S
        while True:
            try:
                member.commit({tp: end})
                return
            except CommitFailedError as exc:
                # Completing a rebalance (classic), or the member's epoch moved on meanwhile
                # (consumer protocol): the partition is still ours (its revoke waits for this
                # lock), so the commit goes again with the generation or epoch that follows.
                if (not set(exc.errors.values()) <= RETRIED_COMMIT_ERRORS or self.stopping.is_set()
                        or time.monotonic() > deadline):
                    raise
                self.stopping.wait(COMMIT_RETRY_S)

    # ------------------------------------------------------------ control

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "owned": sorted((tp.topic, tp.partition) for tp in self.owned),
            "active": self.active.is_set(),
            "restarting": False,  # the pool says True when it answers from the record
            "errors": list(self.ledger.errors),
            "error_count": self.ledger.error_count,
            "restarts": self.restarts,
            "incarnation": self.ledger.incarnation,
            "commits": len(self.ledger.commits),
            "first_commit_at": self.first_commit_at,
            "started_at": self.started_at,
            "activated_at": self.activated_at,
            "assigned_at": self.assigned_at,
        }

    def stop(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """Finish the range in progress, commit it, leave the group; returns the final
        status, with the commits made (`commits_made`)."""
        self.stopping.set()
        self.active.set()
        self.thread.join(timeout_s)
        self.ledger.flush()
        return {**self.status(), "commits_made": list(self.ledger.commits)}


@ray.remote(max_restarts=-1, max_concurrency=4)  # type: ignore[call-overload]
class PoolMember:
    """The Ray actor hosting a `PoolMemberLogic`; see the module docstring."""

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        # Ray restarts an actor with its first arguments: whether it was activated since,
        # and what it recorded, come from its ledger (a standby never activated stays out).
        kwargs["ledger"] = Ledger(name, ray_kv()).load()
        self.logic = PoolMemberLogic(name, *args, **kwargs)

    def status(self) -> dict[str, Any]:
        return self.logic.status()

    def commits(self) -> list[tuple[str, int, int, int]]:
        self.logic.ledger.flush()  # what it answers is recorded: a restart still has it
        return list(self.logic.ledger.commits)

    def activate(self) -> None:
        self.logic.activate()

    def stop(self, timeout_s: float = 30.0) -> dict[str, Any]:
        return self.logic.stop(timeout_s)
