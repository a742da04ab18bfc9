"""A seeded simulation of members reconciling through group changes: never two owners, always converges.

Members join and leave and topics grow; each change bumps the group epoch and
the uniform assignor computes a new target from the previous one. Members
heartbeat in random order with the partitions their client holds: a client
adopts what a response gives it (revoking the rest) either at once or just
before its next heartbeat, and sometimes sends no owned list. The coordinator side keeps
partition epochs as Kafka's `ConsumerGroup` does (a member's assigned and
pending-revocation partitions at its epoch) and fails like Kafka's
`addPartitionEpochs` if a partition would get a second owner; the clients'
own holdings must never overlap either.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from uuid import UUID

import pytest

from coordinator.consumer.assignors import (
    Assignment,
    GroupSpec,
    MemberSpec,
    SubscriptionType,
    TopicMetadata,
    UniformAssignor,
)
from coordinator.consumer.reconciliation import MemberAssignmentState, MemberState, maybe_reconcile

TOPIC_IDS = [UUID(int=0xA0 + i) for i in range(2)]
ASSIGNOR = UniformAssignor()


@dataclass
class Client:
    owned: Assignment = field(default_factory=dict)
    adopt_next: Assignment | None = None


@dataclass
class Group:
    rng: random.Random
    counts: dict[UUID, int]
    epoch: int = 0
    members: dict[str, MemberAssignmentState] = field(default_factory=dict)
    clients: dict[str, Client] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    owners: dict[tuple[UUID, int], tuple[str, int]] = field(default_factory=dict)

    def bump(self) -> None:
        self.epoch += 1
        specs = tuple(MemberSpec(m, tuple(self.counts), self.target.get(m, {})) for m in sorted(self.members))
        topics = {t: TopicMetadata(t, f"t{t.int}", n) for t, n in self.counts.items()}
        result = ASSIGNOR.assign(GroupSpec(specs, SubscriptionType.HOMOGENEOUS), topics)
        self.target = {m: result.members.get(m, {}) for m in self.members}

    def partition_epoch(self, topic_id: UUID, partition: int) -> int:
        owner = self.owners.get((topic_id, partition))
        return -1 if owner is None else owner[1]

    def update(self, member_id: str, new: MemberAssignmentState | None) -> None:
        """Kafka's `maybeUpdatePartitionEpoch`: drop the old member's epochs, add the new one's."""
        self.owners = {tp: owner for tp, owner in self.owners.items() if owner[0] != member_id}
        if new is None:
            return
        for assignment in (new.assigned_partitions, new.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    holder = self.owners.get((topic_id, partition))
                    assert holder is None, (
                        f"{topic_id}-{partition} still owned by {holder}, given to {member_id}"
                    )
                    self.owners[(topic_id, partition)] = (member_id, new.member_epoch)

    def heartbeat(self, member_id: str) -> None:
        client = self.clients[member_id]
        if client.adopt_next is not None:
            client.owned, client.adopt_next = client.adopt_next, None
        sent = None if self.rng.random() < 0.2 else list(client.owned.items())
        current = self.members[member_id]
        new = maybe_reconcile(current, self.epoch, self.target[member_id], self.partition_epoch, sent)
        if new != current:
            self.update(member_id, new)
            self.members[member_id] = new
        if self.rng.random() < 0.5:
            client.owned = new.assigned_partitions
        else:
            client.adopt_next = new.assigned_partitions
        self.check_clients_disjoint()

    def check_clients_disjoint(self) -> None:
        """What the clients hold, not only what the coordinator records, never overlaps."""
        held: dict[tuple[UUID, int], str] = {}
        for member_id, client in self.clients.items():
            for topic_id, partitions in client.owned.items():
                for partition in partitions:
                    other = held.setdefault((topic_id, partition), member_id)
                    assert other == member_id, f"{topic_id}-{partition} held by {other} and {member_id}"

    def join(self, member_id: str) -> None:
        self.members[member_id] = MemberAssignmentState(0, -1, MemberState.STABLE)
        self.clients[member_id] = Client()
        self.bump()

    def leave(self, member_id: str) -> None:
        del self.members[member_id], self.clients[member_id]
        self.update(member_id, None)
        self.bump()


def run(seed: int, steps: int) -> Group:
    rng = random.Random(seed)
    group = Group(rng, {t: rng.randint(1, 8) for t in TOPIC_IDS})
    next_id = 0
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.08 or not group.members:
            group.join(f"m{next_id}")
            next_id += 1
        elif roll < 0.13 and len(group.members) > 1:
            group.leave(rng.choice(sorted(group.members)))
        elif roll < 0.16:
            topic_id = rng.choice(TOPIC_IDS)
            group.counts[topic_id] += rng.randint(1, 3)
            group.bump()
        else:
            group.heartbeat(rng.choice(sorted(group.members)))
    return group


@pytest.mark.parametrize("seed", range(40))
def test_no_partition_has_two_owners_and_the_group_converges(seed: int) -> None:
    group = run(seed, 300)
    for _ in range(10):
        for member_id in sorted(group.members):
            group.heartbeat(member_id)
    for member_id, state in group.members.items():
        assert state.is_reconciled_to(group.epoch), (seed, member_id, state)
        assert dict(state.assigned_partitions) == dict(group.target[member_id]), (seed, member_id)
    every = [(t, p) for t, n in group.counts.items() for p in range(n)]
    assert sorted(group.owners) == sorted(every), seed
