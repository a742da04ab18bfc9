"""The server-side range assignor against Kafka's `RangeAssignorTest` (apache/kafka 1eb7644349cb).

Kafka's test draws its topic ids with `Uuid.randomUuid()`, so the expected
assignments hold for any ids: every row runs with ids from several seeds.
"""

from __future__ import annotations

import random
from uuid import UUID

import pytest

from coordinator.consumer.assignors import GroupSpec, MemberSpec, RangeAssignor, SubscriptionType

from tests.consumer.kafka_cases import (
    HETEROGENEOUS,
    HOMOGENEOUS,
    AssignorCase,
    check_case,
    member,
    mk_assignment,
    random_uuid,
    topic_metadata,
    tp,
    tree_members,
)

ASSIGNOR = RangeAssignor()
SEEDS = [1, 2, 3, 4]


def kafka_cases(t1: UUID, t2: UUID, t3: UUID) -> list[AssignorCase]:
    return [
        AssignorCase("testOneMemberNoTopic", {t1: 3}, (member("A"),), HOMOGENEOUS, {"A": {}}),
        AssignorCase("testOneMemberSubscribedToNonExistentTopic", {t1: 3}, (member("A", [t2]),), HOMOGENEOUS),
        AssignorCase(
            "testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions",
            {t1: 3, t3: 2},
            tree_members(member("A", [t1, t3]), member("B", [t1, t3])),
            HOMOGENEOUS,
            {"A": mk_assignment(tp(t1, 0, 1), tp(t3, 0)), "B": mk_assignment(tp(t1, 2), tp(t3, 1))},
        ),
        AssignorCase(
            "testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions",
            {t1: 3, t2: 3, t3: 2},
            tree_members(member("A", [t1, t2]), member("B", [t3]), member("C", [t2, t3])),
            HETEROGENEOUS,
            {
                "A": mk_assignment(tp(t1, 0, 1, 2), tp(t2, 0, 1)),
                "B": mk_assignment(tp(t3, 0)),
                "C": mk_assignment(tp(t2, 2), tp(t3, 1)),
            },
        ),
        AssignorCase(
            "testFirstAssignmentNumMembersGreaterThanNumPartitions",
            {t1: 3, t3: 2},
            tree_members(member("A", [t1, t3]), member("B", [t1, t3]), member("C", [t1, t3])),
            HOMOGENEOUS,
            {
                "A": mk_assignment(tp(t1, 0), tp(t3, 0)),
                "B": mk_assignment(tp(t1, 1), tp(t3, 1)),
                "C": mk_assignment(tp(t1, 2)),
            },
        ),
        AssignorCase(
            "testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded",
            {t1: 2, t2: 2},
            tree_members(
                member("A", [t1, t2], mk_assignment(tp(t1, 0), tp(t2, 0))),
                member("B", [t1, t2], mk_assignment(tp(t1, 1), tp(t2, 1))),
                member("C", [t1, t2]),
            ),
            HOMOGENEOUS,
            {"A": mk_assignment(tp(t1, 0), tp(t2, 0)), "B": mk_assignment(tp(t1, 1), tp(t2, 1)), "C": {}},
        ),
        AssignorCase(
            "testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics",
            {t1: 4, t2: 4},
            tree_members(
                member("A", [t1, t2], mk_assignment(tp(t1, 0, 1), tp(t2, 0, 1))),
                member("B", [t1, t2], mk_assignment(tp(t1, 2), tp(t2, 2))),
            ),
            HOMOGENEOUS,
            {"A": mk_assignment(tp(t1, 0, 1), tp(t2, 0, 1)), "B": mk_assignment(tp(t1, 2, 3), tp(t2, 2, 3))},
        ),
        AssignorCase(
            "testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics",
            {t1: 3, t2: 3},
            tree_members(
                member("A", [t1, t2], mk_assignment(tp(t1, 0, 1), tp(t2, 0, 1))),
                member("B", [t1, t2], mk_assignment(tp(t1, 2), tp(t2, 2))),
                member("C", [t1, t2]),
            ),
            HOMOGENEOUS,
            {
                "A": mk_assignment(tp(t1, 0), tp(t2, 0)),
                "B": mk_assignment(tp(t1, 1), tp(t2, 1)),
                "C": mk_assignment(tp(t1, 2), tp(t2, 2)),
            },
        ),
        AssignorCase(
            "testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics",
            {t1: 4, t2: 3},
            tree_members(
                member("A", [t1, t2], mk_assignment(tp(t1, 0, 1), tp(t2, 0, 1))),
                member("B", [t1, t2], mk_assignment(tp(t1, 2), tp(t2, 2))),
                member("C", [t1]),
            ),
            HETEROGENEOUS,
            {
                "A": mk_assignment(tp(t1, 0, 1), tp(t2, 0, 1)),
                "B": mk_assignment(tp(t1, 2), tp(t2, 2)),
                "C": mk_assignment(tp(t1, 3)),
            },
        ),
        AssignorCase(
            "testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
            {t1: 3, t2: 3},
            tree_members(member("B", [t1, t2], mk_assignment(tp(t1, 2), tp(t2, 2)))),
            HOMOGENEOUS,
            {"B": mk_assignment(tp(t1, 0, 1, 2), tp(t2, 0, 1, 2))},
        ),
        AssignorCase(
            "testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics",
            {t1: 3, t2: 3, t3: 2},
            tree_members(
                member("A", [t1], mk_assignment(tp(t1, 0, 1, 2), tp(t2, 0))),
                member("B", [t1, t2, t3], mk_assignment(tp(t2, 1))),
                member("C", [t2], mk_assignment(tp(t2, 2), tp(t3, 0, 1))),
            ),
            HETEROGENEOUS,
            {
                "A": mk_assignment(tp(t1, 0, 1)),
                "B": mk_assignment(tp(t1, 2), tp(t2, 0, 1), tp(t3, 0, 1)),
                "C": mk_assignment(tp(t2, 2)),
            },
        ),
    ]


