"""Coalescing in the client: requests made in one event-loop turn, or by threads
while a call is in flight, go to their leader as one call, parked requests' answers
come back through one collect, and a leader's death while a batch waits fails only
the requests it had not answered, which the client then retries like a single call."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from ray.exceptions import ActorDiedError

from actors.client.client import Client
from actors.client.coalesce import Coalescer
from actors.core.wire import loads_response
from bench.saturation import counting
from coordinator import Errors
from coordinator.messages import (
    JoinGroupResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from tests.ray.helpers import join_request, kill_and_wait_dead

pytestmark = pytest.mark.ray
# Sessions far longer than a test: a parked SyncGroup must stay parked until the kill.
SESSION_MS = 60_000
TIMEOUT_S = 30


def test_a_thousand_members_rebalance_in_two_batched_calls_and_a_collect(service: Client) -> None:
    client = Client(service.controller)
    group = "coalesced-1000"
    members = [r.member_id for r in asyncio.run(_form(client, group, 1_000))]
    leader = counting(client, client.partition_for(group))

    joined, synced = asyncio.run(_rejoin_and_sync(client, group, members))

    # The joins are answered by their call (the last completes the join phase); the
    # syncs all park until the leader's assignment is durable, then come in one collect.
    assert leader.calls == ["handle_batch", "handle_batch", "collect"]
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


def test_a_leader_killed_while_a_batch_waits_fails_only_what_it_had_not_answered(service: Client) -> None:
    """The batch holds a SyncGroup the leader parks, so its collect is still
    waiting when the kill lands: the answers already given stand, the parked
    request fails with the actor's death, nothing is answered twice."""
    client = Client(service.controller)
    group = "coalesced-kill-stream"
    partition = client.partition_for(group)
    others = groups_on_partition(client, partition, "coalesced-kill-stream", 20)

    async def kill_while_parked() -> tuple[list[OffsetCommitResponse], list[int], object, RecordingLeader]:
        _, follower, generation = await _completing_rebalance(client, group)
        old = client.leader(partition)
        leader = RecordingLeader(old)
        coalescer = Coalescer(leader, asyncio.get_running_loop())
        offset = (OffsetCommitPartition("t", 0, 3),)
        commits = [coalescer.submit(OffsetCommitRequest(g, offset)) for g in others]
        parked = coalescer.submit(SyncGroupRequest(group, generation, follower))
        answered = await asyncio.wait_for(asyncio.gather(*commits), TIMEOUT_S)
        assert not parked.done(), "the follower's SyncGroup waits for the leader's"
        answered_before_kill = list(leader.answered)
        await asyncio.to_thread(kill_and_wait_dead, old)
        death = await asyncio.wait_for(asyncio.gather(parked, return_exceptions=True), TIMEOUT_S)
        return answered, answered_before_kill, death[0], leader

    answered, answered_before_kill, death, leader = asyncio.run(kill_while_parked())

    assert leader.batch_calls == 1
    assert {p.error for r in answered for p in r.partitions} == {Errors.NONE}
    assert sorted(answered_before_kill) == list(range(len(others)))  # each commit once, the sync not
    assert isinstance(death, ActorDiedError), death
    assert leader.answered == answered_before_kill  # the dead leader answered nothing more


def test_a_request_parked_when_its_leader_dies_is_retried_on_the_new_leader(service: Client) -> None:
    """Through the client: commits answered before the kill stay committed; the
    SyncGroup parked in the same stream is sent again and the new leader tells
    the follower to rejoin: REBALANCE_IN_PROGRESS while it loads (Kafka's
    answer to a SyncGroup then), ILLEGAL_GENERATION once it has loaded the
    group as last stored (Stable, the previous generation). The old leader
    could give neither: nothing else ended the rebalance it parked it in."""
    client = Client(service.controller)
    group = "coalesced-kill-retry"
    partition = client.partition_for(group)
    others = groups_on_partition(client, partition, "coalesced-kill-retry", 20)

    async def through_kill() -> tuple[list[OffsetCommitResponse], SyncGroupResponse, list[str]]:
        _, follower, generation = await _completing_rebalance(client, group)
        old = client.leader(partition)
        counted = counting(client, partition)
        sync = asyncio.ensure_future(client.sync_group_async(SyncGroupRequest(group, generation, follower)))
        commits = [asyncio.ensure_future(client.commit_offsets_async(g, {("t", 0): 7})) for g in others]
        committed = await asyncio.wait_for(asyncio.gather(*commits), TIMEOUT_S)
        assert not sync.done(), "the follower's SyncGroup waits for the leader's"
        await asyncio.to_thread(kill_and_wait_dead, old)
        return committed, await asyncio.wait_for(sync, TIMEOUT_S), counted.calls

    committed, synced, calls = asyncio.run(through_kill())

    assert calls == ["handle_batch", "collect"]  # the sync and the commits went in one call
    assert {p.error for r in committed for p in r.partitions} == {Errors.NONE}
    assert synced.error in {Errors.REBALANCE_IN_PROGRESS, Errors.ILLEGAL_GENERATION}
    client.refresh()
    assert {g: client.fetch_offsets(g).offsets() for g in others} == {g: {("t", 0): 7} for g in others}


