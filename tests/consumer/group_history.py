"""A seeded history of consumer groups, written as Kafka's heartbeats would write their records.

Not the heartbeat handler (that comes next): a test driver that changes groups
only by building records with `coordinator.consumer.records` and replaying
them, one batch per operation, as the coordinator will. Members join (by
names or by a regex), heartbeat (acknowledging revocations or not), leave;
empty groups are deleted; offset commits are mixed in. Each join and leave
bumps the group epoch, writes new subscription metadata when it changed, and
the next heartbeat computes a new target (the group's preferred assignor)
and reconciles the member, so partitions move between members with their
partition epochs.
"""

from __future__ import annotations

import random
from uuid import UUID

from coordinator.consumer import ConsumerGroup, ConsumerGroupMember, ResolvedRegularExpression, TopicMetadata
from coordinator.consumer import records as helpers
from coordinator.consumer.assignors import ASSIGNORS, DEFAULT_ASSIGNOR_NAME
from coordinator.consumer.reconciliation import reconcile
from coordinator.consumer.replay import replay
from coordinator.consumer.target import TargetMember, build_target_assignment
from coordinator.records import OffsetCommitKey, OffsetCommitValue, Record

TOPICS = {
    "foo": TopicMetadata(UUID(int=0xF00), "foo", 6),
    "bar": TopicMetadata(UUID(int=0xBA4), "bar", 3),
    "baz": TopicMetadata(UUID(int=0xBA2), "baz", 2),
}
REGEXES = {"ba.*": frozenset({"bar", "baz"}), "f.*": frozenset({"foo"})}
GROUP_IDS = ("g0", "g1")


class History:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.groups: dict[str, ConsumerGroup] = {}
        self.batches: list[list[Record]] = []
        self.owned: dict[str, dict[UUID, frozenset[int]]] = {}
        self._batch: list[Record] = []
        self._joined = 0
        self._clock_ms = 1_700_000_000_000

    def run(self, steps: int) -> History:
        for _ in range(steps):
            group_id = self.rng.choice(GROUP_IDS)
            group = self.groups.get(group_id)
            members = sorted(group.members) if group is not None else []
            roll = self.rng.random()
            if roll < 0.25 or not members:
                self.join(group_id)
            elif roll < 0.45:
                self.leave(group_id, self.rng.choice(members))
            else:
                self.heartbeat(group_id, self.rng.choice(members))
            if self.rng.random() < 0.3:
                self.emit(commit(group_id, self.rng.randrange(3), self.rng.randrange(1000)))
            group = self.groups.get(group_id)
            if group is not None and not group.members and self.rng.random() < 0.5:
                for record in helpers.group_tombstone_records(group):
                    self.emit(record)
            self.flush()
        return self

    # ------------------------------------------------------------ operations

    def join(self, group_id: str) -> None:
        member_id = f"m{self._joined}"
        self._joined += 1
        regex = self.rng.choice([None, None, *REGEXES])
        names = frozenset() if regex else frozenset(self.rng.sample(sorted(TOPICS), self.rng.randint(1, 2)))
        member = ConsumerGroupMember(
            member_id, instance_id=self.rng.choice([None, f"i-{member_id}"]), client_id="client",
            client_host="/127.0.0.1", subscribed_topic_names=names, subscribed_topic_regex=regex or "",
            server_assignor_name=self.rng.choice([None, "uniform", "range"]), rebalance_timeout_ms=30_000,
        )
        self.emit(helpers.member_subscription_record(group_id, member))
        group = self.groups[group_id]
        if regex is not None and regex not in group.resolved_regular_expressions:
            resolved = ResolvedRegularExpression(REGEXES[regex], 1, self._clock_ms)
            self.emit(helpers.regular_expression_record(group_id, regex, resolved))
        self.bump(group_id)
        self.owned[member_id] = {}
        self.heartbeat(group_id, member_id)

    def leave(self, group_id: str, member_id: str) -> None:
        group = self.groups[group_id]
        regex = group.members[member_id].subscribed_topic_regex_or_none
        self.emit(helpers.current_assignment_tombstone(group_id, member_id))
        self.emit(helpers.target_assignment_tombstone(group_id, member_id))
        self.emit(helpers.member_subscription_tombstone(group_id, member_id))
        if regex is not None and group.num_subscribed_members(regex) == 0:
            self.emit(helpers.regular_expression_tombstone(group_id, regex))
        del self.owned[member_id]
        self.bump(group_id)

    def heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups[group_id]
        if group.group_epoch > group.assignment_epoch:
            self.assign(group)
        member = group.members[member_id]
        owned = None if self.rng.random() < 0.1 else list(self.owned[member_id].items())
        state = reconcile(
            member.assignment_state, group.assignment_epoch, group.target_assignment_of(member_id),
            group.current_partition_epoch, owned,
        )
        if state != member.assignment_state:
            self.emit(helpers.current_assignment_record(group_id, member.with_assignment_state(state)))
        if self.rng.random() < 0.8:
            # The client adopts its assignment (revoking the rest) before its next heartbeat.
            self.owned[member_id] = dict(group.members[member_id].assigned_partitions)

    def bump(self, group_id: str) -> None:
        group = self.groups[group_id]
        metadata = {name: TOPICS[name] for name in group.subscribed_topic_names if name in TOPICS}
        if metadata != group.subscription_metadata:
            self.emit(helpers.subscription_metadata_record(group_id, metadata))
        self.emit(helpers.epoch_record(group_id, group.group_epoch + 1))

    def assign(self, group: ConsumerGroup) -> None:
        members = [target_member(group, member) for member in group.members.values()]
        assignor = ASSIGNORS[group.preferred_server_assignor() or DEFAULT_ASSIGNOR_NAME]
        result = build_target_assignment(
            group_epoch=group.group_epoch, assignor=assignor, members=members,
            target_assignment=group.target_assignment, subscription_metadata=group.subscription_metadata,
        )
        for member_id, assignment in result.changed:
            self.emit(helpers.target_assignment_record(group.group_id, member_id, assignment))
        self.emit(helpers.target_assignment_epoch_record(group.group_id, result.assignment_epoch))

    # --------------------------------------------------------------- output

    def emit(self, record: Record) -> None:
        if type(record.key) is not OffsetCommitKey:
            replay(self.groups, record)
        self._batch.append(record)

    def flush(self) -> None:
        if self._batch:
            self.batches.append(self._batch)
            self._batch = []
            self._clock_ms += 1


def target_member(group: ConsumerGroup, member: ConsumerGroupMember) -> TargetMember:
    """The topics a member subscribes to, by name or through its resolved regex."""
    regex = member.subscribed_topic_regex_or_none
    resolved = group.resolved_regular_expressions.get(regex) if regex is not None else None
    names = member.subscribed_topic_names | (resolved.topics if resolved is not None else frozenset())
    return TargetMember(member.member_id, tuple(sorted(names)), member.instance_id, member.rack_id)


def commit(group_id: str, partition: int, offset: int) -> Record:
    return Record(OffsetCommitKey(group_id, "orders", partition), OffsetCommitValue(offset, 1, "", offset))


class Replayed:
    """A load target: consumer group records replayed into groups, the rest ignored."""

    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroup] = {}

    def replay_many(self, records: object) -> None:
        for record in records:  # type: ignore[attr-defined]
            if type(record.key) is not OffsetCommitKey:
                replay(self.groups, record)


def state(groups: dict[str, ConsumerGroup]) -> dict[str, dict[str, object]]:
    """Everything a group holds, hard and derived state alike."""
    return {group_id: vars(group) for group_id, group in groups.items()}