def _topic_ids(seed: int) -> tuple[UUID, UUID, UUID]:
    rng = random.Random(seed)
    return random_uuid(rng), random_uuid(rng), random_uuid(rng)


CASES = [(seed, case) for seed in SEEDS for case in kafka_cases(*_topic_ids(seed))]


@pytest.mark.parametrize(("seed", "case"), CASES, ids=[f"{case.name}-seed{seed}" for seed, case in CASES])
def test_kafka_case(seed: int, case: AssignorCase) -> None:
    check_case(ASSIGNOR, case)


def _assign(members: dict[str, MemberSpec], counts: dict[UUID, int]) -> dict[str, dict[UUID, frozenset[int]]]:
    spec = GroupSpec(tree_members(*members.values()), SubscriptionType.HOMOGENEOUS)
    result = ASSIGNOR.assign(spec, topic_metadata(counts))
    return {member_id: dict(assignment) for member_id, assignment in result.members.items()}


@pytest.mark.parametrize("seed", SEEDS)
def test_static_membership(seed: int) -> None:
    """Kafka's `testStaticMembership`: a static member back under a new id keeps its partitions."""
    t1 = _topic_ids(seed)[0]
    members = {
        "A": member("A", [t1], instance_id="instanceA"),
        "B": member("B", [t1], instance_id="instanceB"),
    }
    initial = _assign(members, {t1: 3})
    del members["A"]
    members["memberA1"] = member("memberA1", [t1], instance_id="instanceA")
    again = _assign(members, {t1: 3})
    assert again["memberA1"] == initial["A"]
    assert again["B"] == initial["B"]


@pytest.mark.parametrize("seed", SEEDS)
def test_mixed_static_membership(seed: int) -> None:
    """Kafka's `testMixedStaticMembership`: static members A, C and dynamic B; A comes back as memberA1."""
    t1 = _topic_ids(seed)[0]
    members = {
        "A": member("A", [t1], instance_id="instanceA"),
        "C": member("C", [t1], instance_id="instanceC"),
        "B": member("B", [t1]),
    }
    initial = _assign(members, {t1: 5})
    del members["A"]
    members["memberA1"] = member("memberA1", [t1], instance_id="instanceA")
    again = _assign(members, {t1: 5})
    assert again["memberA1"] == initial["A"]
    assert again["B"] == initial["B"]
    assert again["C"] == initial["C"]
