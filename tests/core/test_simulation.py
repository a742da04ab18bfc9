"""Seeded random simulation: many members joining, leaving, going silent and
committing for simulated hours, with coordinator crashes (reload from the
log). Prints its seed on failure; rerun one with SIM_SEED=<seed>.

Invariants checked:
- one leader per generation and generations only grow, within one load of
  the shard (a generation that never stored its assignment is not persisted,
  in Kafka as here, so after a reload it may be reused);
- no member is both pending and active; bookkeeping counters match;
- every request is answered exactly once (the harness refuses a second
  answer; at the end every request has been answered);
- a fetched offset is always the last one acknowledged for that partition.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import pytest

from coordinator import Errors, Shard
from coordinator.messages import (
    HeartbeatRequest,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from tests.core.harness import Harness

REJOIN = {
    Errors.REBALANCE_IN_PROGRESS,
    Errors.ILLEGAL_GENERATION,
    Errors.NOT_COORDINATOR,
    Errors.COORDINATOR_NOT_AVAILABLE,
}
RESET = {Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID, Errors.GROUP_MAX_SIZE_REACHED}


@dataclass
class SimMember:
    name: str
    group: str
    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    phase: str = "out"  # out | joining | syncing | stable
    token: int | None = None
    silent_until: int = 0
    next_heartbeat: int = 0
    offsets: dict[int, int] = field(default_factory=dict)


class Simulation:
    def __init__(self, seed: int, members: int, groups: int) -> None:
        self.rng = random.Random(seed)
        self.h = Harness(group_initial_rebalance_delay_ms=1_000, group_max_size=60)
        self.members = [
            SimMember(f"m{i}", f"g{i % groups}", f"i{i}" if i % 5 == 0 else None) for i in range(members)
        ]
        self.committed: dict[tuple[str, int], int] = {}
        self.leaders: dict[tuple[str, int, int], str] = {}
        self.last_generation: dict[str, int] = {}
        self.incarnation = 0

    # ---------------------------------------------------------- driving

    def run(self, duration_ms: int, tick_ms: int = 500) -> None:
        end = self.h.now + duration_ms
        midway = self.h.now + duration_ms // 2
        while self.h.now < end:
            self.h.advance(tick_ms)
            for m in self.members:
                self.step(m)
            if self.rng.random() < 0.0005 or (self.incarnation == 0 and self.h.now >= midway):
                self.crash()
            self.check_structure()
        self.check_offsets()
        assert self.incarnation >= 1 and len(self.leaders) > 10 * len(self.last_generation), "too quiet"
        self.h.absorb(self.h.shard.unload(self.h.now))
        for m in self.members:
            if m.token is not None:
                self.on_answer(m, self.h.take(m.token))
        assert not self.h.open, f"requests never answered: {sorted(self.h.open)}"

    def step(self, m: SimMember) -> None:
        if m.token is not None:
            if not self.h.answered(m.token):
                return
            self.on_answer(m, self.h.take(m.token))
        now, roll = self.h.now, self.rng.random()
        if m.phase == "out":
            if roll < 0.05:
                self.join(m)
        elif m.phase == "stable" and now >= m.silent_until:
            if roll < 0.002:
                self.leave(m)
            elif roll < 0.004:
                m.silent_until = now + 15_000  # longer than the session timeout
            elif roll < 0.1:
                self.commit(m)
            elif now >= m.next_heartbeat:
                m.next_heartbeat = now + 3_000
                self.on_error(
                    m, self.h.call(HeartbeatRequest(m.group, m.generation, m.member_id, m.instance_id)).error
                )

    def join(self, m: SimMember) -> None:
        m.phase = "joining"
        m.token = self.h.send(
            self.h.join_request(
                m.group, m.member_id, group_instance_id=m.instance_id, rebalance_timeout_ms=20_000
            )
        )

    def leave(self, m: SimMember) -> None:
        self.h.call(LeaveGroupRequest(m.group, (MemberIdentity(m.member_id, m.instance_id),)))
        m.phase, m.member_id, m.generation = "out", "", -1

    def commit(self, m: SimMember) -> None:
        partition = self.rng.randrange(4)
        offset = m.offsets.get(partition, 0) + self.rng.randrange(1, 100)
        m.offsets[partition] = offset
        request = OffsetCommitRequest(
            m.group,
            (OffsetCommitPartition("t", partition, offset),),
            m.generation,
            m.member_id,
            m.instance_id,
        )
        error = self.h.call(request).partitions[0].error
        if error is Errors.NONE:
            self.committed[(m.group, partition)] = offset
        else:
            self.on_error(m, error)

    def on_answer(self, m: SimMember, response: object) -> None:
        m.token = None
        error = response.error  # type: ignore[attr-defined]
        if m.phase == "joining":
            if error is Errors.MEMBER_ID_REQUIRED:
                m.member_id = response.member_id  # type: ignore[attr-defined]
                self.join(m)
            elif error is Errors.NONE:
                self.on_joined(m, response)
            else:
                self.on_error(m, error)
        elif m.phase == "syncing":
            if error is Errors.NONE:
                m.phase, m.next_heartbeat = "stable", self.h.now + 3_000
            else:
                self.on_error(m, error)

    def on_joined(self, m: SimMember, r: object) -> None:
        m.member_id, m.generation = r.member_id, r.generation_id  # type: ignore[attr-defined]
        key = (m.group, m.generation, self.incarnation)
        leader = self.leaders.setdefault(key, r.leader)  # type: ignore[attr-defined]
        assert leader == r.leader, f"two leaders for {key}: {leader} and {r.leader}"  # type: ignore[attr-defined]
        assert m.generation >= self.last_generation.get(m.group, 0)
        self.last_generation[m.group] = m.generation
        assignments = tuple((x.member_id, b"a") for x in r.members)  # type: ignore[attr-defined]
        m.phase = "syncing"
        m.token = self.h.send(
            SyncGroupRequest(m.group, m.generation, m.member_id, m.instance_id, assignments=assignments)
        )

    def on_error(self, m: SimMember, error: Errors) -> None:
        if error is Errors.NONE:
            return
        if error in RESET:
            m.member_id, m.generation = "", -1
        elif error not in REJOIN:
            raise AssertionError(f"unexpected {error!r} for {m}")
        m.phase = "out"

    def crash(self) -> None:
        """The partition actor dies: the new one replays the durable log."""
        self.h.absorb(self.h.shard.unload(self.h.now))
        shard = Shard(self.h.shard.config, member_id_seed=self.rng.randrange(2**32))
        shard.replay_many(self.h.log)
        self.h.shard = shard
        self.h.absorb(shard.on_loaded(self.h.now))
        self.incarnation += 1
        self.last_generation.clear()

    # ----------------------------------------------------------- checks

    def check_structure(self) -> None:
        for group in self.h.shard.groups.values():
            assert not (group.pending_members & set(group.members)), "pending and active"
            assert group.num_awaiting_join == sum(m.is_awaiting_join for m in group.members.values())
            assert group.leader_id is None or group.leader_id in group.members
            assert all(
                group.members[mid].group_instance_id == iid for iid, mid in group.static_members.items()
            )
            assert group.size <= 60

    def check_offsets(self) -> None:
        for (group, partition), offset in self.committed.items():
            fetched = self.h.call(OffsetFetchRequest(group, (("t", partition),))).offsets()
            assert fetched[("t", partition)] == offset


def seeds(default: list[int]) -> list[int]:
    env = os.environ.get("SIM_SEED")
    return [int(env)] if env else default


@pytest.mark.parametrize("seed", seeds([1, 2, 3]))
def test_simulation_many_members(seed: int) -> None:
    try:
        Simulation(seed, members=200, groups=8).run(duration_ms=15 * 60_000)
    except AssertionError as exc:
        raise AssertionError(f"simulation failed with SIM_SEED={seed}: {exc}") from exc


@pytest.mark.parametrize("seed", seeds([11]))
def test_simulation_hours(seed: int) -> None:
    try:
        Simulation(seed, members=40, groups=3).run(duration_ms=3 * 3_600_000, tick_ms=1_000)
    except AssertionError as exc:
        raise AssertionError(f"simulation failed with SIM_SEED={seed}: {exc}") from exc
