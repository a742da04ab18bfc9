"""A leader's listener whose served code cannot load (gateway.direct.listener): the clients
that connected meanwhile are closed, the port too, and `describe` says why."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from gateway.direct import listener as direct

from tests.gateway.direct_support import free_port_range


def test_a_listener_that_cannot_load_closes_its_clients_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise ImportError("no kio here")

    monkeypatch.setattr(direct, "_import_served", broken)
    low, high = free_port_range(2)
    host = SimpleNamespace(partition=3, epoch=1,
                           settings=SimpleNamespace(kafka_listener=SimpleNamespace(ports=(low, high))))

    async def scenario() -> tuple[bytes, dict[str, object], bool]:
        listener = direct.DirectListener(host, direct.LOOPBACK, lazy=True)
        await listener.start()
        assert listener.describe()["connections"] == 0
        reader, writer = await asyncio.open_connection(direct.LOOPBACK, listener.port)
        writer.write(b"\x00\x00\x00\x0a")
        try:
            answer = await asyncio.wait_for(reader.read(), 30)  # closed without an answer
        except ConnectionResetError:  # closed with the frame unread
            answer = b""
        writer.close()
        try:
            await asyncio.open_connection(direct.LOOPBACK, listener.port)
            refused = False
        except OSError:
            refused = True
        await listener.close()
        return answer, listener.describe(), refused

    answer, described, refused = asyncio.run(scenario())
    assert answer == b""
    assert "no kio here" in str(described["error"])
    assert refused, "the port is closed"


class _Transport:
    def __init__(self) -> None:
        self.protocol: object = None
        self.paused = self.closed = False

    def set_protocol(self, protocol: object) -> None:
        self.protocol = protocol

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True


class _Served:
    def __init__(self) -> None:
        self.made: list[object] = []

    def protocol(self) -> asyncio.Protocol:
        made = self.made

        class Served(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                made.append(transport)

        return Served()


def test_a_connection_accepted_just_before_the_load_ended_is_served_not_left_waiting() -> None:
    # The loop makes a connection's protocol at accept and calls its connection_made later:
    # the served half may be loaded, and the waiting connections handed over, in between.
    listener = SimpleNamespace(failed=False, served=_Served(), waiting=[], load_soon=lambda: None)
    waiting = direct._Waiting(listener)  # type: ignore[arg-type]
    transport = _Transport()
    waiting.connection_made(transport)  # type: ignore[arg-type]
    assert listener.waiting == [] and not transport.paused, "not left waiting for a load that is over"
    assert listener.served.made == [transport] and transport.protocol is not waiting
