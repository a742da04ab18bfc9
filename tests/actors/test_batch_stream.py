"""A coalesced batch on the partition's real request path, without Ray:
`handle_batch` streams each request's answer as soon as it is released, so a
JoinGroup the group parks holds back none of the 500 heartbeats sent with it,
and each request is answered exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from actors.core.settings import ServiceSettings
from actors.core.wire import loads_response
from actors.partition.actor import OffsetPartition
from coordinator import Errors
from coordinator.config import CoordinatorConfig
from coordinator.messages import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest

from tests.actors.support import active, run

MEMBERS = 500
SESSION_MS = 60_000  # no session ends during the test
SUBSCRIPTION = b"\x00\x01"


def join(group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group, SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="consumer",
        protocols=(("range", SUBSCRIPTION),), member_id=member_id, client_id="test",
    )


async def answers(stream: AsyncIterator[bytes]) -> list[list[tuple[int, Any]]]:
    """Every list the stream yields, unpickled."""
    return [loads_response(part) async for part in stream]


async def batch(partition: OffsetPartition, requests: list[Any]) -> list[Any]:
    """Each request's one answer, in request order."""
    got: dict[int, Any] = {}
    for part in await answers(partition.handle_batch(requests)):
        for index, response in part:
            assert index not in got, f"request {index} answered twice"
            got[index] = response
    return [got[index] for index in range(len(requests))]


async def stable_group(partition: OffsetPartition, group: str, size: int) -> tuple[list[str], int]:
    """A group of `size` members, formed and synced in three batches: (members, generation)."""
    first = await batch(partition, [join(group) for _ in range(size)])
    assert {r.error for r in first} == {Errors.MEMBER_ID_REQUIRED}
    members = [r.member_id for r in first]
    joined = await batch(partition, [join(group, m) for m in members])
    assert {r.error for r in joined} == {Errors.NONE}
    generation, leader = joined[0].generation_id, joined[0].leader
    plan = tuple((m, m.encode()) for m in members)
    synced = await batch(partition, [
        SyncGroupRequest(group, generation, m, assignments=plan if m == leader else ()) for m in members
    ])
    assert [s.assignment for s in synced] == [m.encode() for m in members]
    return members, generation


def test_a_parked_join_holds_back_none_of_the_500_heartbeats_in_its_batch(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = ServiceSettings(
            data_dir=str(tmp_path), num_partitions=1,
            coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
        )
        partition = await active(settings)
        group = "g"
        members, generation = await stable_group(partition, group, MEMBERS)
        (newcomer,) = await batch(partition, [join(group)])  # KIP-394: its id first
        requests: list[Any] = [join(group, newcomer.member_id)]
        requests += [HeartbeatRequest(group, generation, m) for m in members]

        stream = partition.handle_batch(requests)
        first = loads_response(await anext(stream))
        # The newcomer's join started a rebalance and waits for the 500 to rejoin; their
        # heartbeats are answered at once, all in the first list, and tell them to rejoin.
        assert sorted(index for index, _ in first) == list(range(1, MEMBERS + 1))
        assert {response.error for _, response in first} == {Errors.REBALANCE_IN_PROGRESS}
        rejoined = await batch(partition, [join(group, m) for m in members])
        rest = await answers(stream)
        assert {r.error for r in rejoined} == {Errors.NONE}
        assert [[index for index, _ in part] for part in rest] == [[0]]  # the join, once, and the end
        ((_, newcomer_joined),) = rest[0]
        assert newcomer_joined.error is Errors.NONE
        assert newcomer_joined.generation_id == rejoined[0].generation_id == generation + 1
        await partition.unload(partition.epoch)

    run(scenario())
