"""The target assignment against Kafka's `TargetAssignmentBuilderTest` (apache/kafka 1eb7644349cb).

Kafka's test mocks the assignor, returns a prepared assignment and verifies
the group spec the assignor was given; `RecordingAssignor` does the same.
Kafka's records are our `changed` entries (unordered in Kafka's test too)
followed by the assignment epoch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

import pytest

from coordinator.consumer.assignors import (
    Assignment,
    GroupAssignment,
    GroupSpec,
    SubscriptionType,
    TopicMetadata,
    UniformAssignor,
)
from coordinator.consumer.assignors.java_order import member_map_order
from coordinator.consumer.target import (
    TargetAssignmentResult,
    TargetMember,
    build_target_assignment,
    member_spec,
    subscription_type,
)

from tests.consumer.kafka_cases import mk_assignment, tp

FOO = UUID("00000000-0000-4000-8000-0000000000f0")
BAR = UUID("00000000-0000-4000-8000-0000000000ba")


@dataclass
class RecordingAssignor:
    """Kafka's mocked `PartitionAssignor`: returns what was prepared, remembers what it was given."""

    prepared: dict[str, Assignment] = field(default_factory=dict)
    calls: list[tuple[GroupSpec, Mapping[UUID, TopicMetadata]]] = field(default_factory=list)
    name: str = "mock"

    def assign(self, group: GroupSpec, topics: Mapping[UUID, TopicMetadata]) -> GroupAssignment:
        self.calls.append((group, topics))
        return GroupAssignment(dict(self.prepared))


@dataclass
class Context:
    """Kafka's `TargetAssignmentBuilderTestContext` for group "my-group" at epoch 20."""

    members: dict[str, TargetMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    updated: dict[str, TargetMember | None] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)
    assignor: RecordingAssignor = field(default_factory=RecordingAssignor)

    def add_topic(self, name: str, topic_id: UUID, partitions: int) -> None:
        self.metadata[name] = TopicMetadata(topic_id, name, partitions)

    def add_member(
        self, member_id: str, names: list[str], target: Assignment, instance: str | None = None
    ) -> None:
        self.members[member_id] = TargetMember(member_id, tuple(names), instance)
        if instance is not None:
            self.static[instance] = member_id
        self.target[member_id] = target

    def update_member(
        self, member_id: str, names: list[str], instance: str | None = None, rack: str | None = None
    ) -> None:
        existing = self.members.get(member_id, TargetMember(member_id))
        self.updated[member_id] = TargetMember(
            member_id, tuple(names), instance or existing.instance_id, rack or existing.rack_id
        )

    def build(self) -> TargetAssignmentResult:
        result = build_target_assignment(
            group_epoch=20,
            assignor=self.assignor,
            members=list(self.members.values()),
            target_assignment=self.target,
            subscription_metadata=self.metadata,
            updated_members=self.updated,
            static_members=self.static,
            subscription=SubscriptionType.HOMOGENEOUS,
        )
        self.verify_assignor_input()
        return result

    def verify_assignor_input(self) -> None:
        """Kafka's `verify(assignor).assign(groupSpec, subscribedTopicMetadata)`."""
        final = {**self.members, **{m: u for m, u in self.updated.items() if u is not None}}
        for member_id, update in self.updated.items():
            if update is None:
                del final[member_id]
        ids = {name: metadata.topic_id for name, metadata in self.metadata.items()}
        expected = {}
        for member_id, member in final.items():
            assignment = self.target.get(member_id, {})
            previous = self.static.get(member.instance_id or "")
            if member_id in self.updated and previous not in (None, member_id):
                assignment = self.target.get(previous or "", {})
            subscribed = {ids[n] for n in member.subscribed_topic_names if n in ids}
            expected[member_id] = (subscribed, dict(assignment), member.instance_id, member.rack_id)
        ((group, topics),) = self.assignor.calls
        got = {
            s.member_id: (set(s.subscribed_topic_ids), dict(s.assignment), s.instance_id, s.rack_id)
            for s in group.members
        }
        assert got == expected
        assert group.subscription_type is SubscriptionType.HOMOGENEOUS
        assert topics == {m.topic_id: m for m in self.metadata.values()}


def context_with_foo_bar() -> Context:
    context = Context()
    context.add_topic("foo", FOO, 6)
    context.add_topic("bar", BAR, 6)
    return context


def as_plain(changed: tuple[tuple[str, Assignment], ...]) -> dict[str, dict[UUID, frozenset[int]]]:
    plain = {member_id: dict(assignment) for member_id, assignment in changed}
    assert len(plain) == len(changed), "one record per member"
    return plain