def groups_on_partition(client: Client, partition: int, prefix: str, n: int) -> list[str]:
    names = (f"{prefix}-{i}" for i in itertools.count())
    return list(itertools.islice((g for g in names if client.partition_for(g) == partition), n))


class RecordingLeader:
    """A leader handle that records the request indices each answer to a batch
    carries (its call's and its collects'), before the Coalescer sees them."""

    def __init__(self, leader: Any) -> None:
        self.handle_wire = leader.handle_wire
        self.handle_batch = _Recorded(leader.handle_batch, self._called)
        self.collect = _Recorded(leader.collect, self._collected)
        self.batch_calls = 0
        self.answered: list[int] = []

    def _called(self, payload: bytes) -> None:
        self.batch_calls += 1
        self.answered.extend(index for index, _ in loads_response(payload)[0])

    def _collected(self, payload: bytes) -> None:
        self.answered.extend(index for _, index, _ in loads_response(payload)[1])


class _Recorded:
    def __init__(self, method: Any, record: Callable[[bytes], None]) -> None:
        self._method, self._record = method, record

    def remote(self, *args: object) -> Awaitable[bytes]:
        return self._answer(self._method.remote(*args))

    async def _answer(self, ref: Awaitable[bytes]) -> bytes:
        payload = await ref
        self._record(payload)
        return payload


async def _completing_rebalance(client: Client, group: str) -> tuple[str, str, int]:
    """A group of two that rebalanced and waits for its leader's SyncGroup:
    (leader, follower, the new generation)."""
    members = [r.member_id for r in await _form(client, group, 2)]
    # The rebalance timeout also bounds the wait for the leader's SyncGroup.
    requests = [join_request(group, m, SESSION_MS, rebalance_timeout_ms=SESSION_MS) for m in members]
    joined = await asyncio.gather(*(client.join_group_async(r) for r in requests))
    assert {r.error for r in joined} == {Errors.NONE}
    leader = joined[0].leader
    (follower,) = [m for m in members if m != leader]
    return leader, follower, joined[0].generation_id


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


def test_threads_sending_at_once_share_calls_and_each_gets_its_own_answer(service: Client) -> None:
    """The sync path: threads hand their requests to the process's sender, which
    batches what arrives while a call is in flight (actors/client/coalesce.py)."""
    client = Client(service.controller)
    partition = client.partition_for("coalesced-threads-0")
    groups = groups_on_partition(client, partition, "coalesced-threads", 40)
    leader = counting(client, partition)
    start = threading.Barrier(len(groups))

    def commit(i: int, group: str) -> Errors:
        start.wait(timeout=TIMEOUT_S)
        response = client.commit_offsets(group, {("t", 0): i})
        return response.partitions[0].error

    with concurrent.futures.ThreadPoolExecutor(len(groups)) as pool:
        errors = list(pool.map(commit, range(len(groups)), groups))

    assert errors == [Errors.NONE] * len(groups)
    assert len(leader.calls) < len(groups), leader.calls
    assert {g: client.fetch_offsets(g).offsets() for g in groups} == {
        g: {("t", 0): i} for i, g in enumerate(groups)
    }


def test_a_lone_sync_request_is_one_plain_call(service: Client) -> None:
    client = Client(service.controller)
    group = "coalesced-lone"
    leader = counting(client, client.partition_for(group))
    assert client.commit_offsets(group, {("t", 0): 4}).partitions[0].error is Errors.NONE
    assert client.fetch_offsets(group).offsets() == {("t", 0): 4}
    assert leader.calls == ["handle_wire", "handle_wire"]
