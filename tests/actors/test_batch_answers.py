"""A coalesced batch on the partition's real request path, without Ray:
`handle_batch` answers every request that cannot park and leaves the parked
ones to `collect` (actors/partition/batches.py), so a JoinGroup the group
parks holds back none of the 500 heartbeats sent with it; each request is
answered exactly once; answers no one collects wait in the caller's mailbox,
hold back no one, and go after the mailbox's TTL; a step-down answers what
was parked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from actors.core.settings import ServiceSettings
from actors.core.wire import loads_response
from actors.partition.actor import OffsetPartition
from actors.partition.batches import MAILBOX_TTL_S, Mailboxes, answer_in_process
from coordinator import Errors
from coordinator.config import CoordinatorConfig
from coordinator.messages import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest

from tests.actors.support import WAIT_S, active, commit, run

MEMBERS = 500
SESSION_MS = 60_000  # no session ends during the test
SUBSCRIPTION = b"\x00\x01"


def join(group: str, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group, SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="consumer",
        protocols=(("range", SUBSCRIPTION),), member_id=member_id, client_id="test",
    )


batch = answer_in_process  # each request's one answer, in order


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


def settings_for(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings(
        data_dir=str(tmp_path), num_partitions=1,
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
    )


def test_a_parked_join_holds_back_none_of_the_500_heartbeats_in_its_batch(tmp_path: Path) -> None:
    async def scenario() -> None:
        partition = await active(settings_for(tmp_path))
        group, caller = "g", 7
        members, generation = await stable_group(partition, group, MEMBERS)
        (newcomer,) = await batch(partition, [join(group)])  # KIP-394: its id first
        requests: list[Any] = [join(group, newcomer.member_id)]
        requests += [HeartbeatRequest(group, generation, m) for m in members]

        answered, parked, mailbox = loads_response(await partition.handle_batch(caller, 3, requests))
        # The newcomer's join started a rebalance and waits for the 500 to rejoin; their
        # heartbeats are answered by the call, and tell them to rejoin.
        assert parked == 1
        assert sorted(index for index, _ in answered) == list(range(1, MEMBERS + 1))
        assert {response.error for _, response in answered} == {Errors.REBALANCE_IN_PROGRESS}
        rejoined = await batch(partition, [join(group, m) for m in members])
        assert {r.error for r in rejoined} == {Errors.NONE}
        floor, ((number, index, newcomer_joined),) = loads_response(await partition.collect(caller, mailbox))
        assert (floor, number, index) == (mailbox, 3, 0)  # the join, once, from its mailbox
        assert newcomer_joined.error is Errors.NONE
        assert newcomer_joined.generation_id == rejoined[0].generation_id == generation + 1
        assert len(partition.mailboxes) == 0, "a mailbox whose answers were all collected stays"
        await partition.unload(partition.epoch)

    run(scenario())


def test_answers_no_one_collects_hold_back_no_one_and_go_after_the_ttl(tmp_path: Path) -> None:
    """A caller that stopped reading (paused, gone) with a parked join: its answer
    waits in its mailbox while the partition serves everyone; after the TTL with no
    call of the caller's, the mailbox goes and the caller's collect answers a floor
    above its generation (the client then retries what was parked there)."""
    async def scenario() -> None:
        partition = await active(settings_for(tmp_path))
        now = [0.0]
        partition.mailboxes = Mailboxes(clock=lambda: now[0])
        group, silent = "g", 11
        (first,), generation = await stable_group(partition, group, 1)
        (newcomer,) = await batch(partition, [join(group)])
        parked_join = [join(group, newcomer.member_id)]
        answered, parked, mailbox = loads_response(await partition.handle_batch(silent, 0, parked_join))
        assert (answered, parked) == ([], 1) and mailbox >= 1
        (rejoined,) = await batch(partition, [join(group, first)])  # completes the rebalance
        assert rejoined.error is Errors.NONE and rejoined.generation_id == generation + 1
        assert len(partition.mailboxes) == 1  # the newcomer's answer, uncollected
        (committed,) = await batch(partition, [commit("other", 5)])
        assert committed.errors() == {("t", 0): Errors.NONE}
        now[0] += MAILBOX_TTL_S + 1
        floor, answers = loads_response(await partition.collect(silent, mailbox))
        assert floor > mailbox and answers == []
        await partition.unload(partition.epoch)

    run(scenario())


def test_a_step_down_answers_parked_requests_through_collect(tmp_path: Path) -> None:
    async def scenario() -> None:
        partition = await active(settings_for(tmp_path))
        group, caller = "g", 5
        (first,), _ = await stable_group(partition, group, 1)
        (newcomer,) = await batch(partition, [join(group)])
        requests = [join(group, newcomer.member_id)]
        _, parked, mailbox = loads_response(await partition.handle_batch(caller, 0, requests))
        assert parked == 1
        waiting = asyncio.ensure_future(partition.collect(caller, mailbox))
        await partition.unload(partition.epoch)
        _, ((_, _, answer),) = loads_response(await asyncio.wait_for(waiting, WAIT_S))
        assert answer.error is Errors.NOT_COORDINATOR

    run(scenario())
