"""ConsumerGroupHeartbeat (KIP-848): join, heartbeat, reconcile, leave.

Follows `GroupMetadataManager.java` at apache/kafka 1eb7644349cb (2024-10-25):
`consumerGroupHeartbeat`, `getOrMaybeCreateConsumerGroup`,
`getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember`, `replaceMember`,
`hasMemberSubscriptionChanged`, `updateTargetAssignment`, `maybeReconcile`
and `consumerGroupLeave`; Kafka 4.0 for regex subscriptions. Fencing and the
timers are in `fencing.py`.

Also from later Kafka: KAFKA-19233 (apache/kafka#21305, 2026-01): a known
member sending epoch 0 rejoins (its epoch is not checked) instead of being
fenced.

Rules, as Kafka: the handler reads the group as it was before the request,
collects every record, and writes them at the end (each applied by replay,
the loading path); a failure answers the member alone and writes nothing.
Member epoch 0 joins (a new group is created only then), -1 leaves, -2
leaves temporarily (static members). A changed subscription, or subscription
metadata, bumps the group epoch; a group epoch ahead of the target epoch
runs the group's preferred server assignor (the default, uniform, when no
member names one). The response carries the assignment only for a full
request (epoch 0, or rebalance timeout, names or regex, and owned partitions
all set: Kafka 4.0's rule) or when the assigned partitions changed.

A join (epoch 0) to the id of a classic group: an empty one that was stored
is tombstoned and replaced, a non-empty one is upgraded to a consumer group
when `migration.py` allows it (its records come first in the batch), else
GROUP_ID_NOT_FOUND. A consumer-protocol static member may take the instance
id of a classic-protocol member at once (Kafka: UNRELEASED_INSTANCE_ID only
between two consumer-protocol members). A leave (or fencing) of the last
consumer-protocol member may downgrade the group (`fencing.py`).

Departures:
- An empty classic group that was never stored (a simple group: offsets
  only) gets no tombstone: it has no record to delete, and it keeps holding
  the group id's committed offsets for the consumer group.
- A member id generated for a v0 join comes from the shard's seeded random
  source (`Shard.random_uuid`), in Kafka's base64 form.
- No lazy metadata refresh: `Shard.update_topics` refreshes groups eagerly,
  and a new regex is resolved in the heartbeat that brings it
  (`subscriptions.py`).
- No per-group session/heartbeat overrides, no throttle time. Classic-protocol
  members are served by `classic_members.py`.

Assignment batching (Kafka 4.3, KIP-1263), when
`group_consumer_assignment_interval_ms` is set: an epoch bump runs the
assignor only if its last run for the group (volatile, per shard) is at least
that old; otherwise the heartbeat reconciles the member to the current target
(a new member gets the target epoch and nothing yet) and the first heartbeat
after the interval runs the assignor once for every change made meanwhile.
Without it, 10,000 members joining one group run the assignor 10,000 times
over ever more members: quadratic, minutes of the partition's only thread
(tests/consumer/test_scale.py). A JoinGroup of a classic-protocol member
always runs it (its SyncGroup needs the assignment). Departure: Kafka also
revokes, while the target lags, the partitions of topics a member stopped
subscribing to; here they go with the next run (at most the interval later).
"""

from __future__ import annotations

import base64
import dataclasses
from typing import TYPE_CHECKING

from coordinator.classic.group import Group
from coordinator.classic.state import GroupState
from coordinator.consumer import migration
from coordinator.consumer import records as helpers
from coordinator.consumer.assignors import ASSIGNORS, DEFAULT_ASSIGNOR_NAME, PartitionAssignorError
from coordinator.consumer.assignors.spec import EMPTY_ASSIGNMENT, Assignment, SubscriptionType, TopicMetadata
from coordinator.consumer.fencing import (
    HeartbeatError,
    cancel_rebalance_timeout,
    fence_member,
    schedule_rebalance_timeout,
    schedule_session_timeout,
)
from coordinator.consumer.group import (
    ConsumerGroup,
    ResolvedRegularExpression,
    SubscriptionCount,
    subscription_type,
)
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.reconciliation import (
    FencedMemberEpochError,
    MemberState,
    check_member_epoch,
    has_assigned_partitions_changed,
    maybe_reconcile,
)
from coordinator.consumer.subscriptions import (
    InvalidRegularExpression,
    resolve_regex,
    subscription_metadata,
)
from coordinator.consumer.target import TargetMember, build_target_assignment
from coordinator.consumer.validation import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    heartbeat_request_error,
)
from coordinator.errors import Errors
from coordinator.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupTopicPartitions,
)
from coordinator.records import GroupMetadataKey, Record

