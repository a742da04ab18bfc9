"""Reconciliation against Kafka's `CurrentAssignmentBuilderTest` and the epoch checks of the heartbeat.

One row per assertion of Kafka's test (apache/kafka 1eb7644349cb,
group-coordinator/src/test/.../modern/consumer/CurrentAssignmentBuilderTest.java);
the epoch rows are `GroupMetadataManagerTest.testConsumerGroupMemberEpochValidation`.
Kafka draws its topic ids at random, so any two ids do.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import pytest

from coordinator.consumer.assignors import Assignment
from coordinator.consumer.reconciliation import (
    FencedMemberEpochError,
    MemberAssignmentState,
    MemberState,
    OwnedPartitions,
    PartitionEpoch,
    check_member_epoch,
    has_assigned_partitions_changed,
    maybe_reconcile,
    reconcile,
)

from tests.consumer.kafka_cases import mk_assignment, tp

T1 = UUID("6f1d2c3b-0000-4000-8000-000000000001")
T2 = UUID("6f1d2c3b-0000-4000-8000-000000000002")

STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS
UNKNOWN = MemberState.UNKNOWN
SAME = "unchanged"
FENCED = "fenced"


def member(
    state: MemberState, epoch: int, previous: int, assigned: Assignment, revoking: Assignment | None = None
) -> MemberAssignmentState:
    return MemberAssignmentState(epoch, previous, state, assigned, revoking or {})


def epoch_of(value: int) -> PartitionEpoch:
    return lambda topic_id, partition: value


def owned(*entries: tuple[UUID, list[int]]) -> OwnedPartitions:
    return list(entries)


@dataclass(frozen=True)
class Row:
    name: str
    member: MemberAssignmentState
    target_epoch: int
    target: Assignment
    partition_epoch: PartitionEpoch
    owned: OwnedPartitions | None
    expected: MemberAssignmentState | str


A123_B456 = mk_assignment(tp(T1, 1, 2, 3), tp(T2, 4, 5, 6))
UNREVOKED_10 = member(
    UNREVOKED, 10, 10, mk_assignment(tp(T1, 2, 3), tp(T2, 5, 6)), mk_assignment(tp(T1, 1), tp(T2, 4))
)
UNRELEASED_11 = member(UNRELEASED, 11, 11, mk_assignment(tp(T1, 2, 3), tp(T2, 5, 6)))
UNKNOWN_11 = member(UNKNOWN, 11, 11, mk_assignment(tp(T1, 3), tp(T2, 6)), mk_assignment(tp(T1, 2), tp(T2, 5)))

ROWS = [
    Row(
        "testStableToStable",
        member(STABLE, 10, 10, A123_B456),
        11,
        A123_B456,
        epoch_of(10),
        None,
        member(STABLE, 11, 10, A123_B456),
    ),
    Row(
        "testStableToStableWithNewPartitions",
        member(STABLE, 10, 10, A123_B456),
        11,
        mk_assignment(tp(T1, 1, 2, 3, 4), tp(T2, 4, 5, 6, 7)),
        epoch_of(-1),
        None,
        member(STABLE, 11, 10, mk_assignment(tp(T1, 1, 2, 3, 4), tp(T2, 4, 5, 6, 7))),
    ),
    Row(
        "testStableToUnrevokedPartitions",
        member(STABLE, 10, 10, A123_B456),
        11,
        mk_assignment(tp(T1, 2, 3, 4), tp(T2, 5, 6, 7)),
        epoch_of(-1),
        None,
        UNREVOKED_10,
    ),
    Row(
        "testStableToUnreleasedPartitions",
        member(STABLE, 10, 10, A123_B456),
        11,
        mk_assignment(tp(T1, 1, 2, 3, 4), tp(T2, 4, 5, 6, 7)),
        epoch_of(10),
        None,
        member(UNRELEASED, 11, 10, A123_B456),
    ),
    Row(
        "testStableToUnreleasedPartitionsWithOwnedPartitionsNotHavingRevokedPartitions",
        member(STABLE, 10, 10, A123_B456),
        11,
        mk_assignment(tp(T1, 1, 2, 3), tp(T2, 4, 5, 7)),
        lambda topic_id, _: 10 if topic_id == T2 else -1,
        owned(),
        member(UNRELEASED, 11, 10, mk_assignment(tp(T1, 1, 2, 3), tp(T2, 4, 5))),
    ),
    Row(
        "testUnrevokedPartitionsToStable",
        UNREVOKED_10,
        11,
        mk_assignment(tp(T1, 2, 3), tp(T2, 5, 6)),
        epoch_of(-1),
        owned((T1, [2, 3]), (T2, [5, 6])),
        member(STABLE, 11, 10, mk_assignment(tp(T1, 2, 3), tp(T2, 5, 6))),
    ),
    Row(
        "testRemainsInUnrevokedPartitions (no owned list)",
        UNREVOKED_10,
        12,
        mk_assignment(tp(T1, 3), tp(T2, 6)),
        epoch_of(-1),
        None,
        SAME,
    ),
    Row(
        "testRemainsInUnrevokedPartitions (still owns T1-1)",
        UNREVOKED_10,
        12,
        mk_assignment(tp(T1, 3), tp(T2, 6)),
        epoch_of(-1),
        owned((T1, [1, 2, 3]), (T2, [5, 6])),
        SAME,
    ),
    Row(
        "testRemainsInUnrevokedPartitions (still owns T2-4)",
        UNREVOKED_10,
        12,
        mk_assignment(tp(T1, 3), tp(T2, 6)),
        epoch_of(-1),
        owned((T1, [2, 3]), (T2, [4, 5, 6])),
        SAME,
    ),
    Row(
        "testUnrevokedPartitionsToUnrevokedPartitions",
        UNREVOKED_10,
        12,
        mk_assignment(tp(T1, 3), tp(T2, 6)),
        epoch_of(-1),
        owned((T1, [2, 3]), (T2, [5, 6])),
        member(UNREVOKED, 11, 10, mk_assignment(tp(T1, 3), tp(T2, 6)), mk_assignment(tp(T1, 2), tp(T2, 5))),
    ),
    Row(
        "testUnrevokedPartitionsToUnreleasedPartitions",
        member(UNREVOKED, 11, 10, mk_assignment(tp(T1, 2, 3), tp(T2, 5, 6))),
        11,
        mk_assignment(tp(T1, 2, 3, 4), tp(T2, 5, 6, 7)),
        epoch_of(10),
        owned((T1, [2, 3]), (T2, [5, 6])),
        member(UNRELEASED, 11, 11, mk_assignment(tp(T1, 2, 3), tp(T2, 5, 6))),
    ),
    Row(
        "testUnreleasedPartitionsToStable",
        UNRELEASED_11,
        12,
        mk_assignment(tp(T1, 2, 3), tp(T2, 5, 6)),
        epoch_of(10),
        None,
        member(STABLE, 12, 11, mk_assignment(tp(T1, 2, 3), tp(T2, 5, 6))),
    ),
    Row(
        "testUnreleasedPartitionsToStableWithNewPartitions",
        UNRELEASED_11,
        11,
        mk_assignment(tp(T1, 2, 3, 4), tp(T2, 5, 6, 7)),
        epoch_of(-1),
        None,
        member(STABLE, 11, 11, mk_assignment(tp(T1, 2, 3, 4), tp(T2, 5, 6, 7))),
    ),
    Row(
        "testUnreleasedPartitionsToUnreleasedPartitions",
        UNRELEASED_11,
        11,
        mk_assignment(tp(T1, 2, 3, 4), tp(T2, 5, 6, 7)),
        epoch_of(10),
        None,
        UNRELEASED_11,
    ),
    Row(
        "testUnreleasedPartitionsToUnrevokedPartitions",
        UNRELEASED_11,
        12,
        mk_assignment(tp(T1, 3), tp(T2, 6)),
        epoch_of(10),
        None,
        member(UNREVOKED, 11, 11, mk_assignment(tp(T1, 3), tp(T2, 6)), mk_assignment(tp(T1, 2), tp(T2, 5))),
    ),
    Row(
        "testUnknownState (owned list missing)",
        UNKNOWN_11,
        12,
        mk_assignment(tp(T1, 3), tp(T2, 6)),
        epoch_of(10),
        None,
        FENCED,
    ),
    Row(
        "testUnknownState (rejoins owning nothing)",
        UNKNOWN_11,
        12,
        mk_assignment(tp(T1, 3), tp(T2, 6)),
        epoch_of(11),
        owned(),
        member(STABLE, 12, 11, mk_assignment(tp(T1, 3), tp(T2, 6))),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_kafka_current_assignment_builder_case(row: Row) -> None:
    if row.expected == FENCED:
        with pytest.raises(FencedMemberEpochError):
            reconcile(row.member, row.target_epoch, row.target, row.partition_epoch, row.owned)
        return
    result = reconcile(row.member, row.target_epoch, row.target, row.partition_epoch, row.owned)
    if row.expected == SAME:
        assert result is row.member
    else:
        assert result == row.expected


def test_unknown_state_reads_from_any_unknown_byte() -> None:
    assert MemberState.from_value(2) is UNRELEASED
    assert MemberState.from_value(5) is UNKNOWN


def test_maybe_reconcile_keeps_a_reconciled_member() -> None:
    stable = member(STABLE, 12, 11, mk_assignment(tp(T1, 3)))
    assert maybe_reconcile(stable, 12, {}, epoch_of(-1), None) is stable
    moved = maybe_reconcile(stable, 13, mk_assignment(tp(T1, 3, 4)), epoch_of(-1), None)
    assert moved == member(STABLE, 13, 12, mk_assignment(tp(T1, 3, 4)))
    assert has_assigned_partitions_changed(stable, moved)
    assert not has_assigned_partitions_changed(stable, member(STABLE, 13, 12, mk_assignment(tp(T1, 3))))


# GroupMetadataManagerTest.testConsumerGroupMemberEpochValidation: a STABLE member at epoch 100
# (previous 99) owning foo 1-3.
STORED = member(STABLE, 100, 99, mk_assignment(tp(T1, 1, 2, 3)))


@pytest.mark.parametrize(
    ("received", "owned_now"),
    [(200, None), (50, None), (99, None), (99, owned((T1, [1, 4]))), (99, owned((T2, [1])))],
    ids=[
        "greater epoch",
        "smaller epoch",
        "previous epoch without partitions",
        "not a subset",
        "other topic",
    ],
)
def test_member_epoch_fenced(received: int, owned_now: OwnedPartitions | None) -> None:
    with pytest.raises(FencedMemberEpochError) as raised:
        check_member_epoch(STORED, received, owned_now)
    assert raised.value.error_code == 110


def test_previous_epoch_with_a_subset_is_accepted_and_gets_the_current_epoch() -> None:
    check_member_epoch(STORED, 99, owned((T1, [1, 2])))
    check_member_epoch(STORED, 100, None)
    assert (
        maybe_reconcile(STORED, 100, mk_assignment(tp(T1, 1, 2, 3)), epoch_of(100), None).member_epoch == 100
    )
