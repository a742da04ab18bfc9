"""The client's fanned-out admin calls across a repartition (actors/client/fanout.py), without
a cluster: real shards behind fake leaders and a fake controller (tests/actors/fanout_support.py),
and a repartition 2 -> 4 -> 2 that takes one step each time a leader answers, so the calls meet
every stage of it (a plan published, a source frozen, its groups admitted, switched, a shrink's
partitions retired). Every answer must be complete: each group exactly once, from its owner."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import actors.client.client
from actors.client.client import Client
from actors.client.retry import CoordinatorUnavailableError
from coordinator import Errors
from coordinator.handoff import moving
from coordinator.routing import Routing, java_string_hash

from tests.actors.fanout_support import GROUPS, Service, client_of
from tests.ray.test_retry import FakeRay


@pytest.fixture(autouse=True)
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actors.client.client, "ray", FakeRay)


def call(client: Client, name: str, asynchronous: bool, *args: Any) -> Any:
    if asynchronous:
        return asyncio.run(getattr(client, f"{name}_async")(*args))
    return getattr(client, name)(*args)


# ------------------------------------------------------------ the routing's claims


@pytest.mark.parametrize(
    "routing",
    [Routing(4), Routing(4, 2, frozenset({1}), 1), Routing(2, 4, frozenset({3}), 2),
     Routing(8, 2, frozenset({0, 1}), 3), Routing(3, 6, frozenset(), 1), Routing(6, 3, frozenset({0, 2}), 4)],
)
def test_a_routings_claim_is_the_groups_it_sends_to_each_partition(routing: Routing) -> None:
    names = [f"group-{i}" for i in range(3000)]
    for partition in range(routing.partitions + 1):
        modulus, residues = routing.claim(partition)
        sent = {g for g in names if routing.partition_for(g) == partition}
        claimed = {g for g in names if (java_string_hash(g) & 0x7FFFFFFF) % modulus in residues}
        assert sent == claimed, (routing, partition)


def test_routings_that_send_a_partition_the_same_groups_agree_on_it() -> None:
    done = Routing(2, version=1)
    planned = Routing(4, 2, frozenset(), 2)
    assert done.sends_same(planned, 0) and done.sends_same(planned, 1), "nothing moved yet"
    assert planned.sends_same(Routing(9), 2) is False, "a new partition owns nothing yet"
    half = planned.with_switched(0)
    assert half.sends_same(planned, 1) and not half.sends_same(planned, 0)
    assert not half.sends_same(planned, 2) and half.sends_same(planned, 3)
    assert half.with_switched(1).sends_same(Routing(4, version=2), 3)


# ------------------------------------------------------------ the fast path


@pytest.mark.parametrize("asynchronous", [False, True])
def test_without_a_repartition_each_partition_is_asked_once(asynchronous: bool) -> None:
    service = Service(2)
    client = client_of(service)
    assert [g.group_id for g in call(client, "list_groups", asynchronous)] == sorted(GROUPS)
    assert len(call(client, "lag", asynchronous)) == len(GROUPS)
    assert len(call(client, "lag", asynchronous, GROUPS)) == len(GROUPS)
    assert [d.group_id for d in call(client, "describe_groups", asynchronous, GROUPS)] == GROUPS
    assert len(service.calls) == 8, "one request per partition and call"
    assert (service.routing_call.calls, service.routing_after.calls) == (1, 0), "no refresh"


# ------------------------------------------------------------ across a repartition

CALLS = ["list_groups", "lag_all", "lag", "describe_groups", "describe_consumer_groups"]


def answered_groups(client: Client, name: str, asynchronous: bool) -> list[str]:
    if name == "list_groups":
        return [g.group_id for g in call(client, name, asynchronous)]
    if name == "lag_all":
        lagged = call(client, "lag", asynchronous)
        assert all(len(g.partitions) == 2 for g in lagged), "each group whole"
        return [g.group_id for g in lagged]
    if name == "lag":
        return [g.group_id for g in call(client, name, asynchronous, GROUPS)]
    described = call(client, name, asynchronous, GROUPS)
    expected = Errors.NONE if name == "describe_groups" else Errors.GROUP_ID_NOT_FOUND
    assert {d.error for d in described} == {expected}, "every group answered by its owner"
    return [d.group_id for d in described]


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("delay", range(0, 18, 3))
def test_fanned_out_calls_are_complete_across_a_grow_and_a_shrink(
    name: str, asynchronous: bool, delay: int
) -> None:
    service = Service(2)
    client = client_of(service)
    service.run(4, 2, delay=delay)
    for _ in range(12):  # calls until the repartitions end, each meeting another stage
        answered = answered_groups(client, name, asynchronous)
        assert sorted(answered) == sorted(GROUPS), "every group, each once"
    service.finish()
    assert sorted(answered_groups(client, name, asynchronous)) == sorted(GROUPS)
    assert len(service.shards) == 2


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("delay", [0, 2, 7, 12])
def test_groups_are_deleted_by_their_owner_across_a_repartition(asynchronous: bool, delay: int) -> None:
    service = Service(2)
    client = client_of(service)
    service.run(4, 2, delay=delay)
    results = call(client, "delete_groups", asynchronous, GROUPS)
    assert results == dict.fromkeys(GROUPS, Errors.NONE)
    service.finish()
    assert call(client, "list_groups", asynchronous) == []


def test_a_group_frozen_past_the_deadline_ends_the_call_with_coordinator_unavailable() -> None:
    service = Service(2)
    client = client_of(service, timeout_s=0.2)
    service.run(4)
    service.step()  # published
    service.step()  # partition 0's moving groups frozen, never admitted
    service.script = iter(())
    frozen = moving(service.shards[0], service.shards[0].owner)  # type: ignore[arg-type]
    with pytest.raises(CoordinatorUnavailableError, match="DescribeGroupsRequest"):
        client.describe_groups(frozen[:1])
    with pytest.raises(CoordinatorUnavailableError, match="ListGroupsRequest to every partition"):
        client.list_groups()
