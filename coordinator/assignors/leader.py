"""Consumer-group bytes: a member's JoinGroup metadata and the leader's SyncGroup assignments.

Mirrors `ConsumerCoordinator.metadata()` (what a member sends for each
assignor it supports) and `ConsumerCoordinator.onLeaderElected()` (the leader
decodes every member's subscription, runs the group's assignor, encodes one
assignment per member). Layouts are `consumer_protocol`'s, at the highest
version, as Java writes them.

Rules:
- `member_metadata` is in JoinGroup response order: that order feeds the
  assignor's Java HashMap order (see `base`).
- Undecodable member metadata raises ValueError, as Java's leader fails the
  assignment with a SchemaException.
- Built-in assignors attach no user data to assignments (null), as Java's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from coordinator.assignors.base import MemberSubscription
from coordinator.assignors.registry import get_assignor
from coordinator.consumer_protocol import (
    DEFAULT_GENERATION_ID,
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from coordinator.topic_partition import TopicPartition


def subscription_metadata(
    assignor_name: str,
    topics: Iterable[str],
    *,
    owned_partitions: Iterable[TopicPartition] = (),
    generation_id: int = DEFAULT_GENERATION_ID,
    rack_id: str | None = None,
    last_assignment: Sequence[TopicPartition] | None = None,
    last_generation: int = DEFAULT_GENERATION_ID,
) -> bytes:
    """A member's JoinGroup protocol metadata for one assignor.

    `owned_partitions` and `generation_id` are the member's current state
    (empty under the eager protocol, which revokes everything before joining);
    `last_assignment` and `last_generation` are what the assignor saw in its
    last `onAssignment`, from which the sticky assignors build user data.
    """
    user_data = get_assignor(assignor_name).subscription_user_data(last_assignment, last_generation)
    subscription = Subscription(
        # Java sends its subscription set: each topic once.
        topics=tuple(dict.fromkeys(topics)),
        user_data=user_data,
        owned_partitions=tuple(owned_partitions),
        generation_id=generation_id if generation_id >= 0 else DEFAULT_GENERATION_ID,
        rack_id=rack_id or None,
    )
    return encode_subscription(subscription)


def perform_assignment(
    assignor_name: str,
    member_metadata: Mapping[str, bytes],
    partitions_per_topic: Mapping[str, int],
    group_instance_ids: Mapping[str, str | None] | None = None,
) -> dict[str, bytes]:
    """The leader's step: {member_id: subscription bytes} to {member_id: assignment bytes}."""
    instance_ids = group_instance_ids or {}
    members = {
        member_id: MemberSubscription.from_subscription(
            decode_subscription(metadata), instance_ids.get(member_id)
        )
        for member_id, metadata in member_metadata.items()
    }
    assignment = get_assignor(assignor_name).assign(members, partitions_per_topic)
    return {member_id: encode_assignment(Assignment(tuple(tps))) for member_id, tps in assignment.items()}
