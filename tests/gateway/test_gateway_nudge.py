"""The topic registry nudges the gateways attached to the service after an ACL change, as it
nudges the partition leaders; the 0.5 s poll only bounds a lost nudge (actors/core/attached.py,
gateway.server.Gateway.acls_changed; no Ray)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from actors.client.topic_registry import TopicRegistry
from actors.core import attached
from actors.core.settings import ServiceSettings
from coordinator.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from gateway.security import SecurityConfig
from gateway.server import Gateway

from tests.actors.service_store_support import ShardStore


class _Remote:
    def __init__(self, call: Any) -> None:
        self.call = call
        self.calls = 0

    def remote(self, *args: Any) -> Any:
        self.calls += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(self.call(*args))
        return future


def test_a_nudge_makes_a_gateway_read_the_acls_at_once(tmp_path: os.PathLike[str]) -> None:
    reg = TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), store=ShardStore())
    fake = type("Registry", (), {})()
    fake.acls_if_changed = _Remote(reg.acls_if_changed)
    gateway = Gateway(object(), security=SecurityConfig(authorizer=True), direct=False)
    guard = gateway.core.guard
    assert guard is not None
    guard.watch.lookup = lambda: fake
    guard.watch.interval_s = 3600.0  # the poll would wait an hour
    binding = AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:a", "*", Operation.READ,
                         Permission.ALLOW)

    async def run() -> None:
        try:
            first = await guard.watch.ready(5)
            assert first is not None
            assert not first.authorize("User:a", "h", Operation.READ, ResourceType.GROUP, "g")
            reg.create_acls([binding])
            gateway.acls_changed()
            for _ in range(200):  # bounded: 2 s, far below the hour
                authorizer = guard.watch.authorizer
                if authorizer is not None and authorizer.authorize("User:a", "h", Operation.READ,
                                                                   ResourceType.GROUP, "g"):
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("the nudge did not make the gateway read the ACLs")
        finally:
            guard.close()

    asyncio.run(run())
    Gateway(object(), direct=False).acls_changed()  # no authorizer: nothing to read, no error


def test_the_registry_nudges_every_attached_actor_that_watches_acls(monkeypatch: pytest.MonkeyPatch) -> None:
    class Watching:
        def __init__(self) -> None:
            self.acls_changed = _Counted()

    class Other:  # attached, but watches no ACLs
        pass

    actors = {"raygroups-gateway-a": Watching(), "raygroups-gateway-b": Watching(), "other": Other()}

    def get_actor(name: str, namespace: str) -> Any:
        if name not in actors:
            raise ValueError(name)
        return actors[name]

    monkeypatch.setattr(attached, "attached", lambda namespace: [*actors, "gone"])
    monkeypatch.setattr(attached.ray, "get_actor", get_actor)
    attached.nudge_attached("ns")
    assert [actors[n].acls_changed.calls for n in ("raygroups-gateway-a", "raygroups-gateway-b")] == [1, 1]


class _Counted:
    def __init__(self) -> None:
        self.calls = 0

    def remote(self) -> None:
        self.calls += 1