def test_create_member_subscription_spec() -> None:
    """Kafka's `testCreateMemberSubscriptionSpecImpl`: the unknown topic "zar" is dropped."""
    member = TargetMember("member-id", ("foo", "bar", "zar"), "instanceId", "rackId")
    assignment = mk_assignment(tp(FOO, 1, 2, 3), tp(BAR, 1, 2, 3))
    spec = member_spec(member, assignment, {"foo": FOO, "bar": BAR})
    assert set(spec.subscribed_topic_ids) == {FOO, BAR}
    assert (spec.member_id, dict(spec.assignment), spec.instance_id, spec.rack_id) == (
        "member-id",
        assignment,
        "instanceId",
        "rackId",
    )


def test_empty() -> None:
    result = Context().build()
    assert result == TargetAssignmentResult(20, {}, ())


def test_assignment_has_not_changed() -> None:
    context = context_with_foo_bar()
    first, second = (
        mk_assignment(tp(FOO, 1, 2, 3), tp(BAR, 1, 2, 3)),
        mk_assignment(tp(FOO, 4, 5, 6), tp(BAR, 4, 5, 6)),
    )
    context.add_member("member-1", ["foo", "bar", "zar"], first)
    context.add_member("member-2", ["foo", "bar", "zar"], second)
    context.assignor.prepared = {"member-1": first, "member-2": second}
    result = context.build()
    assert result.changed == ()
    assert result.assignment_epoch == 20
    assert result.members == {"member-1": first, "member-2": second}


def test_assignment_swapped() -> None:
    context = context_with_foo_bar()
    first, second = (
        mk_assignment(tp(FOO, 1, 2, 3), tp(BAR, 1, 2, 3)),
        mk_assignment(tp(FOO, 4, 5, 6), tp(BAR, 4, 5, 6)),
    )
    context.add_member("member-1", ["foo", "bar", "zar"], first)
    context.add_member("member-2", ["foo", "bar", "zar"], second)
    context.assignor.prepared = {"member-2": first, "member-1": second}
    result = context.build()
    assert as_plain(result.changed) == {"member-1": second, "member-2": first}
    assert result.members == {"member-1": second, "member-2": first}


def test_new_member() -> None:
    context = context_with_foo_bar()
    context.add_member("member-1", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 1, 2, 3), tp(BAR, 1, 2, 3)))
    context.add_member("member-2", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 4, 5, 6), tp(BAR, 4, 5, 6)))
    context.update_member("member-3", ["foo", "bar", "zar"])
    prepared = {
        "member-1": mk_assignment(tp(FOO, 1, 2), tp(BAR, 1, 2)),
        "member-2": mk_assignment(tp(FOO, 3, 4), tp(BAR, 3, 4)),
        "member-3": mk_assignment(tp(FOO, 5, 6), tp(BAR, 5, 6)),
    }
    context.assignor.prepared = prepared
    result = context.build()
    assert as_plain(result.changed) == prepared
    assert result.members == prepared


def test_update_member() -> None:
    context = context_with_foo_bar()
    context.add_member("member-1", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 1, 2, 3), tp(BAR, 1, 2)))
    context.add_member("member-2", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 4, 5, 6), tp(BAR, 3, 4)))
    context.add_member("member-3", ["bar", "zar"], mk_assignment(tp(BAR, 5, 6)))
    context.update_member("member-3", ["foo", "bar", "zar"], "instance-id-3", "rack-0")
    prepared = {
        "member-1": mk_assignment(tp(FOO, 1, 2), tp(BAR, 1, 2)),
        "member-2": mk_assignment(tp(FOO, 3, 4), tp(BAR, 3, 4)),
        "member-3": mk_assignment(tp(FOO, 5, 6), tp(BAR, 5, 6)),
    }
    context.assignor.prepared = prepared
    result = context.build()
    assert as_plain(result.changed) == prepared
    assert result.members == prepared


def test_partial_assignment_update() -> None:
    context = context_with_foo_bar()
    context.add_member("member-1", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 1, 2), tp(BAR, 1, 2)))
    context.add_member("member-2", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 3, 4), tp(BAR, 3, 4)))
    context.add_member("member-3", ["bar", "zar"], mk_assignment(tp(FOO, 5, 6), tp(BAR, 5, 6)))
    prepared = {
        "member-1": mk_assignment(tp(FOO, 1, 2), tp(BAR, 1, 2)),
        "member-2": mk_assignment(tp(FOO, 3, 4, 5), tp(BAR, 3, 4, 5)),
        "member-3": mk_assignment(tp(FOO, 6), tp(BAR, 6)),
    }
    context.assignor.prepared = prepared
    result = context.build()
    # Member 1 has no record because its assignment did not change.
    assert as_plain(result.changed) == {"member-2": prepared["member-2"], "member-3": prepared["member-3"]}
    assert result.members == prepared


