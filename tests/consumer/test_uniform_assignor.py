"""The uniform assignor against Kafka's own test cases, one table row per Kafka test.

Homogeneous rows: `OptimizedUniformAssignmentBuilderTest`; heterogeneous rows:
`UniformHeterogeneousAssignmentBuilderTest` (apache/kafka 1eb7644349cb,
group-coordinator/src/test/.../assignor/). Member maps are Kafka's `TreeMap`s
(and its `TestGroupSpecImpl` sorts members the same way), assignments its
`mkAssignment` / `mkOrderedAssignment`, so the inputs iterate as in Kafka.
"""

from __future__ import annotations

import random

import pytest

from coordinator.consumer.assignors import GroupSpec, UniformAssignor

from tests.consumer.kafka_cases import (
    HETEROGENEOUS,
    HOMOGENEOUS,
    T1,
    T2,
    T3,
    T4,
    AssignorCase,
    check_case,
    check_valid_and_balanced,
    member,
    mk_assignment,
    mk_ordered_assignment,
    random_uuid,
    topic_metadata,
    tp,
    tree_members,
)

ASSIGNOR = UniformAssignor()

HOMOGENEOUS_CASES = [
    AssignorCase(
        "testOneMemberNoTopicSubscription",
        {T1: 3},
        (member("A"),),
        HOMOGENEOUS,
        {},
    ),
    AssignorCase("testOneMemberSubscribedToNonexistentTopic", {T1: 3}, (member("A", [T2]),), HOMOGENEOUS),
    AssignorCase(
        "testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks",
        {T1: 3, T3: 2},
        tree_members(member("A", [T1, T3]), member("B", [T1, T3])),
        HOMOGENEOUS,
        {"A": mk_assignment(tp(T1, 0), tp(T3, 0, 1)), "B": mk_assignment(tp(T1, 1, 2))},
    ),
    AssignorCase(
        "testFirstAssignmentNumMembersGreaterThanTotalNumPartitions",
        {T3: 2},
        tree_members(member("A", [T3]), member("B", [T3]), member("C", [T3])),
        HOMOGENEOUS,
        {"A": mk_assignment(tp(T3, 0)), "B": mk_assignment(tp(T3, 1)), "C": {}},
    ),
    AssignorCase(
        "testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment",
        {T1: 3, T2: 3},
        tree_members(
            member("A", [T1, T2], mk_ordered_assignment(tp(T1, 0, 1), tp(T2, 0, 1))),
            member("B", [T1, T2], mk_ordered_assignment(tp(T1, 2), tp(T2, 2))),
        ),
        HOMOGENEOUS,
        {"A": mk_assignment(tp(T1, 0, 1), tp(T2, 0)), "B": mk_assignment(tp(T1, 2), tp(T2, 1, 2))},
    ),
    AssignorCase(
        "testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics",
        {T1: 6, T2: 5},
        tree_members(
            member("A", [T1, T2], mk_ordered_assignment(tp(T1, 0, 2), tp(T2, 0))),
            member("B", [T1, T2], mk_ordered_assignment(tp(T1, 1), tp(T2, 1, 2))),
        ),
        HOMOGENEOUS,
        {
            "A": mk_assignment(tp(T1, 0, 2, 3), tp(T2, 0, 3, 4)),
            "B": mk_assignment(tp(T1, 1, 4, 5), tp(T2, 1, 2)),
        },
    ),
    AssignorCase(
        "testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics",
        {T1: 3, T2: 3},
        tree_members(
            member("A", [T1, T2], mk_ordered_assignment(tp(T1, 0, 2), tp(T2, 0))),
            member("B", [T1, T2], mk_ordered_assignment(tp(T1, 1), tp(T2, 1, 2))),
            member("C", [T1, T2]),
        ),
        HOMOGENEOUS,
        {
            "A": mk_assignment(tp(T1, 0, 2)),
            "B": mk_assignment(tp(T1, 1), tp(T2, 1)),
            "C": mk_assignment(tp(T2, 0, 2)),
        },
    ),
    AssignorCase(
        "testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics",
        {T1: 3, T2: 3},
        tree_members(
            member("A", [T1, T2], mk_assignment(tp(T1, 0), tp(T2, 0))),
            member("B", [T1, T2], mk_assignment(tp(T1, 1), tp(T2, 1))),
        ),
        HOMOGENEOUS,
        {"A": mk_assignment(tp(T1, 0), tp(T2, 0, 2)), "B": mk_assignment(tp(T1, 1, 2), tp(T2, 1))},
    ),
    AssignorCase(
        "testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
        {T1: 2, T2: 2},
        tree_members(
            member("A", [T2], mk_assignment(tp(T1, 0), tp(T2, 0))),
            member("B", [T2], mk_assignment(tp(T1, 1), tp(T2, 1))),
        ),
        HOMOGENEOUS,
        {"A": mk_assignment(tp(T2, 0)), "B": mk_assignment(tp(T2, 1))},
    ),
]

