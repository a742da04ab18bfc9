"""Seeded random groups rebalancing several times, as members would join, leave and come back.

Each round picks the members present, builds their subscriptions the way a
Java consumer would for the assignor in use (sticky: previous assignment and
generation in user data; cooperative: owned partitions and generation), runs
the assignor and remembers what each member now owns. A member that missed
rounds may come back still claiming what it owned then, at its old generation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from coordinator.assignors import ASSIGNORS, MemberSubscription
from coordinator.assignors.sticky_common import encode_cooperative_user_data, encode_sticky_user_data
from coordinator.topic_partition import TopicPartition

POPULATION = [f"consumer-{i:02d}" for i in range(12)]


@dataclass
class MemberState:
    topics: tuple[str, ...]
    instance_id: str | None
    owned: list[TopicPartition] = field(default_factory=list)
    generation: int = -1


@dataclass
class Round:
    members: dict[str, MemberSubscription]
    counts: dict[str, int]
    result: dict[str, list[TopicPartition]]


class GroupSimulation:
    def __init__(
        self, assignor: str, rng: random.Random, same_subscriptions: bool, fresh_only: bool = False
    ) -> None:
        self.assignor = ASSIGNORS[assignor]
        self.rng = rng
        self.same_subscriptions = same_subscriptions
        self.fresh_only = fresh_only
        topics = [f"topic-{i}" for i in range(rng.randrange(1, 5))]
        self.counts = {t: rng.randrange(0, 9) for t in topics}
        shared = tuple(rng.sample(topics, rng.randrange(1, len(topics) + 1)))
        self.states: dict[str, MemberState] = {}
        for member_id in POPULATION:
            chosen = (
                shared if same_subscriptions else tuple(rng.sample(topics, rng.randrange(1, len(topics) + 1)))
            )
            instance = f"instance-{rng.randrange(100):02d}-{member_id}" if rng.random() < 0.3 else None
            self.states[member_id] = MemberState(chosen, instance)
        self.generation = 0

    def subscription(self, member_id: str) -> MemberSubscription:
        state = self.states[member_id]
        owned: tuple[TopicPartition, ...] = ()
        user_data = None
        if self.assignor.name == "sticky" and state.generation >= 0:
            user_data = encode_sticky_user_data(state.owned, state.generation)
        elif self.assignor.name == "cooperative-sticky":
            owned = tuple(state.owned)
            user_data = encode_cooperative_user_data(state.generation)
        return MemberSubscription(
            state.topics,
            owned_partitions=owned,
            generation_id=state.generation,
            group_instance_id=state.instance_id,
            user_data=user_data,
        )

    def next_round(self, members: list[str] | None = None) -> Round:
        if members is None:
            members = self.rng.sample(POPULATION, self.rng.randrange(1, 9))
        subscriptions = {m: self.subscription(m) for m in members}
        result = self.assignor.assign(subscriptions, self.counts)
        self.generation += 1
        for member_id, partitions in result.items():
            state = self.states[member_id]
            if not self.fresh_only:
                state.owned = list(partitions)
                state.generation = self.generation
        return Round(subscriptions, dict(self.counts), result)