def test_delete_member() -> None:
    context = context_with_foo_bar()
    context.add_member("member-1", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 1, 2), tp(BAR, 1, 2)))
    context.add_member("member-2", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 3, 4), tp(BAR, 3, 4)))
    context.add_member("member-3", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 5, 6), tp(BAR, 5, 6)))
    context.updated["member-3"] = None
    prepared = {
        "member-1": mk_assignment(tp(FOO, 1, 2, 3), tp(BAR, 1, 2, 3)),
        "member-2": mk_assignment(tp(FOO, 4, 5, 6), tp(BAR, 4, 5, 6)),
    }
    context.assignor.prepared = prepared
    result = context.build()
    assert as_plain(result.changed) == prepared
    assert result.members == prepared


def test_replace_static_member() -> None:
    context = context_with_foo_bar()
    context.add_member(
        "member-1", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 1, 2), tp(BAR, 1, 2)), "instance-member-1"
    )
    context.add_member(
        "member-2", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 3, 4), tp(BAR, 3, 4)), "instance-member-2"
    )
    context.add_member(
        "member-3", ["foo", "bar", "zar"], mk_assignment(tp(FOO, 5, 6), tp(BAR, 5, 6)), "instance-member-3"
    )
    # Static member 3 leaves; another joins with the same instance id and inherits its target.
    context.updated["member-3"] = None
    context.update_member("member-3-a", ["foo", "bar", "zar"], "instance-member-3")
    prepared = {
        "member-1": mk_assignment(tp(FOO, 1, 2), tp(BAR, 1, 2)),
        "member-2": mk_assignment(tp(FOO, 3, 4), tp(BAR, 3, 4)),
        "member-3-a": mk_assignment(tp(FOO, 5, 6), tp(BAR, 5, 6)),
    }
    context.assignor.prepared = prepared
    result = context.build()
    assert as_plain(result.changed) == {"member-3-a": prepared["member-3-a"]}
    assert result.members == prepared


@pytest.mark.parametrize(
    ("subscriptions", "expected"),
    [
        ([], SubscriptionType.HOMOGENEOUS),
        ([(), ()], SubscriptionType.HOMOGENEOUS),
        ([("foo", "bar"), ("bar", "foo", "foo")], SubscriptionType.HOMOGENEOUS),
        ([("foo", "bar"), ("foo",)], SubscriptionType.HETEROGENEOUS),
        ([("foo", "zar"), ("foo",)], SubscriptionType.HETEROGENEOUS),
    ],
)
def test_subscription_type(subscriptions: list[tuple[str, ...]], expected: SubscriptionType) -> None:
    """Kafka's `ModernGroup.subscriptionType`, by topic names (a missing topic still counts)."""
    members = [TargetMember(f"m{i}", names) for i, names in enumerate(subscriptions)]
    assert subscription_type(members) is expected


def test_with_the_uniform_assignor_a_joining_member_moves_only_what_it_needs() -> None:
    metadata = {"foo": TopicMetadata(FOO, "foo", 6)}
    members = [TargetMember("member-1", ("foo",)), TargetMember("member-2", ("foo",))]
    target = {"member-1": mk_assignment(tp(FOO, 0, 1, 2)), "member-2": mk_assignment(tp(FOO, 3, 4, 5))}
    result = build_target_assignment(
        group_epoch=5,
        assignor=UniformAssignor(),
        members=members,
        target_assignment=target,
        subscription_metadata=metadata,
        updated_members={"member-3": TargetMember("member-3", ("foo",))},
    )
    sizes = {m: len(a.get(FOO, ())) for m, a in result.members.items()}
    assert sizes == {"member-1": 2, "member-2": 2, "member-3": 2}
    for member_id in ("member-1", "member-2"):
        assert result.members[member_id][FOO] <= target[member_id][FOO]
    assert [m for m, _ in result.changed] == member_map_order(["member-1", "member-2", "member-3"], 3)


def test_records_follow_the_member_map_order_across_a_table_resize() -> None:
    """13 members make Kafka's HashMap 32 buckets wide, which reorders m10 and m11 (checked on JDK 17)."""
    metadata = {"foo": TopicMetadata(FOO, "foo", 37)}
    members = [TargetMember(f"m{i}", ("foo",)) for i in range(12)]
    result = build_target_assignment(
        group_epoch=1,
        assignor=UniformAssignor(),
        members=members,
        target_assignment={},
        subscription_metadata=metadata,
        updated_members={"m12": TargetMember("m12", ("foo",))},
    )
    assert [m for m, _ in result.changed] == [f"m{i}" for i in range(10)] + ["m11", "m10", "m12"]
    # 37 = 13 * 2 + 11: the first 11 members in that order get a third partition, so m11 does, m10 not.
    assert len(result.members["m11"][FOO]) == 3
    assert len(result.members["m10"][FOO]) == 2
