"""ConsumerPool: a consumer group's members as Ray actors, scaled on the group's live lag.

    pool = actors.ConsumerPool("orders", ["orders"], process_fn, min_members=1,
                               max_members=8, target_lag_messages=10_000).start()
    ...
    pool.stop()

The user's contract is one function, `process_fn(topic, partition,
start_offset) -> next_offset`: read the partition's records from
`start_offset` on, from the user's own source, process some (or none), and
return the offset after the last one processed. The pool owns membership,
commits and scaling (actors/pool/member.py runs it and commits).

How the pool learns the lag: a control thread in the caller's process asks the
group's partition leader for the group's live lag (`Client.lag([group])`, one
`LagRequest` to one leader, answered from its incremental `LagTracker`: the
group's rows only, no scan) every `poll_interval_s` (0.2 s), and feeds it to the
pure decision of coordinator/pool_policy.py. The leader keeps that lag as each
commit and end-offset report arrives, so the pool reacts within one interval
of a report (bench/pool.py measures it), not KEDA's 30 s; a watch parked at the
leader (as coordinator/consumer/watch.py parks assignment watches) would save
the idle requests and is left to do.

Scaling: up by adding `PoolMember` actors (Ray's SPREAD scheduling: over the
nodes), down by stopping the newest member, which commits its range in
progress and leaves the group before the actor is killed (its partitions move
by cooperative-sticky's revoke-then-assign: never owned twice). When the
members want more CPUs than the cluster has, the pool asks Ray's autoscaler
for them (`ray.autoscaler.sdk.request_resources`). Members beyond the
subscribed partitions would idle: `max_members` (and `min_members`) are capped
at the partition count, said in a warning and in `pool.notes`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any, Protocol

import ray

from actors.client.client import Client
from actors.client.connect import connect
from actors.pool.member import PoolMember, ProcessFn
from coordinator.errors import Errors
from coordinator.messages import OffsetFetchRequest
from coordinator.pool_policy import Decision, LagPolicy, LagRow, Target, check_bounds

logger = logging.getLogger(__name__)
STOP_TIMEOUT_S = 30.0


class Policy(Protocol):
    poll_interval_ms: int

    def decide(self, rows: list[LagRow], members: int, now_ms: int) -> Decision: ...


class ConsumerPool:
    """See the module docstring. `history` holds (time, members, lag, lag_ms, reason) per change."""

    def __init__(
        self,
        group: str,
        topics: Iterable[str],
        process_fn: ProcessFn,
        min_members: int = 1,
        max_members: int = 8,
        *,
        target_lag_seconds: float | None = None,
        target_lag_messages: int | None = None,
        cooldown_s: float = 30.0,
        scale_up_interval_s: float = 2.0,
        stuck_after_s: float = 60.0,
        limit_to_lagging: bool = True,
        poll_interval_s: float = 0.2,
        member_cpus: float = 1.0,
        member_options: dict[str, Any] | None = None,
        client: Client | None = None,
        policy: Policy | None = None,
        request_resources: bool = True,
    ) -> None:
        if not callable(process_fn):
            raise TypeError("process_fn must be callable: (topic, partition, start_offset) -> next_offset")
        self.topics = list(dict.fromkeys(topics))
        if not self.topics or not all(isinstance(t, str) and t for t in self.topics):
            raise ValueError(f"topics must be topic names, got {self.topics!r}")
        if not isinstance(group, str) or not group:
            raise ValueError(f"group must be a group id, got {group!r}")
        check_bounds(min_members, max_members)
        if poll_interval_s <= 0 or member_cpus < 0:
            raise ValueError("poll_interval_s must be > 0 and member_cpus >= 0")
        self.target = Target(
            messages=target_lag_messages,
            ms=None if target_lag_seconds is None else int(round(target_lag_seconds * 1000)),
        )
        self.group, self.process_fn = group, process_fn
        self.min_members, self.max_members = min_members, max_members
        self.options = {
            "cooldown_ms": int(cooldown_s * 1000), "scale_up_interval_ms": int(scale_up_interval_s * 1000),
            "stuck_after_ms": int(stuck_after_s * 1000), "limit_to_lagging": limit_to_lagging,
            "poll_interval_ms": int(poll_interval_s * 1000),
        }
        self.member_cpus = member_cpus
        self.member_options = dict(member_options or {})
        self.client = client
        self.policy: Policy | None = policy
        self.request_resources = request_resources
        self.members: list[tuple[str, Any]] = []  # (name, actor), oldest first
        self.finished: dict[str, dict[str, Any]] = {}  # stopped members' last status, with their commits
        self.history: list[tuple[float, int, int | None, int | None, str]] = []
        self.notes: list[str] = []
        self.last_decision: Decision | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._requested_cpus = 0.0

    # ------------------------------------------------------------ public

    def start(self) -> ConsumerPool:
        client = self.client = self.client or connect()
        counts = client.describe_topics(self.topics)
        missing = [t for t in self.topics if t not in counts]
        if missing:
            raise ValueError(f"unknown topics: {', '.join(missing)}")
        partitions = sum(counts[t] for t in self.topics)
        if self.max_members > partitions:
            self._note(f"max_members {self.max_members} capped at the {partitions} partitions of "
                       f"{', '.join(self.topics)}: more members would idle")
            self.max_members = partitions
            self.min_members = min(self.min_members, partitions)
        if self.policy is None:
            self.policy = LagPolicy(self.target, self.min_members, self.max_members, partitions,
                                    **self.options)  # type: ignore[arg-type]
        self._commit_starts(client, counts)
        self._resize(max(self.min_members, 1), "start")
        self._thread = threading.Thread(target=self._control, name=f"pool-{self.group}", daemon=True)
        self._thread.start()
        return self

    def __enter__(self) -> ConsumerPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def size(self) -> int:
        return len(self.members)

    def status(self) -> list[dict[str, Any]]:
        """Each member's status (owned partitions, errors, restarts, commits)."""
        return list(ray.get([actor.status.remote() for _, actor in self.members]))

    def errors(self) -> list[dict[str, Any]]:
        """The function's failures the members recorded (each member's last 20; stopped
        members' too), oldest first."""
        statuses = [*self.finished.values(), *self.status()]
        found = [dict(e, member=s["name"]) for s in statuses for e in s["errors"]]
        return sorted(found, key=lambda e: e["at"])

    def commits(self) -> list[tuple[str, int, int, int]]:
        """Every range committed by the pool's members, live and stopped: (topic, partition, start, end)."""
        live = ray.get([actor.commits.remote() for _, actor in self.members])
        stopped = [s["commits_made"] for s in self.finished.values()]
        return [c for chunk in [*stopped, *live] for c in chunk]

    def stop(self) -> None:
        """Stop scaling, then every member (each commits its range in progress and leaves)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)
        while self.members:
            self._remove_newest()
        self.history.append((time.time(), 0, None, None, "stop"))
        if self._requested_cpus:
            self._request_cpus(0.0)

    # ------------------------------------------------------------ control

    def _note(self, text: str) -> None:
        logger.warning("%s: %s", self.group, text)
        self.notes.append(text)

    def _commit_starts(self, client: Client, counts: dict[str, int]) -> None:
        """Commit each partition's log start where the group committed nothing yet, so its lag
        is known from the start (live lag counts committed offsets). Only while the group has
        no members: such a commit is refused (ILLEGAL_GENERATION) to a group in use."""
        wanted = tuple((t, p) for t in self.topics for p in range(counts[t]))
        fetched = client.send(OffsetFetchRequest(self.group, wanted))
        have = {(p.topic, p.partition) for p in fetched.partitions if p.offset >= 0}
        absent = [tp for tp in wanted if tp not in have]
        if not absent:
            return
        starts = client.start_offsets(self.topics)
        offsets = {(t, p): starts.get((t, p), 0) for t, p in absent}
        response = client.commit_offsets(self.group, offsets)
        refused = {p.error for p in response.partitions if p.error is not Errors.NONE}
        if refused:
            self._note(f"start offsets not committed ({', '.join(e.name for e in refused)}): "
                       "the lag of partitions never committed is unknown until their first commit")

    def _control(self) -> None:
        policy, client = self.policy, self.client
        assert policy is not None and client is not None
        interval_s = policy.poll_interval_ms / 1000
        while not self._stop.wait(interval_s):
            try:
                rows = self._rows(client)
                decision = policy.decide(rows, len(self.members), int(time.time() * 1000))
                self.last_decision = decision
                if decision.members != len(self.members):
                    self._resize(decision.members, decision.reason, decision)
            except Exception:
                logger.exception("%s: scaling step failed; tried again next interval", self.group)

    def _rows(self, client: Client) -> list[LagRow]:
        lags = client.lag([self.group])
        topics = set(self.topics)
        return [
            (p.topic, p.partition, p.committed, p.lag, p.lag_ms)
            for g in lags for p in g.partitions if p.topic in topics
        ]

    def _resize(self, wanted: int, reason: str, decision: Decision | None = None) -> None:
        if wanted > len(self.members):
            self._request_cpus(wanted * self.member_cpus)
        while len(self.members) < wanted:
            self._add()
        while len(self.members) > wanted:
            self._remove_newest()
        if wanted * self.member_cpus < self._requested_cpus:
            self._request_cpus(wanted * self.member_cpus)
        lag = decision.lag if decision else None
        lag_ms = decision.lag_ms if decision else None
        self.history.append((time.time(), len(self.members), lag, lag_ms, reason))
        logger.info("%s: %d members (%s; lag %s, %s ms)", self.group, len(self.members), reason, lag, lag_ms)

    def _add(self) -> None:
        name = f"{self.group}-{uuid.uuid4().hex[:8]}"
        actor = PoolMember.options(  # type: ignore[attr-defined]
            scheduling_strategy="SPREAD", num_cpus=self.member_cpus
        ).remote(name, self.group, self.topics, self.process_fn, self.member_options)
        self.members.append((name, actor))

    def _remove_newest(self) -> None:
        name, actor = self.members.pop()
        try:
            self.finished[name] = ray.get(actor.stop.remote(STOP_TIMEOUT_S), timeout=STOP_TIMEOUT_S + 5)
        except Exception as exc:
            self._note(f"member {name} did not stop cleanly: {exc!r}")
        ray.kill(actor, no_restart=True)

    def _request_cpus(self, cpus: float) -> None:
        """Ask the autoscaler for the members' CPUs when the cluster has fewer (0: withdraw)."""
        if not self.request_resources:
            return
        have = float(ray.cluster_resources().get("CPU", 0.0))  # type: ignore[no-untyped-call]
        if cpus and cpus <= have and not self._requested_cpus:
            return
        try:
            from ray.autoscaler.sdk import request_resources
            request_resources(num_cpus=int(-(-cpus // 1)) if cpus > have else 0)
            self._requested_cpus = cpus if cpus > have else 0.0
        except Exception as exc:  # no autoscaler (a local cluster): said once
            if not any("autoscaler" in n for n in self.notes):
                self._note(f"the autoscaler could not be asked for {cpus} CPUs: {exc!r}")
