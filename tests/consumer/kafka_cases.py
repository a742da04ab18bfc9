"""Helpers to write Kafka's group-coordinator test cases as table rows.

They mirror `AssignmentTestUtil` (mkAssignment, mkOrderedAssignment,
mkTopicAssignment) and the Java collections Kafka's tests build, so a ported
case feeds our code the same iteration orders Kafka's code saw:
- `mk_assignment` is a `HashMap`: Java's order (`java_order.topic_map_order`);
- `mk_ordered_assignment` is a `LinkedHashMap`: the order written;
- `tree_members` is a `TreeMap<String, ...>`: members sorted by id.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

from coordinator.consumer.assignors import (
    Assignment,
    ConsumerGroupPartitionAssignor,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    SubscriptionType,
    TopicMetadata,
)
from coordinator.consumer.assignors.java_order import java_string_key, topic_map_order

HOMOGENEOUS = SubscriptionType.HOMOGENEOUS
HETEROGENEOUS = SubscriptionType.HETEROGENEOUS

TopicAssignment = tuple[UUID, frozenset[int]]


def kafka_uuid(text: str) -> UUID:
    """Kafka's `Uuid.fromString`: URL-safe base64 of the 16 bytes, unpadded."""
    return UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def random_uuid(rng: random.Random) -> UUID:
    """A `Uuid.randomUuid()` stand-in, seeded so a failure reproduces."""
    return UUID(int=rng.getrandbits(128) | 1)


# The fixed ids of Kafka's OptimizedUniformAssignmentBuilderTest and its heterogeneous twin.
T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")
TOPIC_NAMES = {T1: "topic1", T2: "topic2", T3: "topic3", T4: "topic4"}


def tp(topic_id: UUID, *partitions: int) -> TopicAssignment:
    """Kafka's `mkTopicAssignment`."""
    return topic_id, frozenset(partitions)


def mk_assignment(*entries: TopicAssignment) -> dict[UUID, frozenset[int]]:
    """Kafka's `mkAssignment`: a `HashMap`, so Java's iteration order."""
    by_topic = dict(entries)
    return {topic_id: by_topic[topic_id] for topic_id in topic_map_order(by_topic)}


def mk_ordered_assignment(*entries: TopicAssignment) -> dict[UUID, frozenset[int]]:
    """Kafka's `mkOrderedAssignment`: a `LinkedHashMap`, so the order written."""
    return dict(entries)


def member(
    member_id: str,
    subscribed: Iterable[UUID] = (),
    assignment: Assignment | None = None,
    instance_id: str | None = None,
) -> MemberSpec:
    return MemberSpec(member_id, tuple(subscribed), assignment or {}, instance_id=instance_id)


def tree_members(*members: MemberSpec) -> tuple[MemberSpec, ...]:
    """A `TreeMap<String, ...>` of members: sorted by member id."""
    return tuple(sorted(members, key=lambda m: java_string_key(m.member_id)))


def topic_metadata(counts: Mapping[UUID, int]) -> dict[UUID, TopicMetadata]:
    return {
        topic_id: TopicMetadata(topic_id, TOPIC_NAMES.get(topic_id, f"topic-{topic_id}"), count)
        for topic_id, count in counts.items()
    }


@dataclass(frozen=True, slots=True)
class AssignorCase:
    """One Kafka assignor test: inputs and the expected assignment, or `None` when Kafka throws."""

    name: str
    counts: Mapping[UUID, int]
    members: tuple[MemberSpec, ...]
    subscription_type: SubscriptionType
    expected: Mapping[str, Mapping[UUID, frozenset[int]]] | None = field(default=None)


def run_assignor(
    assignor: ConsumerGroupPartitionAssignor, case: AssignorCase
) -> dict[str, dict[UUID, frozenset[int]]]:
    spec = GroupSpec(case.members, case.subscription_type)
    result = assignor.assign(spec, topic_metadata(case.counts))
    return {member_id: dict(assignment) for member_id, assignment in result.members.items()}


def check_case(assignor: ConsumerGroupPartitionAssignor, case: AssignorCase) -> None:
    if case.expected is None:
        try:
            run_assignor(assignor, case)
        except PartitionAssignorError:
            return
        raise AssertionError(f"{case.name}: Kafka throws PartitionAssignorException")
    assert run_assignor(assignor, case) == {m: dict(a) for m, a in case.expected.items()}, case.name


def check_valid_and_balanced(members: tuple[MemberSpec, ...], result: Mapping[str, Assignment]) -> None:
    """Kafka's `checkValidityAndBalance`: subscribed topics only, no partition twice, sizes within one."""
    subscriptions = {m.member_id: m.subscribed_topic_ids for m in members}
    owned: set[tuple[UUID, int]] = set()
    sizes = []
    for member_id, assignment in result.items():
        assert set(assignment) <= set(subscriptions[member_id]), member_id
        for topic_id, partitions in assignment.items():
            for partition in partitions:
                assert (topic_id, partition) not in owned, (member_id, topic_id, partition)
                owned.add((topic_id, partition))
        sizes.append(sum(len(ps) for ps in assignment.values()))
    assert not sizes or max(sizes) - min(sizes) <= 1, sizes