HETEROGENEOUS_CASES = [
    AssignorCase(
        "testTwoMembersNoTopicSubscription",
        {T1: 3},
        tree_members(member("A"), member("B")),
        HETEROGENEOUS,
        {},
    ),
    AssignorCase(
        "testTwoMembersSubscribedToNonexistentTopics",
        {T1: 3},
        tree_members(member("A", [T3]), member("B", [T2])),
        HETEROGENEOUS,
    ),
    AssignorCase(
        "testFirstAssignmentTwoMembersTwoTopics",
        {T1: 3, T3: 6},
        tree_members(member("A", [T1, T3]), member("B", [T3])),
        HETEROGENEOUS,
        {"A": mk_assignment(tp(T1, 0, 1, 2), tp(T3, 4)), "B": mk_assignment(tp(T3, 0, 1, 2, 3, 5))},
    ),
    AssignorCase(
        "testFirstAssignmentNumMembersGreaterThanTotalNumPartitions",
        {T3: 1, T1: 2},
        tree_members(member("A", [T3]), member("B", [T3]), member("C", [T1])),
        HETEROGENEOUS,
        {"A": mk_assignment(tp(T3, 0)), "B": {}, "C": mk_assignment(tp(T1, 0, 1))},
    ),
    AssignorCase(
        "testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment",
        {T1: 6, T2: 4, T3: 4},
        tree_members(
            member("A", [T1], mk_assignment(tp(T1, 0, 1, 2))),
            member("B", [T1, T2], mk_assignment(tp(T1, 3), tp(T2, 0))),
            member("C", [T1, T2, T3], mk_assignment(tp(T1, 4, 5), tp(T2, 1, 2, 3), tp(T3, 0, 1, 2, 3))),
        ),
        HETEROGENEOUS,
        {
            "A": mk_assignment(tp(T1, 0, 1, 2, 5)),
            "B": mk_assignment(tp(T1, 3), tp(T2, 0, 1, 2, 3)),
            "C": mk_assignment(tp(T1, 4), tp(T3, 0, 1, 2, 3)),
        },
    ),
    AssignorCase(
        "testReassignmentWhenPartitionsAreAddedForTwoMembers",
        {T1: 6, T2: 5, T3: 3, T4: 3},
        tree_members(
            member("A", [T1, T3], mk_assignment(tp(T1, 0, 1, 2, 3), tp(T3, 0, 1))),
            member("B", [T1, T2, T3, T4], mk_assignment(tp(T2, 0, 1, 2), tp(T4, 0, 1, 2))),
        ),
        HETEROGENEOUS,
        {
            "A": mk_assignment(tp(T1, 0, 1, 2, 3, 4, 5), tp(T3, 0, 1, 2)),
            "B": mk_assignment(tp(T2, 0, 1, 2, 3, 4), tp(T4, 0, 1, 2)),
        },
    ),
    AssignorCase(
        "testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics",
        {T1: 6, T2: 7},
        tree_members(
            member("A", [T1], mk_assignment(tp(T1, 0, 2), tp(T2, 0))),
            member("B", [T1, T2], mk_assignment(tp(T1, 1), tp(T2, 1, 2))),
            member("C", [T1, T2]),
        ),
        HETEROGENEOUS,
        {
            "A": mk_assignment(tp(T1, 0, 2, 3, 4, 5)),
            "B": mk_assignment(tp(T1, 1), tp(T2, 1, 2, 6)),
            "C": mk_assignment(tp(T2, 0, 3, 4, 5)),
        },
    ),
    AssignorCase(
        "testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics",
        {T1: 3, T2: 8, T3: 3},
        tree_members(
            member("A", [T1, T3], mk_assignment(tp(T1, 0, 1, 2), tp(T3, 0, 1))),
            member("B", [T2], mk_assignment(tp(T2, 3, 4, 5, 6))),
        ),
        HETEROGENEOUS,
        {
            "A": mk_assignment(tp(T1, 0, 1, 2), tp(T3, 0, 1, 2)),
            "B": mk_assignment(tp(T2, 0, 1, 2, 3, 4, 5, 6, 7)),
        },
    ),
    AssignorCase(
        "testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
        {T1: 3, T2: 5},
        tree_members(
            member("A", [T1], mk_assignment(tp(T1, 0, 2), tp(T2, 1, 3))),
            member("B", [T1, T2], mk_assignment(tp(T1, 1), tp(T2, 0, 2, 4))),
        ),
        HETEROGENEOUS,
        {"A": mk_assignment(tp(T1, 0, 1, 2)), "B": mk_assignment(tp(T2, 0, 1, 2, 3, 4))},
    ),
    AssignorCase(
        "testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions",
        {T1: 2, T2: 2, T3: 2},
        tree_members(
            member("A", [T1, T2, T3], mk_assignment(tp(T1, 0, 1), tp(T2, 0, 1), tp(T3, 0, 1))),
            member("B", [T1, T2, T3]),
        ),
        HETEROGENEOUS,
        {"A": mk_assignment(tp(T2, 0), tp(T3, 0, 1)), "B": mk_assignment(tp(T1, 0, 1), tp(T2, 1))},
    ),
    AssignorCase(
        "testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions",
        {T1: 3},
        tree_members(member("A", [T1]), member("B")),
        HETEROGENEOUS,
        {"A": mk_assignment(tp(T1, 0, 1, 2)), "B": {}},
    ),
]


@pytest.mark.parametrize("case", HOMOGENEOUS_CASES + HETEROGENEOUS_CASES, ids=lambda c: c.name)
def test_kafka_case(case: AssignorCase) -> None:
    check_case(ASSIGNOR, case)


def test_validity_and_balance_for_large_sample_set() -> None:
    """Kafka's `testValidityAndBalanceForLargeSampleSet`: 99 topics of 3 partitions, 49 members."""
    rng = random.Random(848)
    counts = {random_uuid(rng): 3 for _ in range(1, 100)}
    members = tree_members(*(member(f"member{i}", counts) for i in range(1, 50)))
    result = ASSIGNOR.assign(GroupSpec(members, HOMOGENEOUS), topic_metadata(counts))
    check_valid_and_balanced(members, result.members)
    assert sum(len(ps) for a in result.members.values() for ps in a.values()) == 99 * 3
