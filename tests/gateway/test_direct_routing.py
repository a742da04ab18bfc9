"""A serving gateway keeps naming itself to the controller (gateway.direct.routing), so the
controller lists it without Metadata traffic and forgets it once it stops; a failed
naming (the controller restarting) is tried again, the task never ends on it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.direct import routing
from gateway.direct.routing import LeaderRouting

from tests.actors.support import until


class NamingController:
    """The controller's `kafka_brokers`, failing its first call."""

    def __init__(self) -> None:
        self.named: list[Any] = []
        self.calls = 0

        async def kafka_brokers(own: Any) -> list[Any]:
            self.calls += 1
            if self.calls == 1:
                raise ConnectionError("the controller is restarting")
            self.named.append(own)
            return [own]

        self.kafka_brokers = SimpleNamespace(remote=kafka_brokers)


def test_a_gateway_names_itself_again_and_again_and_survives_a_failed_naming(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(routing, "REGISTER_EVERY_S", 0.01)
    controller = NamingController()
    gateway = LeaderRouting(lambda: SimpleNamespace(controller=controller), register=True)
    me = SimpleNamespace(node_id=7, host="10.0.0.7", port=9092)

    async def scenario() -> None:
        task = asyncio.create_task(gateway.keep_registered(lambda: me))
        await until(lambda: len(controller.named) >= 3, "three namings")
        assert not task.done()
        task.cancel()

    asyncio.run(scenario())
    # Each naming is this gateway's address (and its Ray node, where Ray runs in this process).
    assert {named[:3] for named in controller.named} == {(7, "10.0.0.7", 9092)}
