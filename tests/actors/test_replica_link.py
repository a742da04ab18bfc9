"""The replication link (actors/partition/link.py) on real sockets, without Ray:
the follower's listener takes only authenticated, well-formed requests and
closes any other connection alone; the leader's side reconnects after a
failure and goes through the Ray methods where the link cannot be reached."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgpack
import pytest

import actors.partition.link as link_module
from actors.partition.follower import PushAnswer
from actors.partition.link import FollowerLink, LinkError, LinkServer, encode_request, frame, parse_request
from coordinator.errors import Errors

from tests.actors.replication_support import FakeHandle
from tests.actors.support import run

HOST = "127.0.0.1"
ANSWER = PushAnswer(Errors.NONE, 3, 10, 2, 8)
REPLICATE = ("replicate", 3, "node-a", 4, b"batches", 2)


class Follower:
    """A follower actor's link side: records the requests it was handed."""

    def __init__(self, fail: bool = False) -> None:
        self.requests: list[tuple[str, tuple[Any, ...]]] = []
        self.fail = fail
        self.server = LinkServer(self.dispatch, max_frame_bytes=1024, idle_timeout_s=30.0)

    async def dispatch(self, kind: str, args: tuple[Any, ...]) -> PushAnswer:
        self.requests.append((kind, args))
        if self.fail:
            raise OSError("the follower's disk failed")
        return ANSWER

    # What the leader reaches through the follower's Ray handle.
    async def replication_endpoint(self) -> tuple[str, int, bytes]:
        return await self.server.endpoint(HOST)

    async def replicate(self, *args: Any) -> PushAnswer:
        self.requests.append(("ray:replicate", args))
        return ANSWER


async def connect(follower: Follower, token: bytes | None = None) -> tuple[Any, Any]:
    host, port, real_token = await follower.replication_endpoint()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(frame(real_token if token is None else token))
    return reader, writer


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    return await asyncio.wait_for(reader.read(), 5.0) == b""


async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes) -> PushAnswer:
    writer.write(data)
    (length,) = struct.unpack(">I", await reader.readexactly(4))
    return link_module.parse_answer(await reader.readexactly(length))


def test_an_authenticated_leader_gets_each_request_answered_in_order() -> None:
    async def scenario() -> None:
        follower = Follower()
        reader, writer = await connect(follower)
        assert await ask(reader, writer, encode_request(*REPLICATE)) == ANSWER
        truncate = ("truncate", 3, "node-a", [2, 7], 9, 2)
        assert await ask(reader, writer, encode_request(*truncate)) == ANSWER
        assert follower.requests == [
            ("replicate", (3, "node-a", 4, b"batches", 2)),
            ("truncate", (3, "node-a", (2, 7), 9, 2)),
        ]
        writer.close()
        follower.server.close()

    run(scenario())


@pytest.mark.parametrize(
    "request_",
    [
        ["replicate", 3, "node-a", 4, "not bytes", 2],
        ["replicate", True, "node-a", 4, b"", 2],  # a bool is not an epoch
        ["replicate", -1, "node-a", 4, b"", 2],
        ["replicate", 3, "node-a", -5, b"", 2],
        ["replicate", 3, "", 4, b"", 2],
        ["replicate", 3, "x" * 2000, 4, b"", 2],
        ["replicate", 3, "node-a", 4, b""],
        ["truncate", 3, "node-a", [2], 9, 2],
        ["truncate", 3, "node-a", [2, "x"], 9, 2],
        ["append", 3, "node-a", 4, b"", 2],
        {"replicate": 3},
    ],
)
def test_a_malformed_request_is_refused(request_: Any) -> None:
    with pytest.raises(LinkError):
        parse_request(msgpack.packb(request_, use_bin_type=True))


