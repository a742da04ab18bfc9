"""Fake offsets partitions for the fanned-out admin calls across a repartition, without a
cluster: real shards behind fake leaders and a fake controller, and a repartition script
(2 -> 4 -> 2, say) that takes one step each time a leader answers, so a call meets every
stage of it (a plan published, a source frozen, its groups admitted, switched, a shrink's
partitions retired). Used by the client's tests (tests/actors/test_fanout.py) and the
gateway's (tests/gateway/test_admin_fanout.py); patch `actors.client.client.ray` with
`FakeRay` (tests/ray/test_retry.py) to use `client_of`."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from ray.exceptions import RayActorError

from actors.client.client import Client
from actors.client.retry import Backoff
from actors.core.wire import dumps_response
from coordinator import CoordinatorConfig, Shard
from coordinator.handoff import group_records, moving, release_moved
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from coordinator.routing import Routing, partition_for

from tests.ray.test_retry import Ref

QUICK = Backoff(initial_s=0.001, max_s=0.005)
GROUPS = [f"g{i}" for i in range(40)]
NOW = 1_000


class Leader:
    """A partition's leader: its shard answers; a retired one is gone (RayActorError)."""

    def __init__(self, service: Service, partition: int) -> None:
        self.service, self.partition, self.gone = service, partition, False

    @property
    def handle_wire(self) -> Leader:
        return self

    def remote(self, request: Any) -> Ref:
        service = self.service
        service.calls.append((self.partition, type(request).__name__))
        if self.gone:
            return Ref(RayActorError())
        result = service.shards[self.partition].handle(request, NOW, "t")
        (response,) = [r for token, r in result.responses if token == "t"]
        service.step()  # the repartition moves on after each answer
        return Ref(dumps_response(response))


class Method:
    def __init__(self, answer: Callable[..., Any]) -> None:
        self.answer = answer
        self.calls = 0

    def remote(self, *args: Any) -> Ref:
        self.calls += 1
        return Ref(self.answer(*args))


class Service:
    """Shards, their leaders, the controller's routing, and a repartition script."""

    def __init__(self, count: int = 2) -> None:
        self.config = CoordinatorConfig()
        self.shards: list[Shard] = []
        self.leaders: list[Leader] = []
        self.calls: list[tuple[int, str]] = []
        self.add(count)
        self.count, self.routing = count, Routing(count)
        for group in GROUPS:
            offsets = (OffsetCommitPartition("t", 0, 5), OffsetCommitPartition("t", 1, 7))
            commit = OffsetCommitRequest(group, offsets)
            assert self.shards[partition_for(group, count)].handle(commit, NOW, "c").responses
        self.script: Iterator[None] = iter(())
        self.routing_call = Method(lambda *_: self.table())
        self.routing_after = Method(lambda *_: self.table())

    def add(self, count: int) -> None:
        for p in range(len(self.shards), count):
            shard = Shard(self.config, partition=p)
            shard.on_loaded(NOW)
            self.shards.append(shard)
            self.leaders.append(Leader(self, p))

    def table(self) -> tuple[int, list[Any], list[int], Routing]:
        live = self.leaders[: self.count]
        return self.count, live, [1] * len(live), self.routing

    # ------------------------------------------------------------ the repartition

    def step(self) -> None:
        next(self.script, None)

    def run(self, *counts: int, delay: int = 0) -> None:
        """Repartition to each count in turn, one step per answer, after `delay` answers."""
        self.script = itertools.chain(itertools.repeat(None, delay), *(self._to(c) for c in counts))

    def finish(self) -> None:
        for _ in self.script:
            pass

    def _push(self, partitions: Any) -> None:
        for p in partitions:
            self.shards[p].owner = self.routing

    def _to(self, count: int) -> Iterator[None]:
        previous, version = self.count, self.routing.version + 1
        self.add(count)
        self.count = max(count, previous)
        self.routing = Routing(count, previous, frozenset(), version)
        self._push(range(self.count))
        yield
        sources = range(previous) if count > previous else range(count, previous)
        for source in sources:
            shard = self.shards[source]
            frozen = self.routing.with_switched(source)
            shard.begin_handoff(frozen, NOW)
            yield
            by_target: dict[int, list[Any]] = {}
            for group in moving(shard, frozen):
                by_target.setdefault(frozen.partition_for(group), []).extend(group_records(shard, group))
            for target, records in by_target.items():
                self.shards[target].admit_groups(records, NOW)
            yield
            release_moved(shard)
            self.routing = frozen
            self._push([source, *by_target])
            yield
        for p in range(count, previous):  # a shrink retires the emptied partitions
            self.leaders[p].gone = True
        self.count, self.routing = count, Routing(count, version=version)
        del self.shards[count:], self.leaders[count:]
        self._push(range(count))
        yield


def client_of(service: Service, timeout_s: float = 5.0) -> Client:
    methods = {"routing": service.routing_call, "routing_after": service.routing_after}
    controller = type("Controller", (), methods)
    return Client(controller, timeout_s=timeout_s, backoff=QUICK, coalesce=False)
