"""Issue 45: parked answers are never lost silently. A caller paused past its leader's
mailbox TTL (SIGSTOP, a long GC, a debugger) with a parked JoinGroup and an
assignment watch in flight, that sends a new batch before it collects: the JoinGroup
fails with AnswersLostError and is sent again (a rejoin with the same member id,
answered as Kafka does), the watch fails with that retriable error and a watch sent
again parks and is answered, the new batch's answers arrive, and nothing hangs or
stays behind (actors/partition/batches.py, actors/client/coalesce.py).

The pause is a client whose collects do not leave until it resumes, as a stopped
process's; the leader runs with a short TTL (ServiceSettings.mailbox_ttl_s)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

import actors
from actors.client.client import Client
from actors.client.coalesce import Coalescer, coalescer_for
from actors.client.retry import UNREACHABLE, AnswersLostError
from actors.core.settings import KafkaListenerSettings, ServiceSettings
from coordinator import CoordinatorConfig, Errors
from coordinator.consumer.watch import MAX_WATCH_MS
from coordinator.messages import (
    AssignmentWatchRequest,
    AssignmentWatchResponse,
    ConsumerGroupHeartbeatRequest,
)

from tests.actors.support import until
from tests.ray.helpers import form_group, join_request

pytestmark = pytest.mark.ray
NAMESPACE = "raygroups-lost-answers"
TTL_S = 1.0
SESSION_MS = 30_000  # no session ends during the test
TIMEOUT_S = 60.0
UNCHANGED = AssignmentWatchResponse(Errors.NONE, changed=False)


@pytest.fixture
def short_ttl(ray_session: None) -> Iterator[Client]:
    """A service of its own, one partition, whose leader drops a silent caller's mailbox after TTL_S."""
    path = tempfile.mkdtemp(prefix="raygroups-lost-answers-")
    settings = ServiceSettings(
        data_dir=path, num_partitions=1, namespace=NAMESPACE, mailbox_ttl_s=TTL_S, standby_actors=0,
        kafka_listener=KafkaListenerSettings(enabled=False),
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
    )
    try:
        yield actors.start(settings=settings, namespace=NAMESPACE)
        actors.stop(NAMESPACE)
    finally:
        shutil.rmtree(path, ignore_errors=True)


class PausedLeader:
    """A leader handle as a paused process uses it: its collects leave only once resumed."""

    def __init__(self, leader: Any) -> None:
        self.handle_wire, self.handle_batch = leader.handle_wire, leader.handle_batch
        self.collect = self
        self._collect = leader.collect
        self.resumed = asyncio.Event()

    async def remote(self, *args: object) -> Any:
        await self.resumed.wait()
        return await self._collect.remote(*args)


def consumer_member(client: Client, group: str) -> AssignmentWatchRequest:
    """A consumer-protocol member of its own group, stable: the watch it would park."""
    joined = client.send(ConsumerGroupHeartbeatRequest(
        group, f"{group}-m", 0, rebalance_timeout_ms=SESSION_MS, subscribed_topic_names=("lost-answers-t",),
        topic_partitions=(),
    ))
    assert joined.error is Errors.NONE
    return AssignmentWatchRequest(group, joined.member_id, joined.member_epoch, MAX_WATCH_MS)


def idle(coalescer: Coalescer) -> bool:
    return not coalescer._open and not coalescer._collecting


def parked_requests(coalescer: Coalescer) -> int:
    return sum(len(coalescer._open.get(number, ())) for number in coalescer._collecting)


def test_a_caller_paused_past_the_ttl_loses_no_answer_silently(short_ttl: Client) -> None:
    admin, group = short_ttl, "lost-answers"
    (member,), generation = form_group(admin, group, 1, session_ms=SESSION_MS)
    newcomer = admin.join_group(join_request(group, session_ms=SESSION_MS)).member_id
    watch_a, watch_b = consumer_member(admin, "lost-answers-a"), consumer_member(admin, "lost-answers-b")

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        client = Client(admin.controller)
        leader = client.leader(0)
        paused = PausedLeader(leader)
        # The paused process's routing: its calls go through the paused handle, until a
        # retry refreshes the routing (to the leader itself, by then resumed).
        client._leaders = [paused]
        coalescer = coalescer_for(paused, loop)
        join = join_request(group, newcomer, session_ms=SESSION_MS)
        joining = asyncio.ensure_future(client.join_group_async(join))
        watching = asyncio.ensure_future(client.send_once_async(watch_a))
        await until(lambda: parked_requests(coalescer) == 2, "the join and the watch parked")
        # The pause itself (the stimulus, not a wait for something): longer than the TTL.
        # The leader's clock is this machine's monotonic clock, and the mailbox was opened
        # before the join and the watch were seen parked.
        await asyncio.sleep(TTL_S * 1.2)
        # Its next batch, before any collect: the member's rejoin (it completes the join
        # phase, answering the newcomer's join into the dropped mailbox) and a watch.
        rejoin = join_request(group, member, session_ms=SESSION_MS)
        rejoining = asyncio.ensure_future(client.join_group_async(rejoin))
        watching_b = asyncio.ensure_future(client.send_once_async(watch_b))
        # Parked, or (the rejoin) answered by the batch's own call.
        await until(lambda: parked_requests(coalescer) + rejoining.done() == 4, "the new batch in")
        paused.resumed.set()

        with pytest.raises(AnswersLostError):
            await watching
        assert isinstance(AnswersLostError(), UNREACHABLE)  # the member's driver sends it again
        rejoined, joined = await rejoining, await joining  # the newcomer's join went again
        assert (rejoined.error, joined.error) == (Errors.NONE, Errors.NONE)
        assert rejoined.generation_id == joined.generation_id == generation + 1
        assert client.leader(0) is not paused, "the retry refreshed the routing"

        # The watch sent again parks at the leader; another watch of the member replaces it.
        again = asyncio.ensure_future(client.send_once_async(watch_a))
        resumed = coalescer_for(leader, loop)
        await until(lambda: parked_requests(resumed) == 1, "the watch sent again parked")
        admin.send_later(watch_a)
        assert await again == UNCHANGED
        # The new batch's watch, in the new mailbox, is answered through the paused caller's collect.
        admin.send_later(watch_b)
        assert await watching_b == UNCHANGED
        await until(lambda: idle(coalescer) and idle(resumed), "nothing left waiting")

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