if TYPE_CHECKING:
    from coordinator.shard import Shard, Token


def handle_consumer_group_heartbeat(
    shard: Shard, request: ConsumerGroupHeartbeatRequest, token: Token
) -> ConsumerGroupHeartbeatResponse:
    """Kafka's `GroupMetadataManager.consumerGroupHeartbeat(context, request)`."""
    problem = heartbeat_request_error(request, ASSIGNORS)
    if problem is not None:
        return ConsumerGroupHeartbeatResponse(problem[0], problem[1])
    try:
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return _leave(shard, request)
        return HeartbeatStep(shard, request).run()
    except HeartbeatError as exc:
        return ConsumerGroupHeartbeatResponse(exc.error, exc.message)
    except FencedMemberEpochError as exc:
        return ConsumerGroupHeartbeatResponse(Errors.FENCED_MEMBER_EPOCH, str(exc))
    except InvalidRegularExpression as exc:
        return ConsumerGroupHeartbeatResponse(Errors.INVALID_REGULAR_EXPRESSION, str(exc))


def assignment_due(shard: Shard, group: ConsumerGroup) -> bool:
    """KIP-1263: the assignor runs at most once per interval for a group."""
    interval = shard.config.group_consumer_assignment_interval_ms
    if interval == 0:
        return True
    last = shard.consumer_assignment_ms.get(group)
    return last is None or shard.now_ms - last >= interval


def response_assignment(member: ConsumerGroupMember) -> tuple[ConsumerGroupTopicPartitions, ...]:
    """The member's assigned partitions, topics by id and partitions ascending."""
    return tuple(
        ConsumerGroupTopicPartitions(topic_id, tuple(sorted(partitions)))
        for topic_id, partitions in sorted(member.assigned_partitions.items(), key=lambda item: item[0].bytes)
    )


def kafka_uuid_string(shard: Shard) -> str:
    """Kafka's `Uuid.toString()` (URL-safe base64, no padding) of a seeded random UUID."""
    return base64.urlsafe_b64encode(shard.random_uuid().bytes).decode("ascii").rstrip("=")


def existing_group(shard: Shard, group_id: str) -> ConsumerGroup:
    """Kafka's `consumerGroup(groupId)`: GROUP_ID_NOT_FOUND for a missing or classic group."""
    group = shard.consumer_groups.get(group_id)
    if group is None:
        raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
    return group


def _group_for_heartbeat(
    shard: Shard, group_id: str, create: bool
) -> tuple[ConsumerGroup, list[Record], Group | None]:
    """Kafka's `getOrMaybeCreateConsumerGroup`: (group, records that make it, classic group upgraded).

    A new or converted group exists once its records are written.
    """
    group = shard.consumer_groups.get(group_id)
    if group is not None:
        return group, [], None
    if not create:
        raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
    classic = shard.groups.get(group_id)
    if classic is None:
        return ConsumerGroup(group_id), [], None
    if classic.is_(GroupState.EMPTY) and not classic.members:
        # Kafka's `maybeDeleteEmptyClassicGroup` (a stored one: see Departures).
        tombstone = [Record(GroupMetadataKey(group_id), None)] if classic.generation_id > 0 else []
        return ConsumerGroup(group_id), tombstone, None
    if migration.validate_online_upgrade(shard, classic):
        records, converted = migration.convert_to_consumer_group(shard, classic)
        return converted, records, classic
    raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")


