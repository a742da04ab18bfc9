"""Shared by test_member*.py and test_topics*.py (holds no tests): member hosts in
other processes, listener recorders, settle checks and cleanup.

A "view" of a member is (stable, generation, assignment), the same for a
GroupMember in this process and one hosted by a `MemberHost` actor, so the
checks treat both alike.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from typing import Any

import ray

from actors import AsyncGroupMember, GroupMember
from actors.member.group_member import MemberBase
from coordinator.topic_partition import TopicPartition

FAST = {
    "session_timeout_ms": 2_000,
    "heartbeat_interval_ms": 100,
    "metadata_max_age_ms": 300,
    "retry_backoff_ms": 50,
}
TIMEOUT_S = 30.0
View = tuple[bool, int, frozenset[TopicPartition]]


def partitions(topic: str, count: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in range(count))


def wait_until(predicate: Any, timeout_s: float = TIMEOUT_S, interval_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval_s)
    return value


class Recorder:
    """Listener calls, in order, as (listener, partitions)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    def listeners(self) -> dict[str, Any]:
        return {
            f"on_{kind}": (lambda parts, kind=kind: self.events.append((kind, frozenset(parts))))
            for kind in ("assigned", "revoked", "lost")
        }

    def since(self, index: int, kind: str) -> frozenset[TopicPartition]:
        return frozenset().union(*(p for k, p in self.events[index:] if k == kind))


def view(member: MemberBase) -> View:
    return member.is_stable, member.generation_id, frozenset(member.assignment())


def settled_generation(views: Iterable[View], expected: frozenset[TopicPartition], after: int = -1) -> int:
    """The generation all members settled in, complete and disjoint, newer than `after`; else 0."""
    views = list(views)
    generations = {g for _, g, _ in views}
    if not views or not all(s for s, _, _ in views) or len(generations) != 1 or min(generations) <= after:
        return 0
    owned = [a for _, _, a in views]
    if sum(map(len, owned)) != len(expected) or frozenset().union(*owned) != expected:
        return 0  # the assignment of this generation is not complete yet
    return generations.pop()


# ----------------------------------------------------------------- hosts


def _options(recorder: Recorder, options: dict[str, Any]) -> dict[str, Any]:
    return {**FAST, **recorder.listeners(), **options}


@ray.remote(num_cpus=0)
class MemberHost:
    """GroupMembers in their own process (a sync Ray actor), each with a recorder."""

    def __init__(self) -> None:
        self.members: dict[str, tuple[GroupMember, Recorder]] = {}

    def add(self, name: str, group_id: str, topics: list[str], **options: Any) -> None:
        recorder = Recorder()
        member = GroupMember(group_id, topics, **_options(recorder, options))
        self.members[name] = (member.start(), recorder)

    def views(self) -> dict[str, View]:
        return {name: view(member) for name, (member, _) in self.members.items()}

    def events(self, name: str) -> list[tuple[str, frozenset[TopicPartition]]]:
        return list(self.members[name][1].events)

    def close_all(self) -> None:
        for member, _ in self.members.values():
            member.close()


@ray.remote(num_cpus=0)
class AsyncMemberHost:
    """AsyncGroupMembers inside an async Ray actor, with coroutine listeners."""

    def __init__(self) -> None:
        self.members: dict[str, tuple[AsyncGroupMember, Recorder]] = {}

    async def add(self, name: str, group_id: str, topics: list[str], **options: Any) -> None:
        recorder = Recorder()

        async def on_assigned(parts: set[TopicPartition]) -> None:
            await asyncio.sleep(0)  # a real coroutine listener, awaited by the member's task
            recorder.events.append(("assigned", frozenset(parts)))

        options = {**_options(recorder, options), "on_assigned": on_assigned}
        member = AsyncGroupMember(group_id, topics, **options)
        self.members[name] = (await member.start(), recorder)

    async def views(self) -> dict[str, View]:
        return {name: view(member) for name, (member, _) in self.members.items()}

    async def wait_and_commit(self, name: str, base: int) -> list[TopicPartition]:
        member = self.members[name][0]
        owned = await member.wait_for_assignment(TIMEOUT_S)
        await member.commit({tp: base + tp.partition for tp in owned}, metadata="async")
        committed = await member.committed(owned)
        assert all(c is not None and c.offset == base + tp.partition for tp, c in committed.items())
        return sorted(owned)

    async def events(self, name: str) -> list[tuple[str, frozenset[TopicPartition]]]:
        return list(self.members[name][1].events)

    async def close_all(self) -> None:
        for member, _ in self.members.values():
            await member.close()


# --------------------------------------------------------------- cleanup


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Cleanup:
    """Closes the members and kills the hosts a test made, whatever the test's outcome."""

    def __init__(self) -> None:
        self.members: list[GroupMember] = []
        self.hosts: list[Any] = []

    def member(self, group_id: str, topics: Iterable[str] = (), recorder: Recorder | None = None,
               **options: Any) -> GroupMember:
        extra = recorder.listeners() if recorder is not None else {}
        member = GroupMember(group_id, topics, **{**FAST, **extra, **options})
        self.members.append(member)
        return member

    def host(self, actor_class: Any = MemberHost) -> Any:
        handle = actor_class.remote()
        self.hosts.append(handle)
        return handle

    def close(self) -> None:
        for member in self.members:
            member.close()
        for host in self.hosts:
            try:
                ray.get(host.close_all.remote(), timeout=TIMEOUT_S)
            except Exception:
                pass  # killed by the test, or stuck: the kill below removes it either way
            ray.kill(host, no_restart=True)
