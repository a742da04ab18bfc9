"""The drivers' side of assignment watches (GroupMember, AsyncGroupMember), without Ray:
one watch is sent and kept parked across `Watch` effects; its answer ends the wait
the moment it comes; a failure reaches the loop as an exception."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

from actors import AsyncGroupMember, GroupMember
from actors.member.api import Watch
from coordinator import Errors
from coordinator.messages import AssignmentWatchRequest, AssignmentWatchResponse

CHANGED = AssignmentWatchResponse(Errors.NONE, changed=True)
REQUEST = AssignmentWatchRequest("g", "m", 3, 60_000)
LONG_S = 30.0  # a wait the answer ends long before (a timeout would return None, not the answer)


class ParkingClient:
    """Parks every watch: the test answers it through `parked`."""

    def __init__(self) -> None:
        self.parked: list[Any] = []

    def send_later(self, request: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.parked.append(future)
        return future

    async def send_once_async(self, request: Any) -> Any:
        future = asyncio.get_running_loop().create_future()
        self.parked.append(future)
        return await future


def consumer(cls: type, client: ParkingClient) -> Any:
    return cls("g", ["t"], client=client, group_protocol="consumer")  # not started: the test drives it


def test_the_threaded_driver_keeps_one_watch_parked_and_returns_its_answer() -> None:
    client = ParkingClient()
    member = consumer(GroupMember, client)
    assert member._perform(Watch(REQUEST, 0.01)) is None
    assert member._perform(Watch(REQUEST, 0.01)) is None
    assert len(client.parked) == 1  # still parked: not sent again
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(member._perform, Watch(REQUEST, LONG_S))
        client.parked[0].set_result(CHANGED)
        assert waiting.result() == CHANGED
    assert member._perform(Watch(REQUEST, 0.01)) is None
    assert len(client.parked) == 2  # answered: the next idle time sends a new one


def test_the_threaded_driver_raises_a_failed_watch_to_the_loop() -> None:
    client = ParkingClient()
    member = consumer(GroupMember, client)
    assert member._perform(Watch(REQUEST, 0.01)) is None
    client.parked[0].set_exception(RuntimeError("the leader died"))
    with pytest.raises(RuntimeError, match="the leader died"):
        member._perform(Watch(REQUEST, LONG_S))


def test_the_async_driver_keeps_one_watch_parked_and_returns_its_answer() -> None:
    async def scenario() -> None:
        client = ParkingClient()
        member = consumer(AsyncGroupMember, client)
        assert await member._perform(Watch(REQUEST, 0.01)) is None
        assert await member._perform(Watch(REQUEST, 0.01)) is None
        assert len(client.parked) == 1
        waiting = asyncio.ensure_future(member._perform(Watch(REQUEST, LONG_S)))
        await asyncio.sleep(0)
        client.parked[0].set_result(CHANGED)
        assert await waiting == CHANGED
        assert await member._perform(Watch(REQUEST, 0.01)) is None
        assert len(client.parked) == 2
        client.parked[1].set_exception(RuntimeError("the leader died"))
        with pytest.raises(RuntimeError, match="the leader died"):
            await member._perform(Watch(REQUEST, LONG_S))

    asyncio.run(scenario())
