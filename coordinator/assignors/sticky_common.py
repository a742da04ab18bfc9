"""What Kafka's two sticky assignors share before they assign: member data and previous ownership.

From `AbstractStickyAssignor`, `StickyAssignor` and `CooperativeStickyAssignor`:
- `MemberData`: the partitions a member says it owned and the generation of
  that claim. The eager StickyAssignor carries both in its user data; the
  cooperative one takes them from the subscription (owned_partitions, and
  generation_id from v2 on, else the generation in its user data).
- The user data layouts, byte for byte: StickyAssignor writes
  `[previous_assignment: [topic STRING, partitions [INT32]]] generation INT32`
  (v1; v0 has no generation) and reads v1, then v0, and ignores data it cannot
  parse; CooperativeStickyAssignor writes one INT32 generation.
- `resolve_previous_ownership` is Java's `allSubscriptionsEqual`: whether all
  members subscribe to the same topics, and who keeps a partition claimed
  twice (the higher generation wins; claims in the same generation void it).
  It walks members in Java's HashMap order, which decides ties.

Departure from Java: Java keeps `maxGeneration` in the assignor instance and
never lowers it across rebalances; here it is the maximum of this rebalance,
since our assignors hold no state. They differ only when one leader process
sees a group's generations go down (a deleted and recreated group).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from coordinator.assignors.base import GroupInput, MemberSubscription
from coordinator.assignors.java_compat import java_string_hash_order
from coordinator.consumer_protocol import (
    DEFAULT_GENERATION_ID,
    KafkaReader,
    KafkaWriter,
    group_by_topic_in_order,
    read_topic_partitions,
    write_topic_partitions,
)
from coordinator.topic_partition import TopicPartition


class MemberData(NamedTuple):
    partitions: list[TopicPartition]
    generation: int | None


MemberDataFn = Callable[[MemberSubscription], MemberData]


def remove_first(items: list[TopicPartition], tp: TopicPartition) -> None:
    """Java's `List.remove(Object)`: drops the first occurrence, if any."""
    if tp in items:
        items.remove(tp)


def encode_sticky_user_data(partitions: Sequence[TopicPartition], generation: int) -> bytes:
    """StickyAssignor user data v1; topics in the order of Java's `groupPartitionsByTopic` HashMap."""
    groups = dict(group_by_topic_in_order(partitions))
    writer = KafkaWriter()
    write_topic_partitions(writer, [(topic, groups[topic]) for topic in java_string_hash_order(groups)])
    writer.int32(generation)
    return writer.getvalue()


def decode_sticky_user_data(user_data: bytes | None) -> MemberData:
    """StickyAssignor's `memberData`: v1, else v0, else nothing owned at the default generation."""
    if not user_data:
        return MemberData([], None)
    try:
        reader = KafkaReader(user_data, "sticky user data", utf8_errors="replace")
        partitions = read_topic_partitions(reader, "previous_assignment")
        return MemberData(partitions, reader.int32("generation"))
    except ValueError:
        pass
    try:
        reader = KafkaReader(user_data, "sticky user data v0", utf8_errors="replace")
        return MemberData(read_topic_partitions(reader, "previous_assignment"), None)
    except ValueError:
        return MemberData([], DEFAULT_GENERATION_ID)


def encode_cooperative_user_data(generation: int) -> bytes:
    writer = KafkaWriter()
    writer.int32(generation)
    return writer.getvalue()


def decode_cooperative_generation(user_data: bytes) -> int:
    """The generation in CooperativeStickyAssignor user data; unreadable data means the default."""
    try:
        return KafkaReader(user_data, "cooperative-sticky user data").int32("generation")
    except ValueError:
        return DEFAULT_GENERATION_ID


@dataclass(slots=True)
class PreviousOwnership:
    all_subscriptions_equal: bool
    # Each member's still-valid claims, keyed in Java's iteration order of the group.
    owned: dict[str, list[TopicPartition]]
    claimed_by_several: set[TopicPartition]
    max_generation: int


def resolve_previous_ownership(group: GroupInput, member_data: MemberDataFn) -> PreviousOwnership:
    subscribed: set[str] = set()
    all_equal = True
    owner_of: dict[TopicPartition, str] = {}
    result = PreviousOwnership(True, {}, set(), DEFAULT_GENERATION_ID)
    for member_id, sub in group.subscriptions.items():
        # Java seeds the reference set from the first non-empty subscription, so a leading
        # empty subscription does not make the group unequal.
        if not subscribed:
            subscribed.update(sub.topics)
        elif all_equal and not (len(sub.topics) == len(subscribed) and subscribed.issuperset(sub.topics)):
            all_equal = False

        data = member_data(sub)
        generation = DEFAULT_GENERATION_ID if data.generation is None else data.generation
        result.max_generation = max(result.max_generation, generation)
        mine = result.owned[member_id] = []
        for tp in data.partitions:
            if tp.topic in group.partitions_per_topic:
                _claim(tp, member_id, generation, mine, owner_of, group, result)
    result.all_subscriptions_equal = all_equal
    return result


def _claim(
    tp: TopicPartition,
    member_id: str,
    generation: int,
    mine: list[TopicPartition],
    owner_of: dict[TopicPartition, str],
    group: GroupInput,
    result: PreviousOwnership,
) -> None:
    other = owner_of.get(tp)
    if other is None:
        mine.append(tp)
        owner_of[tp] = member_id
        return
    # Java compares with the other member's subscription generation, not its member data.
    other_generation = group.subscriptions[other].generation
    if other_generation is None:
        other_generation = DEFAULT_GENERATION_ID
    if generation == other_generation:
        result.claimed_by_several.add(tp)
        remove_first(result.owned[other], tp)
        owner_of[tp] = member_id
    elif generation > other_generation:
        mine.append(tp)
        remove_first(result.owned[other], tp)
        owner_of[tp] = member_id
