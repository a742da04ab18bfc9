"""The consumer group type of KIP-848 (ConsumerGroupHeartbeat), beside the classic group.

Kafka keeps it in `coordinator/group/modern/consumer/`. The pure model: the
server-side assignors (`assignors/`), the target assignment (`target.py`),
per-member reconciliation (`reconciliation.py`), the group and its members as
their records describe them (`group.py`, `member.py`), replaying those records
(`replay.py`: `replay(groups, record)`) and building them (`records.py`,
Kafka's record helpers). These import only shared modules
(`coordinator.routing`, `coordinator.errors`, `coordinator.records`).

The protocol on the Shard: the ConsumerGroupHeartbeat handler
(`heartbeat.py`), its request checks (`validation.py`), fencing and the
session, rebalance, join and sync timers (`fencing.py`), topics and regex
subscriptions (`subscriptions.py`, RE2 through `google-re2`), the
OffsetCommit/OffsetFetch member checks (`offsets_check.py`), the group as
ConsumerGroupDescribe shows it (`describe.py`; the handler is in
`coordinator/admin.py`), classic-protocol members inside a consumer group
(`classic_members.py`: JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the
online conversions between the two group types (`migration.py`). These may
import the shared modules of `coordinator` (messages, errors, records,
timers), `coordinator.classic` (a consumer group meets and, when migrating,
converts classic groups) and, for types only, `coordinator.shard`. The
one-id-one-type rule between the two group types is the shard's
(`coordinator/group_types.py`).
No I/O, no clock; randomness only through the shard's seeded source.
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