@pytest.mark.parametrize(
    "first, then",
    [
        (b"x" * link_module.TOKEN_BYTES, encode_request(*REPLICATE)),  # a wrong token
        (None, struct.pack(">I", 10_000_000)),  # a frame past the limit
        (None, frame(b"\xc1 not msgpack")),
        (None, encode_request("append", 3, "node-a", 4, b"", 2)),
    ],
    ids=["wrong-token", "oversized", "not-msgpack", "unknown-request"],
)
def test_bad_input_closes_that_connection_alone(first: bytes | None, then: bytes) -> None:
    async def scenario() -> None:
        follower = Follower()
        good_reader, good_writer = await connect(follower)
        bad_reader, bad_writer = await connect(follower, first)
        bad_writer.write(then)
        assert await closed_by_peer(bad_reader)
        assert follower.requests == [] and follower.server.rejected == 1
        # The authenticated connection opened before goes on.
        assert await ask(good_reader, good_writer, encode_request(*REPLICATE)) == ANSWER
        good_writer.close()
        follower.server.close()

    run(scenario())


def test_silent_connections_are_closed_and_cannot_lock_a_leader_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_module, "AUTH_TIMEOUT_S", 0.5)
    monkeypatch.setattr(link_module, "MAX_PENDING", 2)

    async def scenario() -> None:
        follower = Follower()
        host, port, _ = await follower.replication_endpoint()
        # Sockets that never send a token: the oldest is closed as a third waits.
        silent = [await asyncio.open_connection(host, port) for _ in range(3)]
        assert await closed_by_peer(silent[0][0])
        assert follower.server.rejected == 1
        # A leader connecting meanwhile gets in and is served.
        reader, writer = await connect(follower)
        assert await ask(reader, writer, encode_request(*REPLICATE)) == ANSWER
        for silent_reader, _ in silent[1:]:  # the rest, after the token timeout
            assert await closed_by_peer(silent_reader)
        assert await ask(reader, writer, encode_request(*REPLICATE)) == ANSWER
        for _, w in silent:
            w.close()
        writer.close()
        follower.server.close()

    run(scenario())


def test_leaders_asking_at_once_get_one_listener() -> None:
    async def scenario() -> None:
        follower = Follower()
        endpoints = await asyncio.gather(*(follower.replication_endpoint() for _ in range(3)))
        assert len(set(endpoints)) == 1
        follower.server.close()

    run(scenario())


def test_a_leader_quiet_past_the_idle_timeout_is_disconnected() -> None:
    async def scenario() -> None:
        follower = Follower()
        follower.server = LinkServer(follower.dispatch, max_frame_bytes=1024, idle_timeout_s=0.2)
        reader, writer = await connect(follower)
        assert await closed_by_peer(reader)
        writer.close()
        follower.server.close()

    run(scenario())


def test_the_leader_side_pushes_over_the_link_and_reconnects_after_a_failure() -> None:
    async def scenario() -> None:
        follower = Follower()
        handle = FakeHandle(follower)
        link = FollowerLink(handle)
        assert await link.request(*REPLICATE) == ANSWER
        assert await link.request(*REPLICATE) == ANSWER
        assert handle.calls == 1  # the endpoint, once; the pushes went over the socket
        follower.fail = True
        with pytest.raises(asyncio.IncompleteReadError):  # the follower closed the connection
            await link.request(*REPLICATE)
        link.close()
        follower.fail = False
        assert await link.request(*REPLICATE) == ANSWER
        assert handle.calls == 2  # asked for the endpoint again
        assert [kind for kind, _ in follower.requests] == ["replicate"] * 4
        link.close()
        follower.server.close()

    run(scenario())


def test_without_a_reachable_link_pushes_are_ray_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        follower = Follower()
        endpoint = await follower.replication_endpoint()
        follower.server.close()  # nothing listens there now: connections are refused

        async def closed_endpoint() -> tuple[str, int, bytes]:
            return endpoint

        monkeypatch.setattr(follower, "replication_endpoint", closed_endpoint)
        unreachable = FollowerLink(FakeHandle(follower))
        disabled = FollowerLink(FakeHandle(follower), enabled=False)
        assert await unreachable.request(*REPLICATE) == ANSWER
        assert await disabled.request(*REPLICATE) == ANSWER
        assert follower.requests == [("ray:replicate", REPLICATE[1:])] * 2

    run(scenario())
