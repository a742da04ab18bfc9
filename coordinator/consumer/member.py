"""One member of a consumer group, as its records describe it.

Follows Kafka's `modern/consumer/ConsumerGroupMember.java` (with
`ModernGroupMember.java` and `Utils.assignmentFromTopicPartitions`) of the
Kafka 4.0 line: apache/kafka 1eb7644349cb (2024-10-25), whose member already
carries the regular expression. A member is an immutable value: Kafka's
`Builder(oldMember)...build()` is `dataclasses.replace` or one of the `with_*`
methods, and `with_metadata` / `with_current_assignment` are the two
`Builder.updateWith` that replay its two records.

Rules, as Kafka:
- A new member starts at epoch 0, previous epoch -1, STABLE, no partitions,
  rebalance timeout -1, client id and host "" and regex "".
- `subscribed_topic_regex` may be "" or None; both mean no regex
  (`subscribed_topic_regex_or_none`).
- A member uses the classic protocol when its record carries
  ClassicMemberMetadata.

Departures: the reconciliation fields can be read and replaced as one
`MemberAssignmentState` (what `reconciliation.py` computes); describe is left
to the handler that needs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from coordinator.consumer.assignors.spec import Assignment
from coordinator.consumer.reconciliation import MemberAssignmentState, MemberState
from coordinator.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    TopicPartitions,
)

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def assignment_from_topic_partitions(
    topic_partitions: Iterable[TopicPartitions],
) -> dict[UUID, frozenset[int]]:
    """Kafka's `Utils.assignmentFromTopicPartitions`: a record's topic partitions as an assignment."""
    return {entry.topic_id: frozenset(entry.partitions) for entry in topic_partitions}


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """Kafka's `ConsumerGroupMember`: what its MemberMetadata and CurrentMemberAssignment records hold."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = ""
    server_assignor_name: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic_member_metadata: ClassicMemberMetadata | None = None

    @property
    def subscribed_topic_regex_or_none(self) -> str | None:
        """The regex, or None when the member has none (Kafka's `subscribedTopicRegexOrNull`)."""
        return self.subscribed_topic_regex or None

    @property
    def use_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    @property
    def supported_classic_protocols(self) -> tuple[ClassicProtocol, ...]:
        """A classic member's JoinGroup protocols, in its order (Kafka's `supportedClassicProtocols`)."""
        classic = self.classic_member_metadata
        return () if classic is None else classic.supported_protocols

    @property
    def classic_protocol_session_timeout_ms(self) -> int | None:
        """A classic member's own session timeout (Kafka's `classicProtocolSessionTimeout`)."""
        classic = self.classic_member_metadata
        return None if classic is None else classic.session_timeout_ms

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def assignment_state(self) -> MemberAssignmentState:
        """The reconciliation fields, as `reconciliation.reconcile` takes them."""
        return MemberAssignmentState(
            self.member_epoch, self.previous_member_epoch, self.state,
            self.assigned_partitions, self.partitions_pending_revocation,
        )

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """Kafka's `ModernGroupMember.isReconciledTo`."""
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def with_assignment_state(self, state: MemberAssignmentState) -> ConsumerGroupMember:
        """This member moved to what `reconciliation.reconcile` computed."""
        return dataclasses.replace(
            self,
            member_epoch=state.member_epoch,
            previous_member_epoch=state.previous_member_epoch,
            state=state.state,
            assigned_partitions=state.assigned_partitions,
            partitions_pending_revocation=state.partitions_pending_revocation,
        )

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        """Kafka's `Builder.updateWith(ConsumerGroupMemberMetadataValue)`."""
        return dataclasses.replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=frozenset(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor_name=value.server_assignor,
            classic_member_metadata=value.classic_member_metadata,
        )

    def with_current_assignment(
        self, value: ConsumerGroupCurrentMemberAssignmentValue
    ) -> ConsumerGroupMember:
        """Kafka's `Builder.updateWith(ConsumerGroupCurrentMemberAssignmentValue)`."""
        return dataclasses.replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.from_value(value.state),
            assigned_partitions=assignment_from_topic_partitions(value.assigned_partitions),
            partitions_pending_revocation=assignment_from_topic_partitions(value.partitions_pending_revocation),
        )

    def left(self) -> ConsumerGroupMember:
        """The member as a CurrentMemberAssignment tombstone leaves it: epoch -1, nothing owned."""
        return dataclasses.replace(
            self,
            member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
            previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
            assigned_partitions={},
            partitions_pending_revocation={},
        )
