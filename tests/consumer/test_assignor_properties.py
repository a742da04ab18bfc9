"""Properties of the server-side assignors on generated groups: valid, balanced, sticky.

Groups are drawn with hypothesis: up to 7 members in any order, up to 4 topics
of up to 12 partitions, and a previous target in which each partition has at
most one owner (possibly a member that no longer subscribes to its topic).
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.consumer.assignors import (
    Assignment,
    GroupSpec,
    MemberSpec,
    RangeAssignor,
    SubscriptionType,
    UniformAssignor,
)

from tests.consumer.kafka_cases import topic_metadata

TOPICS = [UUID(int=(i + 1) * 0x1000_0000_0000_0001_0000_0000_0000_0003) for i in range(4)]
UNIFORM = UniformAssignor()
RANGE = RangeAssignor()


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool) -> tuple[GroupSpec, dict[UUID, int]]:
    counts = {t: draw(st.integers(0, 12)) for t in TOPICS[: draw(st.integers(1, len(TOPICS)))]}
    topic_ids = sorted(counts, key=TOPICS.index)
    ids = draw(st.permutations([f"m{i}" for i in range(draw(st.integers(1, 7)))]))
    shared = draw(st.sets(st.sampled_from(topic_ids), min_size=1))

    def subscription() -> tuple[UUID, ...]:
        chosen = shared if homogeneous else draw(st.sets(st.sampled_from(topic_ids)))
        return tuple(draw(st.permutations(sorted(chosen, key=TOPICS.index))))

    subscriptions = [subscription() for _ in ids]
    owned: list[dict[UUID, set[int]]] = [{} for _ in ids]
    for topic_id, count in counts.items():
        for partition in range(count):
            owner = draw(st.integers(-1, len(ids) - 1))
            if owner >= 0:
                owned[owner].setdefault(topic_id, set()).add(partition)
    members = tuple(
        MemberSpec(member_id, subscribed, {t: frozenset(ps) for t, ps in owned[i].items()})
        for i, (member_id, subscribed) in enumerate(zip(ids, subscriptions))
    )
    kind = SubscriptionType.HOMOGENEOUS if homogeneous else SubscriptionType.HETEROGENEOUS
    return GroupSpec(members, kind), counts


def sizes(result: Mapping[str, Assignment]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def check_complete_and_valid(
    group: GroupSpec, counts: dict[UUID, int], result: Mapping[str, Assignment]
) -> None:
    """Every partition of a subscribed topic goes to exactly one subscriber, nothing else is assigned."""
    subscriptions = {m.member_id: m.subscribed_topic_ids for m in group.members}
    subscribed = {t for topics in subscriptions.values() for t in topics}
    owners: dict[tuple[UUID, int], str] = {}
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            assert topic_id in subscriptions[member_id]
            assert partitions, "empty partition sets are dropped"
            for partition in partitions:
                assert (topic_id, partition) not in owners
                owners[(topic_id, partition)] = member_id
    assert set(owners) == {(t, p) for t in subscribed for p in range(counts[t])}


def kept_previous(member: MemberSpec) -> set[tuple[UUID, int]]:
    return {(t, p) for t, ps in member.assignment.items() if t in member.subscribed_topic_ids for p in ps}


def as_set(assignment: Assignment) -> set[tuple[UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_balanced_and_sticky(drawn: tuple[GroupSpec, dict[UUID, int]]) -> None:
    group, counts = drawn
    result = UNIFORM.assign(group, topic_metadata(counts)).members
    if not result:
        return
    check_complete_and_valid(group, counts, result)
    assert max(sizes(result).values()) - min(sizes(result).values()) <= 1
    smallest = min(sizes(result).values())
    for member in group.members:
        before, after = kept_previous(member), as_set(result[member.member_id])
        # Sticky: a member only gains (keeping all it had) or only loses (down to its quota).
        assert before <= after or (after <= before and len(after) <= smallest + 1)
    assert (
        UNIFORM.assign(
            GroupSpec(_with_targets(group, result), group.subscription_type), topic_metadata(counts)
        ).members
        == result
    )


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_valid_balanced_per_topic_and_stable(
    drawn: tuple[GroupSpec, dict[UUID, int]],
) -> None:
    group, counts = drawn
    result = UNIFORM.assign(group, topic_metadata(counts)).members
    if not result:
        assert not any(m.subscribed_topic_ids for m in group.members)
        return
    check_complete_and_valid(group, counts, result)
    size = sizes(result)
    for topic_id in counts:
        subscribers = [m.member_id for m in group.members if topic_id in m.subscribed_topic_ids]
        holders = [m for m in subscribers if topic_id in result[m]]
        # No partition of the topic could move to a subscriber two or more partitions lighter.
        for holder in holders:
            assert all(size[holder] - size[other] <= 1 for other in subscribers), (topic_id, size)
    again = UNIFORM.assign(
        GroupSpec(_with_targets(group, result), group.subscription_type), topic_metadata(counts)
    )
    assert again.members == result


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_keeps_what_balance_allows(drawn: tuple[GroupSpec, dict[UUID, int]]) -> None:
    """A partition its owner may keep moves only to balance: the new owner ends at most one heavier."""
    group, counts = drawn
    result = UNIFORM.assign(group, topic_metadata(counts)).members
    size = sizes(result)
    owner = {tp: member_id for member_id, assignment in result.items() for tp in as_set(assignment)}
    for member in group.members:
        for moved in kept_previous(member) - as_set(result.get(member.member_id, {})):
            assert size[owner[moved]] <= size[member.member_id] + 1, (moved, size)


@settings(max_examples=200, deadline=None)
@given(st.booleans().flatmap(lambda homogeneous: groups(homogeneous)))
def test_range_contiguous_and_balanced_per_topic(drawn: tuple[GroupSpec, dict[UUID, int]]) -> None:
    group, counts = drawn
    result = RANGE.assign(group, topic_metadata(counts)).members
    assert set(result) == {m.member_id for m in group.members}
    check_complete_and_valid(group, counts, result)
    for topic_id in counts:
        subscribers = [m.member_id for m in group.members if topic_id in m.subscribed_topic_ids]
        held = [len(result[m].get(topic_id, ())) for m in subscribers]
        assert not held or max(held) - min(held) <= 1
        for member_id in subscribers:
            partitions = sorted(result[member_id].get(topic_id, ()))
            assert (
                partitions == list(range(partitions[0], partitions[0] + len(partitions)))
                if partitions
                else True
            )
    if group.subscription_type is SubscriptionType.HOMOGENEOUS and len(set(counts.values())) == 1:
        for assignment in result.values():
            assert len({ps for ps in assignment.values()}) <= 1, "co-partitioned"


def _with_targets(group: GroupSpec, result: Mapping[str, Assignment]) -> tuple[MemberSpec, ...]:
    return tuple(
        MemberSpec(m.member_id, m.subscribed_topic_ids, result.get(m.member_id, {}), m.instance_id)
        for m in group.members
    )
