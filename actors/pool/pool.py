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

How the pool learns the lag: pushed. A control thread in the caller's process
keeps one lag watch parked at the group's partition leader
(coordinator/lag_watch.py: `LagWatchRequest`, sent with `Client.send`, which
follows a failover or a repartition to the new owner). The leader keeps the
group's lag as each commit and end-offset report arrives and answers the
watch when the lag crosses the pool's target, moves by half the target, or at
the policy's next time-based check (a cooldown or scale-up wait that ends;
at most `keep_alive_s`). The pool feeds each answer's rows to the pure
decision of coordinator/pool_policy.py and parks the next watch with the lag
it saw. So an idle pool costs a request per keep-alive, and a crossing is
acted on as soon as the leader applies the commit or report that made it
(bench/pool.py measures it), not at KEDA's next 30 s poll. A polled policy
(`KedaPolicy`, for the comparison) is asked at its own `next_check_ms`.

Scaling: up by activating the standby, a `PoolMember` actor started ahead
(its process up and connected: starting an actor's process is most of a new
member's start) and starting the next standby, or by adding a `PoolMember`
(Ray's SPREAD scheduling: over the nodes) when there is none; down by
stopping the newest member, which commits its range in
progress and leaves the group before the actor is killed (its partitions move
by cooperative-sticky's revoke-then-assign: never owned twice). When the
members want more CPUs than the cluster has, the pool asks Ray's autoscaler
for them (`ray.autoscaler.sdk.request_resources`). Members beyond the
subscribed partitions would idle: `max_members` (and `min_members`) are capped
at the partition count, said in a warning and in `pool.notes`.

Pending members: a member added (the standby activated, or a new actor) is
*pending* until its first commit; the pool tells the policy how many are, and
the policy does not add again while a scale-up is still starting (it sizes a
step from the measured throughput per member and lag growth instead,
coordinator/pool_policy.py). A pending member found not active (Ray restarted
it before it got the activation) is activated again.

Restarts: Ray restarts a member's actor (max_restarts) with its first
arguments; the member's record in Ray's GCS (actors/pool/ledger.py) says
whether it was activated, so a restarted standby stays out of the group and a
restarted member rejoins: the pool counts exactly the members in the group.
Its errors and commits are in that record too; the pool drops a member's
record once it holds the member's final status (`finished`).

The control thread never dies silently: a failed step is logged, kept
(`control_errors`, also in `errors()` as member "pool") and retried after
`RETRY_S`; anything that ends the thread otherwise is kept there too and
`control_status()` says the thread is no longer running.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import ray

from actors.client.client import Client
from actors.client.connect import connect
from actors.pool import ledger
from actors.pool.member import PoolMember, ProcessFn
from coordinator.errors import Errors
from coordinator.lag_watch import LagWatchRequest, LagWatchResponse
from coordinator.messages import OffsetFetchRequest
from coordinator.pool_policy import Decision, LagPolicy, LagRow, Target, check_bounds, watch_terms

logger = logging.getLogger(__name__)
STOP_TIMEOUT_S = 30.0
RETRY_S = 0.5  # after a failed step (the service unreachable past the client's own retries)
STATUS_TIMEOUT_S = 2.0  # asking the pending members how they are
MAX_CONTROL_ERRORS_KEPT = 20
STARTING_FORGET_S = 60.0  # a member with nothing to commit stops being asked whether it started


class Policy(Protocol):
    watched: bool  # True: pushed through a lag watch; False: polled at next_check_ms

    def decide(self, rows: list[LagRow], members: int, now_ms: int, pending: int = 0) -> Decision: ...

    def next_check_ms(self, now_ms: int) -> int: ...


@dataclass
class Seen:
    """The group's lag as the last answer gave it: the next watch's starting point."""

    lag: int | None = None
    lag_ms: int | None = None


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
        keep_alive_s: float = 10.0,
        standby: bool = True,
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
        if not 0 < keep_alive_s <= 60 or member_cpus < 0:
            raise ValueError("keep_alive_s must be in (0, 60] and member_cpus >= 0")
        self.target = Target(
            messages=target_lag_messages,
            ms=None if target_lag_seconds is None else int(round(target_lag_seconds * 1000)),
        )
        self.group, self.process_fn = group, process_fn
        self.min_members, self.max_members = min_members, max_members
        self.options = {
            "cooldown_ms": int(cooldown_s * 1000), "scale_up_interval_ms": int(scale_up_interval_s * 1000),
            "stuck_after_ms": int(stuck_after_s * 1000), "limit_to_lagging": limit_to_lagging,
            "keep_alive_ms": int(keep_alive_s * 1000),
        }
        self.standby = standby
        self.member_cpus = member_cpus
        self.member_options = dict(member_options or {})
        self.client = client
        self.policy: Policy | None = policy
        self.request_resources = request_resources
        self.members: list[tuple[str, Any]] = []  # (name, actor), oldest first
        self.spare: tuple[str, Any] | None = None  # the standby, started and not in the group
        self.watcher_id = uuid.uuid4().hex
        self.finished: dict[str, dict[str, Any]] = {}  # stopped members' last status, with their commits
        self.history: list[tuple[float, int, int | None, int | None, str]] = []
        self.notes: list[str] = []
        self.last_decision: Decision | None = None
        self.control_errors: list[dict[str, Any]] = []  # the control thread's own failures
        self.control_steps = 0
        self._starting: dict[str, tuple[Any, float]] = {}  # name -> (actor, added at): no commit seen yet
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
        missing_api = [a for a in ("decide", "next_check_ms", "watched") if not hasattr(self.policy, a)]
        if missing_api:
            raise TypeError(f"policy lacks {', '.join(missing_api)} (see the Policy protocol)")
        self._commit_starts(client, counts)
        self._resize(max(self.min_members, 1), "start")
        self._thread = threading.Thread(target=self._run_control, name=f"pool-{self.group}", daemon=True)
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
        """Each member's status (owned partitions, errors, restarts, commits). A member Ray is
        restarting answers from its record in the GCS (`"restarting": True`, owning nothing)."""
        return self._ask(list(self.members), "status")

    def _ask(self, members: list[tuple[str, Any]], method: str) -> list[Any]:
        """Each member's answer to `method` ("status" or "commits"), or from its record while
        the actor is unavailable (restarting)."""
        refs = [getattr(actor, method).remote() for _, actor in members]
        answers: list[Any] = []
        for (name, _), ref in zip(members, refs, strict=True):
            try:
                answers.append(ray.get(ref, timeout=STOP_TIMEOUT_S))
            except ray.exceptions.RayError:
                kept = self._recorded(name)
                answers.append(kept if method == "status" else kept["commits_made"])
        return answers

    def _recorded(self, name: str) -> dict[str, Any]:
        """A member's status as its record in the GCS has it (actors/pool/ledger.py)."""
        kept = ledger.Ledger(name, ledger.ray_kv()).load()
        return {"name": name, "errors": list(kept.errors), "owned": [], "active": kept.active,
                "error_count": kept.error_count, "commits": len(kept.commits), "restarts": 0,
                "commits_made": list(kept.commits), "incarnation": kept.incarnation,
                "restarting": True, "first_commit_at": None, "activated_at": None,
                "assigned_at": None, "started_at": None}

    def control_status(self) -> dict[str, Any]:
        """The control thread: running or not, its steps, its own failures (the last)."""
        thread = self._thread
        return {
            "running": thread is not None and thread.is_alive(),
            "steps": self.control_steps,
            "errors": len(self.control_errors),
            "last_error": self.control_errors[-1] if self.control_errors else None,
            "pending": sorted(self._starting),
        }

    def errors(self) -> list[dict[str, Any]]:
        """The function's failures the members recorded (each member's last 20; stopped
        members' too) and the control thread's own (member "pool"), oldest first."""
        live = self.status()
        finished = dict(self.finished)  # read after: a member stopped meanwhile is in it
        statuses = [*finished.values(), *(s for s in live if s["name"] not in finished)]
        found = [dict(e, member=s["name"]) for s in statuses for e in s["errors"]]
        found += [dict(e, member="pool") for e in self.control_errors]
        return sorted(found, key=lambda e: e["at"])

    def commits(self) -> list[tuple[str, int, int, int]]:
        """Every range committed by the pool's members, live and stopped: (topic, partition, start, end)."""
        members = list(self.members)
        live = self._ask(members, "commits")
        finished = dict(self.finished)  # read after: a member stopped meanwhile is in it
        kept = [chunk for (name, _), chunk in zip(members, live, strict=True) if name not in finished]
        return [c for chunk in [*(s["commits_made"] for s in finished.values()), *kept] for c in chunk]

    def stop(self) -> None:
        """Stop scaling, then every member (each commits its range in progress and leaves)."""
        self._stop.set()
        if self._thread is not None:
            self._unpark()
            self._thread.join(STOP_TIMEOUT_S)
        self._drop_spare()
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

    def _control_error(self, exc: BaseException, what: str) -> None:
        logger.error("%s: %s: %r", self.group, what, exc, exc_info=exc)
        self.control_errors.append({"at": time.time(), "error": f"{what}: {exc!r}",
                                    "traceback": "".join(traceback.format_exception(exc))})
        del self.control_errors[:-MAX_CONTROL_ERRORS_KEPT]

    def _run_control(self) -> None:
        """The control thread: its end other than by `stop()` is kept and said, never silent."""
        try:
            self._control()
        except BaseException as exc:  # logged with its traceback and kept: visible, not re-raised
            self._control_error(exc, "the control thread stopped; the pool no longer scales")

    def _control(self) -> None:
        policy, client = self.policy, self.client
        assert policy is not None and client is not None
        seen = Seen()
        while not self._stop.is_set():
            try:
                self._step(policy, client, seen)
            except Exception as exc:
                self._control_error(exc, "a scaling step failed; tried again")
                self._stop.wait(RETRY_S)

    def _step(self, policy: Policy, client: Client, seen: Seen) -> None:
        if policy.watched:
            rows = self._watch(client, policy, seen)
        else:
            if self._stop.wait(max(0.0, policy.next_check_ms(_now_ms()) - _now_ms()) / 1000):
                return
            rows = self._rows(client)
        if rows is None or self._stop.is_set():
            return
        pending = self._pending()
        decision = policy.decide(rows, len(self.members), _now_ms(), pending)
        self.last_decision = decision
        self.control_steps += 1
        if decision.members != len(self.members):
            self._resize(decision.members, decision.reason, decision)

    def _pending(self) -> int:
        """The members added that have not committed yet; one found not active (restarted by
        Ray before its activation reached it) is activated again."""
        counted = {name for name, _ in self.members}
        now = time.monotonic()
        self._starting = {n: (a, at) for n, (a, at) in self._starting.items()
                          if n in counted and now - at < STARTING_FORGET_S}
        if not self._starting:
            return 0
        names = list(self._starting)
        refs = [self._starting[n][0].status.remote() for n in names]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=STATUS_TIMEOUT_S)
        for name, ref in zip(names, refs, strict=True):
            if ref not in ready:
                continue  # no answer yet (restarting): still pending
            try:
                status = ray.get(ref)
            except ray.exceptions.RayError:
                continue
            if status["first_commit_at"] is not None or status["commits"]:
                del self._starting[name]
            elif not status["active"]:
                self._starting[name][0].activate.remote()
        return len(self._starting)

    def _watch(self, client: Client, policy: Policy, seen: Seen) -> list[LagRow] | None:
        """Park a lag watch until the leader answers it (module docstring); the rows, or None
        when it was refused or replaced (the pool stops)."""
        now = _now_ms()
        timeout_ms = max(0, min(policy.next_check_ms(now) - now, self.options["keep_alive_ms"]))
        over_messages, over_ms, step = watch_terms(self.target)
        request = LagWatchRequest(self.group, self.watcher_id, seen.lag, seen.lag_ms,
                                  over_messages, over_ms, step, timeout_ms)
        response: LagWatchResponse = client.send(request, timeout_s=timeout_ms / 1000 + client.timeout_s)
        if response.error is not Errors.NONE:
            raise RuntimeError(f"lag watch refused: {response.error.name}")
        if response.reason == "replaced":
            return None
        seen.lag, seen.lag_ms = response.groups[0][1:3] if response.groups else (None, None)
        topics = set(self.topics)
        return [(p[1], p[2], p[3], p[5], p[6]) for p in response.partitions if p[1] in topics]

    def _unpark(self) -> None:
        """Answer the parked watch now (a new one from the same watcher replaces it)."""
        if self.client is None or self.policy is None or not self.policy.watched:
            return
        over_messages, over_ms, step = watch_terms(self.target)
        try:
            self.client.send(LagWatchRequest(self.group, self.watcher_id, None, None, over_messages,
                                             over_ms, step, 0), timeout_s=5.0)
        except Exception as exc:
            logger.debug("%s: unparking the lag watch failed: %r", self.group, exc)

    def _rows(self, client: Client) -> list[LagRow]:
        lags = client.lag([self.group])
        topics = set(self.topics)
        return [
            (p.topic, p.partition, p.committed, p.lag, p.lag_ms)
            for g in lags for p in g.partitions if p.topic in topics
        ]

    def _resize(self, wanted: int, reason: str, decision: Decision | None = None) -> None:
        spare = 1 if self.standby and wanted < self.max_members else 0
        cpus = (wanted + spare) * self.member_cpus  # the standby's too
        if wanted > len(self.members):
            self._request_cpus(cpus)
        while len(self.members) < wanted:
            self._add()
        while len(self.members) > wanted:
            self._remove_newest()
        self._keep_standby()
        if cpus < self._requested_cpus:
            self._request_cpus(cpus)
        lag = decision.lag if decision else None
        lag_ms = decision.lag_ms if decision else None
        self.history.append((time.time(), len(self.members), lag, lag_ms, reason))
        logger.info("%s: %d members (%s; lag %s, %s ms)", self.group, len(self.members), reason, lag, lag_ms)

    def _add(self) -> None:
        if self.spare is not None:
            name, actor = self.spare
            self.spare = None
            actor.activate.remote()
        else:
            name, actor = self._start_member(standby=False)
        self.members.append((name, actor))
        self._starting[name] = (actor, time.monotonic())

    def _start_member(self, standby: bool) -> tuple[str, Any]:
        name = f"{self.group}-{uuid.uuid4().hex[:8]}"
        actor = PoolMember.options(  # type: ignore[attr-defined]
            scheduling_strategy="SPREAD", num_cpus=self.member_cpus
        ).remote(name, self.group, self.topics, self.process_fn, self.member_options, standby=standby)
        return name, actor

    def _keep_standby(self) -> None:
        """A standby while the pool can grow; none at its ceiling."""
        if not self.standby or self._stop.is_set():
            return
        if self.spare is None and len(self.members) < self.max_members:
            self.spare = self._start_member(standby=True)
        elif self.spare is not None and len(self.members) >= self.max_members:
            self._drop_spare()

    def _drop_spare(self) -> None:
        if self.spare is not None:
            name, actor = self.spare
            self.spare = None
            ray.kill(actor, no_restart=True)
            self._drop_record(name)

    def _drop_record(self, name: str) -> None:
        try:
            ledger.drop(name)
        except Exception as exc:  # the GCS unreachable: the record stays, said
            self._note(f"the record of member {name} was not dropped: {exc!r}")

    def _remove_newest(self) -> None:
        """Stop the newest member; it stays in `members` until its final status is in
        `finished`, so `errors()` and `commits()` always see it in one or the other."""
        name, actor = self.members[-1]
        try:
            self.finished[name] = ray.get(actor.stop.remote(STOP_TIMEOUT_S), timeout=STOP_TIMEOUT_S + 5)
        except Exception as exc:
            self._note(f"member {name} did not stop cleanly: {exc!r}")
            try:  # what it recorded, from its record in the GCS
                self.finished[name] = self._recorded(name)
            except Exception as exc2:
                self._note(f"the record of member {name} could not be read: {exc2!r}")
        self.members.pop()
        self._starting.pop(name, None)
        ray.kill(actor, no_restart=True)
        if name in self.finished:  # kept there: the member's record in the GCS can go
            self._drop_record(name)

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


def _now_ms() -> int:
    return int(time.time() * 1000)