def _leave(shard: Shard, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    """Kafka's `consumerGroupLeave` and `consumerGroupStaticMemberGroupLeave`."""
    group = existing_group(shard, request.group_id)
    answer = ConsumerGroupHeartbeatResponse(Errors.NONE, None, request.member_id, request.member_epoch)
    if request.instance_id is None:
        member = group.members.get(request.member_id)
        if member is None:
            raise unknown_member(group, request.member_id)
        fence_member(shard, group, member)
        return answer
    member = known_static_member(group, request.member_id, request.instance_id)
    if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        leaving = dataclasses.replace(
            member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={}
        )
        shard.write(helpers.current_assignment_record(group.group_id, leaving))
        return ConsumerGroupHeartbeatResponse(
            Errors.NONE, None, member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH
        )
    fence_member(shard, group, member)
    return answer


def unknown_member(group: ConsumerGroup, member_id: str) -> HeartbeatError:
    return HeartbeatError(
        Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
    )


def known_static_member(group: ConsumerGroup, member_id: str, instance_id: str) -> ConsumerGroupMember:
    """Kafka's `throwIfStaticMemberIsUnknown` then `throwIfInstanceIdIsFenced`."""
    member = group.static_member(instance_id)
    if member is None:
        raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        raise HeartbeatError(
            Errors.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{member.member_id}.",
        )
    return member


class HeartbeatStep:
    """One regular heartbeat (epoch >= 0), computed from the group as it was, then written."""

    request: ConsumerGroupHeartbeatRequest
    # Whether an assignor run may wait for the group's assignment interval (KIP-1263).
    may_defer_assignment = True

    def __init__(self, shard: Shard, request: ConsumerGroupHeartbeatRequest) -> None:
        self.shard = shard
        self.request = request
        self.join = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        self.group, self.records, self.upgraded = _group_for_heartbeat(shard, request.group_id, self.join)
        self.owned = request.topic_partitions
        self.replaced: ConsumerGroupMember | None = None
        self.new_regex_topics: frozenset[str] | None = None
        self.assigned = False

    def run(self) -> ConsumerGroupHeartbeatResponse:
        shard, group = self.shard, self.group
        self._check_size(self.request.member_id)
        member = self._member(self.request.member_id or kafka_uuid_string(shard))
        updated = self._updated(member)
        reconciled = self.update_and_reconcile(member, updated)
        self.write_records()
        self.note_assignment()
        if reconciled is not updated:
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                schedule_rebalance_timeout(shard, group.group_id, reconciled)
            else:
                cancel_rebalance_timeout(shard, group.group_id, reconciled.member_id)
        schedule_session_timeout(shard, group.group_id, reconciled.member_id)
        return self._response(member, reconciled)

    def update_and_reconcile(
        self, member: ConsumerGroupMember, updated: ConsumerGroupMember
    ) -> ConsumerGroupMember:
        """Steps 1-3 of Kafka's heartbeat: subscription and epoch, target assignment, reconciliation."""
        group = self.group
        group_epoch, metadata, kind = self._subscription(member, updated)
        if group_epoch > group.assignment_epoch and self._assignment_due():
            target = self._update_target(group_epoch, member, updated, metadata, kind)
            target_epoch = group_epoch
            self.assigned = True
        else:
            target_epoch = group.assignment_epoch
            target = group.target_assignment_for(updated.member_id, updated.instance_id)
        return self._reconcile(updated, target_epoch, target)

    def _assignment_due(self) -> bool:
        return not self.may_defer_assignment or assignment_due(self.shard, self.group)

    def note_assignment(self) -> None:
        """Once the records are written: when the group's assignor last ran."""
        group = self.shard.consumer_groups.get(self.group.group_id)
        if self.assigned and group is not None:
            self.shard.consumer_assignment_ms[group] = self.shard.now_ms

    def write_records(self) -> None:
        """Write every record collected; an upgraded classic group's parked requests are answered first."""
        if self.upgraded is not None:
            migration.retire_classic_group(self.shard, self.upgraded)
        for record in self.records:
            self.shard.write(record)
        if self.upgraded is not None:
            migration.schedule_converted_sessions(self.shard, self.group)

    def _check_size(self, member_id: str) -> None:
        """Kafka's `throwIfConsumerGroupIsFull`."""
        max_size = self.shard.config.group_consumer_max_size
        if len(self.group.members) >= max_size and (not member_id or member_id not in self.group.members):
            raise HeartbeatError(
                Errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )

    def _member(self, member_id: str) -> ConsumerGroupMember:
        request, group = self.request, self.group
        owned = request.topic_partitions
        if request.instance_id is None:
            found = group.members.get(member_id)
            if found is None and not self.join:
                raise unknown_member(group, member_id)
            member = found or ConsumerGroupMember(member_id)
            if not self.join:  # KAFKA-19233: epoch 0 from a known member is a rejoin
                check_member_epoch(member.assignment_state, request.member_epoch, owned)
            return member
        if not self.join:
            member = known_static_member(group, member_id, request.instance_id)
            check_member_epoch(member.assignment_state, request.member_epoch, owned)
            return member
        existing = group.static_member(request.instance_id)
        if existing is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.use_classic_protocol:
            raise HeartbeatError(
                Errors.UNRELEASED_INSTANCE_ID,
                f"Static member {member_id} with instance id {request.instance_id} cannot join the group "
                f"because the instance id is owned by {existing.member_id} member.",
            )
        new = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        self._replace_member(existing, new)
        return new

    def _replace_member(self, old: ConsumerGroupMember, new: ConsumerGroupMember) -> None:
        """Kafka's `replaceMember`: the old member's tombstones, then the new one with its state."""
        group_id = self.group.group_id
        self.replaced = old
        self.records += [
            helpers.current_assignment_tombstone(group_id, old.member_id),
            helpers.target_assignment_tombstone(group_id, old.member_id),
            helpers.member_subscription_tombstone(group_id, old.member_id),
            helpers.member_subscription_record(group_id, new),
            helpers.target_assignment_record(
                group_id, new.member_id, self.group.target_assignment_of(old.member_id)
            ),
            helpers.current_assignment_record(group_id, new),
        ]

    def _updated(self, member: ConsumerGroupMember) -> ConsumerGroupMember:
        """The member with the request's non-null fields (Kafka's `maybeUpdate*`)."""
        request = self.request
        changes: dict[str, object] = {"client_id": request.client_id, "client_host": request.client_host}
        if request.instance_id is not None:
            changes["instance_id"] = request.instance_id
        if request.rack_id is not None:
            changes["rack_id"] = request.rack_id
        if request.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            changes["server_assignor_name"] = request.server_assignor
        if request.subscribed_topic_names is not None:
            changes["subscribed_topic_names"] = frozenset(request.subscribed_topic_names)
        if request.subscribed_topic_regex is not None:
            changes["subscribed_topic_regex"] = request.subscribed_topic_regex
        return dataclasses.replace(member, classic_member_metadata=None, **changes)  # type: ignore[arg-type]

    def _subscription(
        self, member: ConsumerGroupMember, updated: ConsumerGroupMember
    ) -> tuple[int, dict[str, TopicMetadata], SubscriptionType]:
        """Kafka's `hasMemberSubscriptionChanged` and the epoch bump: (group epoch, metadata, type)."""
        group, group_id = self.group, self.group.group_id
        bump = False
        if updated != member:
            self.records.append(helpers.member_subscription_record(group_id, updated))
            bump = (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex_or_none != member.subscribed_topic_regex_or_none
            )
        if not bump:
            return group.group_epoch, dict(group.subscription_metadata), group.subscription_type()
        self._update_regexes(member, updated)
        counts = group.compute_subscribed_topic_names(member, updated)
        for topic in self.new_regex_topics or ():
            old = counts.get(topic, SubscriptionCount(0, 0))
            counts[topic] = SubscriptionCount(old.by_name, old.by_regex + 1)
        metadata = subscription_metadata(counts, self.shard.topics)
        known = updated.member_id in group.members or group.static_member(updated.instance_id) is not None
        kind = subscription_type(
            self._regex_counts(member, updated), counts, len(group.members) + (not known)
        )
        if metadata != group.subscription_metadata:
            self.records.append(helpers.subscription_metadata_record(group_id, metadata))
        group_epoch = group.group_epoch + 1
        self.records.append(helpers.epoch_record(group_id, group_epoch))
        return group_epoch, metadata, kind

    def _update_regexes(self, member: ConsumerGroupMember, updated: ConsumerGroupMember) -> None:
        """Kafka 4.0's `maybeUpdateRegularExpressions`: resolve a new regex, drop one nobody uses."""
        group, shard = self.group, self.shard
        old, new = member.subscribed_topic_regex_or_none, updated.subscribed_topic_regex_or_none
        if old is not None and old != new and old in group.resolved_regular_expressions:
            if group.num_subscribed_members(old) <= 1:
                self.records.append(helpers.regular_expression_tombstone(group.group_id, old))
        if new is not None and new not in group.resolved_regular_expressions:
            topics = resolve_regex(new, shard.topics)
            resolved = ResolvedRegularExpression(topics, shard.topics_version, shard.now_ms)
            self.records.append(helpers.regular_expression_record(group.group_id, new, resolved))
            self.new_regex_topics = topics

    def _regex_counts(self, member: ConsumerGroupMember, updated: ConsumerGroupMember) -> dict[str, int]:
        """Members per regex were `member` replaced by `updated` (a new member is not counted yet)."""
        counts = dict(self.group.subscribed_regular_expressions)
        counted = member.member_id in self.group.members or self.replaced is not None
        old, new = member.subscribed_topic_regex_or_none, updated.subscribed_topic_regex_or_none
        if old is not None and counted:
            counts[old] = counts.get(old, 0) - 1
        if new is not None:
            counts[new] = counts.get(new, 0) + 1
        return {regex: count for regex, count in counts.items() if count > 0}

    def _target_member(self, member: ConsumerGroupMember) -> TargetMember:
        """What the assignor reads of a member: its names plus the topics its regex resolved to."""
        names = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex_or_none
        resolved = None if regex is None else self.group.resolved_regular_expressions.get(regex)
        if resolved is not None:
            names |= resolved.topics
        elif regex is not None and self.new_regex_topics is not None:
            names |= self.new_regex_topics
        return TargetMember(member.member_id, tuple(sorted(names)), member.instance_id, member.rack_id)

    def _update_target(
        self,
        group_epoch: int,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        metadata: dict[str, TopicMetadata],
        kind: SubscriptionType,
    ) -> Assignment:
        """Kafka's `updateTargetAssignment`: run the preferred assignor, record the changed targets."""
        group = self.group
        name = group.compute_preferred_server_assignor(member, updated) or DEFAULT_ASSIGNOR_NAME
        updates: dict[str, TargetMember | None] = {updated.member_id: self._target_member(updated)}
        previous = None if updated.instance_id is None else group.static_members.get(updated.instance_id)
        if previous is not None and previous != updated.member_id:
            updates[previous] = None
        try:
            result = build_target_assignment(
                group_epoch=group_epoch,
                assignor=ASSIGNORS[name],
                members=[self._target_member(m) for m in group.members.values()],
                target_assignment=group.target_assignment,
                subscription_metadata=metadata,
                updated_members=updates,
                static_members=group.static_members,
                subscription=kind,
            )
        except PartitionAssignorError as exc:
            raise HeartbeatError(
                Errors.UNKNOWN_SERVER_ERROR,
                f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}",
            ) from exc
        for member_id, assignment in result.changed:
            self.records.append(helpers.target_assignment_record(group.group_id, member_id, assignment))
        self.records.append(helpers.target_assignment_epoch_record(group.group_id, group_epoch))
        return result.members.get(updated.member_id, EMPTY_ASSIGNMENT)

    def _reconcile(
        self, updated: ConsumerGroupMember, target_epoch: int, target: Assignment
    ) -> ConsumerGroupMember:
        """Kafka's `maybeReconcile`, without its timers (set once the records are written)."""
        current = updated.assignment_state
        state = maybe_reconcile(current, target_epoch, target, self.group.current_partition_epoch, self.owned)
        if state == current:
            return updated
        reconciled = updated.with_assignment_state(state)
        self.records.append(helpers.current_assignment_record(self.group.group_id, reconciled))
        return reconciled

    def _response(
        self, member: ConsumerGroupMember, reconciled: ConsumerGroupMember
    ) -> ConsumerGroupHeartbeatResponse:
        request = self.request
        full = self.join or (
            request.rebalance_timeout_ms != -1
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
            and request.topic_partitions is not None
        )
        changed = has_assigned_partitions_changed(member.assignment_state, reconciled.assignment_state)
        return ConsumerGroupHeartbeatResponse(
            Errors.NONE,
            None,
            reconciled.member_id,
            reconciled.member_epoch,
            self.shard.config.group_consumer_heartbeat_interval_ms,
            response_assignment(reconciled) if full or changed else None,
        )
