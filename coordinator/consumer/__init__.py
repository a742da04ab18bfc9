"""The consumer group type of KIP-848 (ConsumerGroupHeartbeat), beside the classic group.

Kafka keeps it in `coordinator/group/modern/consumer/`. This package holds its
pure layer so far: the server-side assignors (`assignors/`), the target
assignment (`target.py`), per-member reconciliation (`reconciliation.py`),
the group and its members as their records describe them (`group.py`,
`member.py`), replaying those records (`replay.py`: `replay(groups, record)`)
and building them (`records.py`, Kafka's record helpers).
It imports nothing from the classic group's modules, only shared ones
(`coordinator.routing.java_string_hash`, `coordinator.errors`,
`coordinator.records`), so the classic code can move without touching it. No I/O, no clock, no randomness.
"""

from coordinator.consumer.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR_NAME,
    Assignment,
    ConsumerGroupPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    RangeAssignor,
    SubscriptionType,
    TopicMetadata,
    UniformAssignor,
)
from coordinator.consumer.group import (
    ConsumerGroup,
    ConsumerGroupState,
    IllegalGroupState,
    ResolvedRegularExpression,
    SubscriptionCount,
)
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.reconciliation import (
    FencedMemberEpochError,
    MemberAssignmentState,
    MemberState,
    check_member_epoch,
    has_assigned_partitions_changed,
    maybe_reconcile,
    reconcile,
)
from coordinator.consumer.target import (
    TargetAssignmentResult,
    TargetMember,
    build_target_assignment,
    subscription_type,
)

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR_NAME",
    "Assignment",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupPartitionAssignor",
    "ConsumerGroupState",
    "FencedMemberEpochError",
    "GroupAssignment",
    "GroupSpec",
    "IllegalGroupState",
    "MemberAssignmentState",
    "MemberSpec",
    "MemberState",
    "PartitionAssignorError",
    "RangeAssignor",
    "ResolvedRegularExpression",
    "SubscriptionCount",
    "SubscriptionType",
    "TargetAssignmentResult",
    "TargetMember",
    "TopicMetadata",
    "UniformAssignor",
    "build_target_assignment",
    "check_member_epoch",
    "has_assigned_partitions_changed",
    "maybe_reconcile",
    "reconcile",
    "subscription_type",
]
