"""Groups of both types as the CLI shows them: one view of a classic and of a consumer group.

Kafka's admin client describes a group with ConsumerGroupDescribe first and
falls back to DescribeGroups for the ids it answers GROUP_ID_NOT_FOUND
(`describe_views` does the same, two calls per offsets partition at most);
kafka-consumer-groups.sh then prints both types through one
`ConsumerGroupDescription`. `GroupView` and `MemberView` are that
description: what only a consumer group has (epochs, target assignments,
whether a member speaks the consumer protocol) is None for a classic group.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.consumer_protocol import decode_assignment
from coordinator.errors import Errors
from coordinator.messages import (
    GROUP_TYPE_CLASSIC,
    GROUP_TYPE_CONSUMER,
    MEMBER_TYPE_CONSUMER,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedGroup,
    DescribedMember,
    DescribedTopicPartitions,
)
from coordinator.topic_partition import TopicPartition

DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    instance_id: str | None
    host: str
    client_id: str
    # The partitions it owns now, and as `orders:0,1;payments:2` (None: none; a payload
    # of another protocol type than "consumer" shows as `<N-bytes>`).
    assignment: tuple[TopicPartition, ...]
    assignment_text: str | None
    # Consumer groups only (None in a classic group).
    epoch: int | None = None
    target: tuple[TopicPartition, ...] | None = None
    upgraded: bool | None = None


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    state: str
    group_type: str
    # The classic group's protocol (range, sticky...) or the consumer group's assignor.
    assignment_strategy: str
    members: tuple[MemberView, ...]
    # Consumer groups only (None in a classic group).
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None

    @property
    def is_consumer_group(self) -> bool:
        return self.group_type == GROUP_TYPE_CONSUMER

    @property
    def has_migration_members(self) -> bool:
        """A consumer group with members of both protocols (Kafka's UPGRADED column)."""
        kinds = {m.upgraded for m in self.members}
        return True in kinds and False in kinds


def describe_views(client: Any, group_ids: Sequence[str]) -> list[GroupView]:
    """Every group of `group_ids`, sorted by id; an unknown one is a "Dead" classic view."""
    if not group_ids:
        return []
    views = []
    others = []
    for described in client.describe_consumer_groups(group_ids):
        if described.error is Errors.NONE:
            views.append(consumer_group_view(described))
        else:
            others.append(described.group_id)
    if others:
        views += [classic_group_view(d) for d in client.describe_groups(others)]
    return sorted(views, key=lambda v: v.group_id)


def consumer_group_view(group: DescribedConsumerGroup) -> GroupView:
    return GroupView(
        group.group_id,
        group.group_state,
        GROUP_TYPE_CONSUMER,
        group.assignor_name,
        tuple(_consumer_member(m) for m in group.members),
        group.group_epoch,
        group.assignment_epoch,
    )


def _consumer_member(member: DescribedConsumerGroupMember) -> MemberView:
    assignment = _topic_partitions(member.assignment)
    return MemberView(
        member.member_id,
        member.instance_id,
        member.client_host,
        member.client_id,
        assignment,
        partitions_text(assignment),
        member.member_epoch,
        _topic_partitions(member.target_assignment),
        member.member_type == MEMBER_TYPE_CONSUMER,
    )


def _topic_partitions(entries: Iterable[DescribedTopicPartitions]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(e.topic_name, p) for e in entries for p in e.partitions)


def classic_group_view(group: DescribedGroup) -> GroupView:
    members = tuple(_classic_member(m) for m in group.members)
    return GroupView(group.group_id, group.state, GROUP_TYPE_CLASSIC, group.protocol, members)


def _classic_member(member: DescribedMember) -> MemberView:
    decoded = _decoded(member.assignment)
    text = f"<{len(member.assignment)}-bytes>" if decoded is None else partitions_text(decoded)
    return MemberView(
        member.member_id, member.group_instance_id, member.client_host, member.client_id, decoded or (), text
    )


def partitions_text(partitions: Iterable[TopicPartition]) -> str | None:
    """`orders:0,1;payments:2` (Kafka's `getAssignmentString`); None when there are none."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    texts = sorted(f"{topic}:{','.join(map(str, sorted(ps)))}" for topic, ps in by_topic.items())
    return ";".join(texts) or None


def _decoded(assignment: bytes) -> tuple[TopicPartition, ...] | None:
    """None for a payload that is not a consumer-protocol assignment (another protocol type)."""
    if not assignment:
        return ()
    try:
        return decode_assignment(assignment).partitions
    except ValueError:
        return None
