"""A process paused (SIGSTOP) with a coalesced batch in flight holds back no one: its
leader serves every other caller meanwhile, the paused process's parked JoinGroup still
completes the rebalance it is part of, and once resumed it gets each of its requests'
answers exactly once; every commit it was told was acknowledged is there."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
import ray

from actors.client.client import Client
from coordinator import Errors
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest

from tests.ray.helpers import form_group, join, join_request, wait_until

pytestmark = pytest.mark.ray
SESSION_MS = 30_000  # no session ends during the pause
COMMITS = 200
TIMEOUT_S = 30


@ray.remote(num_cpus=0)
class Sender:
    """A member process: its requests go through its own client's coalescer."""

    def __init__(self, controller: Any) -> None:
        self.client = Client(controller)
        self.futures: list[Any] = []

    def pid(self) -> int:
        return os.getpid()

    def member_id(self, group: str) -> str:
        """A member id for `group` (KIP-394's first round), the client routed and connected."""
        return self.client.join_group(join_request(group, session_ms=SESSION_MS)).member_id  # type: ignore[no-any-return]

    def send(self, group: str, member_id: str, commit_groups: list[str]) -> None:
        """A JoinGroup the group parks and many commits, sent at once (one batch or two)."""
        self.futures = [self.client.send_later(join_request(group, member_id, session_ms=SESSION_MS))]
        self.futures += [
            self.client.send_later(OffsetCommitRequest(g, (OffsetCommitPartition("t", 0, 7),)))
            for g in commit_groups
        ]

    def answers(self) -> list[Any]:
        return [future.result(TIMEOUT_S) for future in self.futures]


def groups_on(client: Client, partition: int, prefix: str, n: int) -> list[str]:
    names = (f"{prefix}-{i}" for i in range(10**6))
    return [g for g, _ in zip((g for g in names if client.partition_for(g) == partition), range(n))]


def test_a_paused_process_with_a_batch_in_flight_holds_back_no_one(service: Client) -> None:
    client = Client(service.controller)
    group = "paused-sender"
    partition = client.partition_for(group)
    (member,), generation = form_group(client, group, 1, session_ms=SESSION_MS)
    commit_groups = groups_on(client, partition, "paused-commits", COMMITS)
    sender = Sender.remote(client.controller)  # type: ignore[attr-defined]
    pid = ray.get(sender.pid.remote(), timeout=TIMEOUT_S)
    newcomer = ray.get(sender.member_id.remote(group), timeout=TIMEOUT_S)
    ray.get(sender.send.remote(group, newcomer, commit_groups), timeout=TIMEOUT_S)
    # Paused once its join is parked at the leader: the commits sent behind it may be
    # answered, in flight or not sent yet, and the answers it gets are unread meanwhile.
    wait_until(lambda: client.describe_groups([group])[0].state == "PreparingRebalance", TIMEOUT_S)
    os.kill(pid, signal.SIGSTOP)
    try:
        # The leader serves everyone else: a commit, and the rebalance the paused join started,
        # which completes once the group's first member rejoins (the paused join is in).
        other = client.commit_offsets("paused-other", {("t", 0): 3})
        assert other.partitions[0].error is Errors.NONE
        rejoined = join(client, group, member, session_ms=SESSION_MS)
    finally:
        os.kill(pid, signal.SIGCONT)
    joined, *commits = ray.get(sender.answers.remote(), timeout=TIMEOUT_S)
    assert rejoined.error is Errors.NONE and rejoined.generation_id == generation + 1, (rejoined, joined)
    assert sorted(m.member_id for m in rejoined.members) == sorted([member, newcomer]), (rejoined, joined)
    assert (joined.error, joined.generation_id) == (Errors.NONE, generation + 1)
    assert {c.partitions[0].error for c in commits} == {Errors.NONE}
    for g in commit_groups:
        assert client.fetch_offsets(g).offsets() == {("t", 0): 7}
    ray.kill(sender)
