"""Admin calls that go to many offsets partitions at once, correct across a repartition.

A repartition (actors/controller/repartition.py) moves groups between partitions while
a call is under way, and a shrink retires partitions: a call split by the routing it
started with would miss groups, list one twice, or address a partition that is gone.
So a fanned-out call is a plan of rounds; the client (`Client._fan_out`) sends each
round's requests, one attempt per partition, then refreshes its routing and sends the
next round, until the plan is complete or the call's deadline passes
(CoordinatorUnavailableError).

- `ByGroup` (DescribeGroups, ConsumerGroupDescribe, DeleteGroups, live lag of named
  groups): the ids are split by the routing of each round. A group answered by its owner
  is kept; a group its partition does not own (NOT_COORDINATOR, or for lag, not owned under
  the routing the answer names), and every group of a partition that did not answer
  (unreachable, retired, a whole-request coordinator error) is split again and asked of its
  owner. The owner alone answers (a handoff never has two), so an answer is complete and
  never lists a group twice; during a handoff the group is answered once its new owner
  serves it (the refresh after a NOT_COORDINATOR waits for that, `routing_after`).
- `EveryPartition` (ListGroups, live lag of every group): each partition answers the groups
  it owns and names the routing it answered by. The answers are one complete list when
  every partition of the newest routing among them and the client's answered, each by a
  routing that sends it the same groups as the newest (`Routing.sends_same`); any other is
  asked again, and an answer of a partition past the newest count (a shrink retired it) is
  dropped. A group moving is listed by neither side for the length of its handoff:
  the source's routing says it left, the target's not yet that it came, so the target is
  asked again until it owns it.

Without a repartition the first round is complete: the requests are those of one
request per partition, and the check compares each answer's routing with the client's.

Who drives a plan: the client (`Client.fan_out_async`, also the Kafka gateway's way to
the partitions), or `one_round` for a caller that reaches one partition only (a leader's
Kafka listener). Either may send each request `through` a check (the gateway's
authorizer, gateway/authorize.py) that answers a request, or part of it, without
sending it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any, Protocol

from actors.client.retry import CoordinatorUnavailableError
from coordinator.errors import RETRIABLE_COORDINATOR_ERRORS, Errors
from coordinator.lag_query import LagResponse
from coordinator.routing import Routing


class Router(Protocol):
    """What a plan needs of the client."""

    @property
    def num_partitions(self) -> int: ...

    @property
    def routing(self) -> Routing: ...

    def partition_for(self, group_id: str) -> int: ...


# One attempt of a request (to the partition the plan chose), and a check around it:
# `through(request, attempt)` sends what it allows through `attempt` and answers the rest.
Attempt = Callable[[Any], Awaitable[Any]]
Through = Callable[[Any, Attempt], Awaitable[Any]]


class ByGroup:
    """Requests naming groups, each asked of the partition that owns it.

    `answered(response, partition, asked)`: the asked groups the response answers (those
    its partition owns; the others are asked again) and what of it to keep."""

    def __init__(
        self,
        kind: Callable[[tuple[str, ...]], Any],
        group_ids: Iterable[str],
        answered: Callable[[Any, int, tuple[str, ...]], tuple[Collection[str], Any]],
    ) -> None:
        self.kind, self.answered = kind, answered
        self.order = list(dict.fromkeys(group_ids))
        self.done_ids: set[str] = set()
        self.kept: list[Any] = []
        self.asked: dict[int, tuple[str, ...]] = {}

    def requests(self, client: Router) -> dict[int, Any]:
        grouped: dict[int, list[str]] = {}
        done = self.done_ids
        for group_id in self.order:
            if group_id not in done:
                grouped.setdefault(client.partition_for(group_id), []).append(group_id)
        self.asked = {p: tuple(ids) for p, ids in grouped.items()}
        return {p: self.kind(ids) for p, ids in self.asked.items()}

    def take(self, partition: int, response: Any) -> bool:
        """Keep what `partition` answered; False when some of its groups must be asked again."""
        asked = self.asked[partition]
        ids, kept = self.answered(response, partition, asked)
        self.done_ids.update(ids)
        self.kept.append(kept)
        return len(ids) == len(asked)

    def done(self, client: Router) -> bool:
        return len(self.done_ids) == len(self.order)

    def result(self) -> list[Any]:
        """What was kept of each answer, in the order they came."""
        return self.kept

    def in_order(self, items: Iterable[tuple[str, Any]]) -> list[Any]:
        """Per group id, in the order the ids were given (each id once), its item of `items`."""
        by_id = dict(items)
        return [by_id[group_id] for group_id in self.order]


class EveryPartition:
    """One request to every partition; each answer (with `error` and `routing`) lists what
    its partition owns by that routing.

    `lists`: which partitions this caller lists (default every one): a Kafka gateway beside
    the leaders' listeners lists the partitions without one, a listener its own (each
    Kafka broker lists the groups it coordinates). `error`: the last error a partition
    answered in place of its list."""

    def __init__(self, request: Any, lists: Callable[[int], bool] | None = None) -> None:
        self.request = request
        self.lists = lists or _every
        self.answers: dict[int, Any] = {}
        self.wanted = -1
        self.error = Errors.NONE

    def requests(self, client: Router) -> dict[int, Any]:
        count = client.num_partitions if self.wanted < 0 else min(self.wanted, client.num_partitions)
        return {p: self.request for p in range(count) if p not in self.answers and self.lists(p)}

    def take(self, partition: int, response: Any) -> bool:
        if response.error != Errors.NONE:
            self.error = response.error
            return False
        self.answers[partition] = response
        return True

    def done(self, client: Router) -> bool:
        """Whether the answers are complete; drops those the newest routing overrides."""
        newest = client.routing
        for response in self.answers.values():
            newest = newest.merged(response.routing)
        self.wanted = newest.partitions
        for partition, response in list(self.answers.items()):
            routing = response.routing
            overridden = routing is not None and not routing.sends_same(newest, partition)
            if partition >= self.wanted or overridden:
                del self.answers[partition]
        return len(self.answers) == sum(1 for p in range(self.wanted) if self.lists(p))

    def result(self) -> list[Any]:
        return [self.answers[p] for p in sorted(self.answers)]


def _every(partition: int) -> bool:
    return True


Plan = ByGroup | EveryPartition


async def one_round(
    plan: Plan, router: Router, send: Callable[[Any, int], Awaitable[Any]], through: Through | None = None
) -> list[Any]:
    """One round of `plan`, each request through `send(request, partition)`: for a caller
    that reaches one partition (a leader's Kafka listener answers any other's groups
    NOT_COORDINATOR, and the Kafka client finds their coordinator). The plan's result
    when that round completes it, else CoordinatorUnavailableError."""
    for partition, request in plan.requests(router).items():

        def attempt(sent: Any, partition: int = partition) -> Awaitable[Any]:
            return send(sent, partition)

        plan.take(partition, await (attempt(request) if through is None else through(request, attempt)))
    if not plan.done(router):
        raise CoordinatorUnavailableError("not every partition asked answered in one round")
    return plan.result()


# ------------------------------------------------ what each request's answer holds, by group


def described(response: Any, partition: int, asked: tuple[str, ...]) -> tuple[list[str], list[Any]]:
    """DescribeGroups or ConsumerGroupDescribe: each group its owner described."""
    wanted = set(asked)
    retriable = RETRIABLE_COORDINATOR_ERRORS
    kept = [g for g in response.groups if g.group_id in wanted and g.error not in retriable]
    return [g.group_id for g in kept], kept


def deleted(response: Any, partition: int, asked: tuple[str, ...]) -> tuple[list[str], list[Any]]:
    """DeleteGroups: each group's error, from its owner."""
    wanted = set(asked)
    kept = [(g, e) for g, e in response.results if g in wanted and e not in RETRIABLE_COORDINATOR_ERRORS]
    return [g for g, _ in kept], kept


def lagged(response: LagResponse, partition: int, asked: tuple[str, ...]) -> tuple[list[str], LagResponse]:
    """LagRequest of named groups: the groups the partition owns by the routing it answered
    by (their rows, if any, are the response's: it leaves out the groups it does not own)."""
    if response.error != Errors.NONE:
        return [], LagResponse(Errors.NONE)
    routing = response.routing
    if routing is None:
        return list(asked), response
    return [g for g in asked if routing.partition_for(g) == partition], response
