"""A seeded simulation of consumer group members on the Shard: joins, heartbeats with lost
responses, leaves, silent crashes, growing and new topics, static members, regex subscriptions
and coordinator crashes
(rebuilt from its records). After every step no partition is owned by two members of the group,
and a rebuilt shard equals the live one. A failure names its seed."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from uuid import UUID

import pytest

from coordinator import CoordinatorConfig, Shard
from coordinator.consumer import ConsumerGroup
from coordinator.errors import Errors
from coordinator.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupTopicPartitions

from tests.consumer.group_history import state

GROUP = "g"
SEEDS = range(12)
STEPS = 400


@dataclass
class Client:
    member_id: str
    instance_id: str | None
    epoch: int = 0
    owned: dict[UUID, frozenset[int]] = field(default_factory=dict)
    alive: bool = True
    regex: str | None = None

    def request(self, topics: tuple[str, ...]) -> ConsumerGroupHeartbeatRequest:
        owned = tuple(ConsumerGroupTopicPartitions(t, tuple(sorted(p))) for t, p in self.owned.items() if p)
        if self.epoch == 0:
            names = None if self.regex is not None else topics
            return ConsumerGroupHeartbeatRequest(
                GROUP, self.member_id, 0, self.instance_id, None, 20_000, names, self.regex, None, ()
            )
        return ConsumerGroupHeartbeatRequest(
            GROUP, self.member_id, self.epoch, self.instance_id, topic_partitions=owned
        )


class Simulation:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.config = CoordinatorConfig()
        self.shard = Shard(self.config, member_id_seed=seed)
        self.log: list = []
        self.now = 0
        self.counts = {"a": 3, "b": 2}
        self.clients: list[Client] = []
        self.absorb(self.shard.on_loaded(self.now).records)
        self.absorb(self.shard.update_topics(self.counts, self.now).records)

    def absorb(self, records: list) -> None:
        self.log += records

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.08 and len(self.clients) < 8:
            static = self.rng.random() < 0.3
            n = len(self.clients)
            regex = self.rng.choice([None, None, "a|c", "[a-z]"])
            self.clients.append(Client(f"m{n}", f"i{n}" if static else None, regex=regex))
        elif roll < 0.70 and self.clients:
            self.heartbeat(self.rng.choice(self.clients))
        elif roll < 0.75 and self.clients:
            self.leave(self.rng.choice(self.clients))
        elif roll < 0.78 and self.clients:
            self.rng.choice(self.clients).alive = False  # crashes silently: the session timer fences it
        elif roll < 0.81:
            topic = self.rng.choice(["a", "b", "c"])
            self.counts[topic] = self.counts.get(topic, 0) + 1
            self.absorb(self.shard.update_topics(self.counts, self.now).records)
        elif roll < 0.83:
            self.reload()
        else:
            self.now += self.rng.randrange(0, 20_000)
            for result in self.shard.poll_timers(self.now):
                assert not result.responses
                self.absorb(result.records)

    def heartbeat(self, client: Client) -> None:
        if not client.alive:
            return
        result = self.shard.handle(client.request(("a", "b")), self.now, "t")
        self.absorb(result.records)
        ((_, response),) = result.responses
        if self.rng.random() < 0.1:
            return  # the response is lost
        if response.error in (
            Errors.FENCED_MEMBER_EPOCH,
            Errors.UNKNOWN_MEMBER_ID,
            Errors.GROUP_ID_NOT_FOUND,
        ):
            client.epoch, client.owned = 0, {}
            return
        if response.error is not Errors.NONE:
            assert response.error is Errors.UNRELEASED_INSTANCE_ID, response
            return
        client.epoch = response.member_epoch
        if response.assignment is not None:
            client.owned = {t.topic_id: frozenset(t.partitions) for t in response.assignment}

    def leave(self, client: Client) -> None:
        if not client.alive or client.epoch == 0:
            return
        epoch = -2 if client.instance_id is not None and self.rng.random() < 0.5 else -1
        request = ConsumerGroupHeartbeatRequest(GROUP, client.member_id, epoch, client.instance_id)
        result = self.shard.handle(request, self.now, "t")
        self.absorb(result.records)
        client.epoch, client.owned = 0, {}
        if client.instance_id is not None:
            client.member_id += "+"  # a restarted static member comes back under a new member id

    def reload(self) -> None:
        rebuilt = Shard(self.config, member_id_seed=0)
        rebuilt.replay_many(self.log)
        assert state(rebuilt.consumer_groups) == state(self.shard.consumer_groups)
        self.shard = rebuilt
        self.absorb(rebuilt.on_loaded(self.now).records)
        self.absorb(rebuilt.update_topics(self.counts, self.now).records)

    def check(self) -> None:
        group: ConsumerGroup | None = self.shard.consumer_groups.get(GROUP)
        if group is None:
            return
        seen: set[tuple[UUID, int]] = set()
        for member in group.members.values():
            for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
                for topic_id, partitions in assignment.items():
                    for partition in partitions:
                        assert (topic_id, partition) not in seen, f"{topic_id}-{partition} owned twice"
                        seen.add((topic_id, partition))


@pytest.mark.parametrize("seed", SEEDS)
def test_no_partition_is_ever_owned_twice_and_replay_equals_live(seed: int) -> None:
    simulation = Simulation(seed)
    try:
        for _ in range(STEPS):
            simulation.step()
            simulation.check()
        simulation.reload()
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}: {exc}") from exc
    group = simulation.shard.consumer_groups.get(GROUP)
    assert group is not None and group.group_epoch > 3, "the simulation is not trivial"
