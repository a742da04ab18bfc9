"""Coalescing in the async client: requests made in one event-loop turn go
to their leader as one streaming call, answers come back as each is
released, and a leader's death mid-stream is retried like a single call."""

from __future__ import annotations

import asyncio

import pytest
import ray

from actors.client import Client
from coordinator import Errors
from coordinator.messages import JoinGroupResponse, SyncGroupRequest, SyncGroupResponse

from tests.ray.helpers import join_request

pytestmark = pytest.mark.ray
SESSION_MS = 20_000


class CountingLeader:
    """A leader handle that counts the Ray calls made through it."""

    def __init__(self, leader: object) -> None:
        self._leader = leader
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        method = getattr(self._leader, name)
        calls = self.calls

        class Counted:
            @staticmethod
            def remote(*args: object) -> object:
                calls.append(name)
                return method.remote(*args)

        return Counted


def counting(client: Client, partition: int) -> CountingLeader:
    leader = CountingLeader(client.leader(partition))
    client._leaders = list(client._leaders)
    client._leaders[partition] = leader
    return leader


def test_a_thousand_members_rebalance_in_two_batched_calls(service: Client) -> None:
    client = Client(service.controller)
    group = "coalesced-1000"
    members = [r.member_id for r in asyncio.run(_form(client, group, 1_000))]
    leader = counting(client, client.partition_for(group))

    joined, synced = asyncio.run(_rejoin_and_sync(client, group, members))

    assert leader.calls == ["handle_batch", "handle_batch"]
    assert [r.error for r in joined] == [Errors.NONE] * 1_000
    assert [r.member_id for r in joined] == members and len({r.generation_id for r in joined}) == 1
    assert sum(len(r.members) for r in joined) == 1_000  # only the group leader gets the member list
    assert [s.assignment for s in synced] == [m.encode() for m in members]


def test_a_parked_join_does_not_hold_back_a_commit_sent_with_it(service: Client) -> None:
    client = Client(service.controller)
    group = "coalesced-mixed"
    (first,) = asyncio.run(_form(client, group, 1))
    member = first.member_id
    leader = counting(client, client.partition_for(group))

    async def mixed() -> tuple[object, object, bool]:
        # A second member's join parks: the first member must rejoin first.
        parked = asyncio.ensure_future(
            client.join_group_async(join_request(group, session_ms=SESSION_MS, require_known_member_id=False))
        )
        commit = await client.commit_offsets_async(group, {("t", 0): 5}, first.generation_id, member)
        still_parked = not parked.done()
        rejoin = await client.join_group_async(join_request(group, member, session_ms=SESSION_MS))
        return commit, rejoin, still_parked and (await parked).error is Errors.NONE

    commit, rejoin, parked_then_answered = asyncio.run(mixed())

    assert leader.calls[0] == "handle_batch"  # the join and the commit went together
    assert commit.partitions[0].error is Errors.NONE
    assert rejoin.error is Errors.NONE and parked_then_answered


def test_commits_coalesced_across_a_leader_kill_are_all_retried_and_kept(service: Client) -> None:
    client = Client(service.controller)
    groups = [f"coalesced-kill-{i}" for i in range(200)]
    partition = client.partition_for(groups[0])
    groups = [g for g in groups if client.partition_for(g) == partition]

    async def commit_all(offset: int) -> set[Errors]:
        commits = (client.commit_offsets_async(g, {("t", 0): offset}) for g in groups)
        responses = await asyncio.gather(*commits)
        return {p.error for r in responses for p in r.partitions}

    async def commit_through_kill() -> set[Errors]:
        assert await commit_all(1) == {Errors.NONE}
        pending = asyncio.ensure_future(commit_all(2))
        await asyncio.sleep(0)  # the batch is sent at the end of this turn
        ray.kill(client.leader(partition), no_restart=True)
        return await pending

    assert asyncio.run(commit_through_kill()) == {Errors.NONE}
    client.refresh()
    assert {g: client.fetch_offsets(g).offsets() for g in groups} == {g: {("t", 0): 2} for g in groups}


async def _form(client: Client, group: str, n: int) -> list[JoinGroupResponse]:
    """n members join (KIP-394: ids first, so the join phase waits for all) and sync."""
    request = join_request(group, session_ms=SESSION_MS)
    first = await asyncio.gather(*(client.join_group_async(request) for _ in range(n)))
    assert {r.error for r in first} == {Errors.MEMBER_ID_REQUIRED}
    joined, synced = await _rejoin_and_sync(client, group, [r.member_id for r in first])
    assert {s.error for s in synced} == {Errors.NONE}
    return joined


async def _rejoin_and_sync(
    client: Client, group: str, members: list[str]
) -> tuple[list[JoinGroupResponse], list[SyncGroupResponse]]:
    requests = [join_request(group, m, session_ms=SESSION_MS) for m in members]
    joined = await asyncio.gather(*(client.join_group_async(r) for r in requests))
    chosen = joined[0].leader
    assignment = tuple((r.member_id, r.member_id.encode()) for r in joined)
    synced = await asyncio.gather(
        *(
            client.sync_group_async(
                SyncGroupRequest(
                    group, r.generation_id, r.member_id, assignments=assignment * (r.member_id == chosen)
                )
            )
            for r in joined
        )
    )
    return joined, synced
