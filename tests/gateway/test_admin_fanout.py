"""The gateway's admin fan-out across a repartition (gateway/handlers/admin.py): ListGroups,
DescribeGroups, DeleteGroups and ConsumerGroupDescribe through `apis.handle`, driven by the
service's own `Client` over fake partitions (tests/actors/fanout_support.py) that step a
2 -> 4 -> 2 repartition, one step per answer. Every answer is complete (each group once,
from its owner), a partition a shrink retired is asked once and never waited for, and the
authorizer still shows a principal only the groups it may describe."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

import actors.client.client
from actors.client.client import Client
from actors.core.acl_watch import AclWatch
from actors.core.wire import dumps_response
from coordinator import Errors
from coordinator.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from gateway.authorize import AclGuard, AuthorizedClient
from gateway.handlers.calls import failed

from tests.actors.fanout_support import GROUPS, Leader, Service, client_of
from tests.gateway.fake_client import call
from tests.gateway.kafka_support import kio_request
from tests.ray.test_retry import FakeRay, Ref


@pytest.fixture(autouse=True)
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actors.client.client, "ray", FakeRay)


def listed(client: Any) -> list[str]:
    response = call(client, kio_request(16, 5, states_filter=[], types_filter=[]))
    assert response.error_code == ErrorCode.none
    return [g.group_id for g in response.groups]


def described(client: Any, names: list[str] = GROUPS) -> dict[str, ErrorCode]:
    response = call(client, kio_request(15, 5, groups=names, include_authorized_operations=False))
    assert [g.group_id for g in response.groups] == names, "in the order asked"
    return {g.group_id: g.error_code for g in response.groups}


def consumer_described(client: Any) -> dict[str, ErrorCode]:
    response = call(client, kio_request(69, 0, group_ids=GROUPS, include_authorized_operations=False))
    assert [g.group_id for g in response.groups] == GROUPS, "in the order asked"
    return {g.group_id: g.error_code for g in response.groups}


def answered(client: Client, api: str) -> list[str]:
    """The groups `api` answered through the gateway, each checked as answered by its owner."""
    if api == "ListGroups":
        return listed(client)
    if api == "DescribeGroups":
        errors = described(client)
        assert set(errors.values()) == {ErrorCode.none}, "every group described by its owner"
    else:
        errors = consumer_described(client)
        # Offsets-only groups are classic: the owner answers "not a consumer group".
        assert set(errors.values()) == {ErrorCode.group_id_not_found}, "every group answered by its owner"
    return list(errors)


@pytest.mark.parametrize("api", ["ListGroups", "DescribeGroups", "ConsumerGroupDescribe"])
@pytest.mark.parametrize("delay", range(0, 18, 3))
def test_the_gateways_admin_answers_are_complete_across_a_grow_and_a_shrink(api: str, delay: int) -> None:
    service = Service(2)
    client = client_of(service)
    service.run(4, 2, delay=delay)
    for _ in range(12):  # requests until the repartitions end, each meeting another stage
        assert sorted(answered(client, api)) == sorted(GROUPS), "every group, each once"
    service.finish()
    assert sorted(answered(client, api)) == sorted(GROUPS)
    assert len(service.shards) == 2


@pytest.mark.parametrize("delay", [0, 2, 7, 12])
def test_the_gateway_deletes_each_group_at_its_owner_across_a_repartition(delay: int) -> None:
    service = Service(2)
    client = client_of(service)
    service.run(4, 2, delay=delay)
    response = call(client, kio_request(42, 2, groups_names=GROUPS))
    assert [(r.group_id, r.error_code) for r in response.results] == [(g, ErrorCode.none) for g in GROUPS]
    service.finish()
    assert listed(client) == []


class Unloaded(Leader):
    """A retired partition's leader still running, unloaded: NOT_COORDINATOR for everything."""

    def remote(self, request: Any) -> Ref:
        self.service.calls.append((self.partition, type(request).__name__))
        return Ref(dumps_response(failed(request, Errors.NOT_COORDINATOR)))


@pytest.mark.parametrize("retired", ["gone", "unloaded"])
def test_after_a_shrink_a_gateway_with_the_old_routing_asks_each_retired_partition_once(retired: str) -> None:
    service = Service(4)
    if retired == "unloaded":
        service.leaders[2:] = [Unloaded(service, p) for p in (2, 3)]
    client = client_of(service, timeout_s=5.0)  # the old code waited this out: COORDINATOR_NOT_AVAILABLE
    service.run(2)
    service.finish()  # 4 -> 2: partitions 2 and 3 retired; the client still routes by 4
    assert client.num_partitions == 4
    assert sorted(listed(client)) == sorted(GROUPS)
    asked = [p for p, _ in service.calls]
    assert sorted(asked) == [0, 1, 2, 3], "one round: the answers' routing says 2 and 3 are gone"
    assert set(described(client).values()) == {ErrorCode.none}
    retried = [p for p, _ in service.calls[len(asked):]]
    assert (retried.count(2), retried.count(3)) == (1, 1), "asked by the old routing once, then never"
    assert client.num_partitions == 2, "refreshed after a retired partition's failure"
    service.calls.clear()
    assert sorted(listed(client)) == sorted(GROUPS)
    assert sorted(p for p, _ in service.calls) == [0, 1]


class Registry:
    """The topic registry as the ACL watch reads it: the view never changes."""

    def __init__(self, acls: tuple[AclBinding, ...]) -> None:
        self.view = ("acls:1", acls)
        self.acls_if_changed = self

    async def remote(self, token: str | None) -> Any:
        return None if token == self.view[0] else self.view


def test_the_authorizer_still_shows_only_the_groups_the_principal_may_describe_across_a_repartition() -> None:
    may = AclBinding(ResourceType.GROUP, "g1", PatternType.PREFIXED, "User:alice", "*", Operation.DESCRIBE,
                     Permission.ALLOW)
    registry = Registry((may,))
    watch = AclWatch(lambda: registry)
    watch.apply(registry.view)
    service = Service(2)
    alice = AuthorizedClient(client_of(service), AclGuard(watch), "User:alice", "10.0.0.9")
    visible = sorted(g for g in GROUPS if g.startswith("g1"))
    service.run(4, 2)
    for _ in range(12):
        assert sorted(listed(alice)) == visible, "each group alice may describe, once"
        errors = described(alice)
        assert {g for g, e in errors.items() if e == ErrorCode.none} == set(visible)
        assert {e for g, e in errors.items() if g not in visible} == {ErrorCode.group_authorization_failed}
    service.finish()
    assert sorted(listed(alice)) == visible
    watch.close()
