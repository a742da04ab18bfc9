"""A group's new target assignment, and which members' targets changed.

Follows Kafka's `modern/TargetAssignmentBuilder.java` (and
`ModernGroup.subscriptionType`) at apache/kafka 1eb7644349cb (2024-10-25).
Given the group's members, one member added, updated or removed, the current
target, the subscription metadata and an assignor, `build_target_assignment`
runs the assignor and returns every member's new target plus, in Kafka's
record order, the members whose target changed. The caller writes one
ConsumerGroupTargetAssignmentMember record per changed member, then
ConsumerGroupTargetAssignmentMetadata(assignment_epoch). A removed member gets
no tombstone here: removing a member writes its own (as in Kafka).

Rules, as Kafka:
- A new static member (instance id held by another member id in
  `static_members`) starts from the target of the member it replaces.
- Subscribed topic names resolve to ids through `topic_ids` (Kafka: the
  metadata image); unknown names are dropped. The assignor fails on a
  resolved topic missing from the subscription metadata.
- A member whose previous target was absent always gets a record, even an
  empty one.
- What the assignor iterates is in Java's order, so its result is Kafka's:
  members as the `HashMap` Kafka fills (group members, then the updates),
  each member's topics as its names' `HashSet`, each assignment's topics as
  the `HashMap` a replayed record builds (see `assignors/java_order.py`).

Departures: ties inside a Java hash bucket follow the order of `members`,
where Kafka's follow its `TimelineHashMap`; the name-to-id resolver defaults
to the subscription metadata when no `topic_ids` is given; the subscription
type, when not given, is computed from the final members (Kafka's heartbeat
computes it from counts that may still include a replaced static member).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from coordinator.consumer.assignors.java_order import (
    grown_capacity,
    hash_order,
    member_map_order,
    name_set_order,
    string_hash,
    topic_map_order,
)
from coordinator.consumer.assignors.spec import (
    EMPTY_ASSIGNMENT,
    Assignment,
    ConsumerGroupPartitionAssignor,
    GroupSpec,
    MemberSpec,
    SubscriptionType,
    TopicMetadata,
)


@dataclass(frozen=True, slots=True)
class TargetMember:
    """What the target assignment reads of a member (Kafka's `ModernGroupMember`)."""

    member_id: str
    subscribed_topic_names: tuple[str, ...] = ()
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class TargetAssignmentResult:
    """The new target: every member's assignment, and the changed ones in record order."""

    assignment_epoch: int
    members: Mapping[str, Assignment]
    changed: tuple[tuple[str, Assignment], ...]


def subscription_type(members: Sequence[TargetMember]) -> SubscriptionType:
    """Kafka's `ModernGroup.subscriptionType`: homogeneous when every member names the same topics."""
    counts = Counter(name for member in members for name in set(member.subscribed_topic_names))
    if all(count == len(members) for count in counts.values()):
        return SubscriptionType.HOMOGENEOUS
    return SubscriptionType.HETEROGENEOUS


def member_spec(
    member: TargetMember,
    assignment: Assignment,
    topic_ids: Mapping[str, UUID],
    resolved: dict[tuple[str, ...], tuple[UUID, ...]] | None = None,
) -> MemberSpec:
    """Kafka's `createMemberSubscriptionAndAssignment`: names resolved, unknown ones dropped.

    `resolved` caches the resolution of each list of names for one `topic_ids`: members
    mostly share their subscriptions, and the assignor runs over every member.
    """
    names = member.subscribed_topic_names
    subscribed = None if resolved is None else resolved.get(names)
    if subscribed is None:
        subscribed = tuple(topic_ids[name] for name in name_set_order(names) if name in topic_ids)
        if resolved is not None:
            resolved[names] = subscribed
    if len(assignment) < 2:
        ordered = dict(assignment)
    else:
        ordered = {topic_id: assignment[topic_id] for topic_id in topic_map_order(assignment)}
    return MemberSpec(member.member_id, subscribed, ordered, member.instance_id, member.rack_id)


def build_target_assignment(
    *,
    group_epoch: int,
    assignor: ConsumerGroupPartitionAssignor,
    members: Sequence[TargetMember],
    target_assignment: Mapping[str, Assignment],
    subscription_metadata: Mapping[str, TopicMetadata],
    updated_members: Mapping[str, TargetMember | None] | None = None,
    static_members: Mapping[str, str] | None = None,
    subscription: SubscriptionType | None = None,
    topic_ids: Mapping[str, UUID] | None = None,
) -> TargetAssignmentResult:
    """Kafka's `TargetAssignmentBuilder.build()`.

    `updated_members` maps a member id to its new version, or to None when it
    is removed; `static_members` maps instance id -> member id. Raises
    `PartitionAssignorError` when the assignor fails.
    """
    updates = updated_members or {}
    resolver = (
        topic_ids if topic_ids is not None else {n: m.topic_id for n, m in subscription_metadata.items()}
    )
    final = _final_members(members, updates)
    specs = []
    resolved: dict[tuple[str, ...], tuple[UUID, ...]] = {}
    for member_id in _spec_order(members, updates):
        member = final[member_id]
        assignment = _starting_assignment(
            member, target_assignment, static_members or {}, member_id in updates
        )
        specs.append(member_spec(member, assignment, resolver, resolved))
    kind = (
        subscription if subscription is not None else subscription_type([final[s.member_id] for s in specs])
    )
    topics = {metadata.topic_id: metadata for metadata in subscription_metadata.values()}
    new_target = assignor.assign(GroupSpec(tuple(specs), kind), topics).members
    changed = []
    for spec in specs:
        new = new_target.get(spec.member_id, EMPTY_ASSIGNMENT)
        old = target_assignment.get(spec.member_id)
        if old is None or dict(new) != dict(old):
            changed.append((spec.member_id, new))
    return TargetAssignmentResult(group_epoch, new_target, tuple(changed))


def _final_members(
    members: Sequence[TargetMember], updates: Mapping[str, TargetMember | None]
) -> dict[str, TargetMember]:
    final = {member.member_id: member for member in members}
    for member_id, updated in updates.items():
        if updated is None:
            final.pop(member_id, None)
        else:
            final[member_id] = updated
    return final


def _starting_assignment(
    member: TargetMember,
    target_assignment: Mapping[str, Assignment],
    static_members: Mapping[str, str],
    updated: bool,
) -> Assignment:
    """The member's current target; a new static member takes over the one it replaces."""
    if updated and member.instance_id is not None:
        previous = static_members.get(member.instance_id)
        if previous is not None and previous != member.member_id:
            return target_assignment.get(previous, EMPTY_ASSIGNMENT)
    return target_assignment.get(member.member_id, EMPTY_ASSIGNMENT)


def _spec_order(members: Sequence[TargetMember], updates: Mapping[str, TargetMember | None]) -> list[str]:
    """The iteration order of Kafka's `memberSpecs` HashMap: members put, then updates put or removed."""
    first_put: dict[str, int] = {}
    for member in members:
        first_put.setdefault(member.member_id, len(first_put))
    live = set(first_put)
    peak = len(live)
    for member_id in member_map_order(list(updates), len(updates)):
        if updates[member_id] is None:
            live.discard(member_id)
            continue
        first_put.setdefault(member_id, len(first_put))
        live.add(member_id)
        peak = max(peak, len(live))
    present = [member_id for member_id in first_put if member_id in live]
    return hash_order(present, string_hash, grown_capacity(peak))
