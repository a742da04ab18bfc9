"""Assignment watches: raygroups' own addition to KIP-848, for Ray members.

In Kafka a consumer-protocol member learns of a new assignment at its next
heartbeat: the coordinator cannot reach it before. A member that joins, a
topic that grows, a partition released by its previous owner, each waits up
to a heartbeat interval per step. A Ray member can ask instead
(`AssignmentWatchRequest`, with its member epoch): the shard parks the
request and answers it `changed` as soon as a heartbeat from that member
would change its partitions, and unchanged at its timeout (up to a minute).
The heartbeat itself stays Kafka's: a watch only moves it earlier, and
writes nothing.

A watch stays parked across the member's heartbeats: each heartbeat of the
member moves its watch to the member's new epoch (`follow_heartbeat`), since
the member learnt it from the response. So a member keeps one watch parked
and sends a new one only after an answer: in a stable group watches cost
one request a minute per member, not one per heartbeat (which doubled the
requests of a 1,000-member group and slowed its rebalances fourfold).

A parked watch is answered `changed` when:
- the member is gone or no longer at the watched epoch (fenced, removed):
  its heartbeat learns why;
- it is stable and the target the group computed gives it other partitions;
- it waits for partitions (UNRELEASED_PARTITIONS) and one of them is free
  now (its heartbeat gets it, as Kafka's reconciliation assigns released
  partitions one by one), or the target moved on;
- the group epoch is ahead of the target and the assignor may run now (a
  topic grew, a member left by a timer): one watcher, the oldest, whose
  heartbeat runs the assignor, after which the rules above pick the members
  the new target concerns.
A member revoking (UNREVOKED_PARTITIONS) already knows what to do. Waking
every member on every epoch bump would make a 1,000-member group heartbeat
1,000 times for each member that joins; these rules wake those whose
partitions change.

Cost: the shard calls `nudge` after every request and timer of a group with
watches. It checks every watcher only when the group epoch or the target
epoch moved since its last check (at most once per assignor run, which costs
more), and otherwise only the watchers waiting for partitions.

A watch is answered once: on its timer, when replaced by another watch of
the member (unchanged), when the group goes (changed), or NOT_COORDINATOR
when the shard unloads. Watches are volatile, as parked requests are: a new leader
has none, and members fall back to their heartbeat interval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.heartbeat import assignment_due
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.reconciliation import NOT_OWNED, MemberState
from coordinator.errors import Errors
from coordinator.messages import AssignmentWatchRequest, AssignmentWatchResponse

if TYPE_CHECKING:
    from coordinator.shard import Shard, Token

WATCH_TIMER = "consumer-watch"
# The longest a watch stays parked (the member sends another after its next heartbeat):
# a stable group's watches cost one request a minute per member.
MAX_WATCH_MS = 60_000
CHANGED = AssignmentWatchResponse(Errors.NONE, changed=True)
UNCHANGED = AssignmentWatchResponse(Errors.NONE, changed=False)


class Watch:
    __slots__ = ("token", "epoch")

    def __init__(self, token: Token, epoch: int) -> None:
        self.token = token
        self.epoch = epoch


class GroupWatches:
    """The parked watches of one group, by member, in the order they were parked."""

    __slots__ = ("by_member", "waiting", "seen", "assignor_woken")

    def __init__(self, group: ConsumerGroup) -> None:
        self.by_member: dict[str, Watch] = {}
        # Members waiting for partitions when they parked or last heartbeated: checked after every change.
        self.waiting: set[str] = set()
        # (group epoch, target epoch) at the last full check.
        self.seen = (group.group_epoch, group.assignment_epoch)
        # The group epoch one watcher was woken for, to run the assignor.
        self.assignor_woken = -1


def handle_assignment_watch(
    shard: Shard, request: AssignmentWatchRequest, token: Token
) -> AssignmentWatchResponse | None:
    if not request.member_id or request.member_epoch < 1 or not 0 <= request.timeout_ms <= MAX_WATCH_MS:
        return AssignmentWatchResponse(Errors.INVALID_REQUEST)
    group = shard.consumer_groups.get(request.group_id)
    if group is None or has_news(group, request.member_id, request.member_epoch):
        return CHANGED
    replaced = shard.assignment_watches.get(group.group_id)
    if replaced is not None:
        _drop(shard, replaced, group.group_id, request.member_id, UNCHANGED)  # may drop the group's entry
    watches = shard.assignment_watches.setdefault(group.group_id, GroupWatches(group))
    watches.by_member[request.member_id] = Watch(token, request.member_epoch)
    if group.members[request.member_id].state is MemberState.UNRELEASED_PARTITIONS:
        watches.waiting.add(request.member_id)
    shard.timers.schedule(_key(group.group_id, request.member_id), shard.now_ms + request.timeout_ms)
    return None


def has_news(group: ConsumerGroup, member_id: str, epoch: int) -> bool:
    """Whether a heartbeat from the member, now, would change its partitions (or fail)."""
    member = group.members.get(member_id)
    if member is None or member.member_epoch != epoch:
        return True
    behind = group.assignment_epoch > member.member_epoch
    if member.state is MemberState.STABLE:
        target = group.target_assignment_for(member_id, member.instance_id)
        return behind and target != member.assigned_partitions
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return behind or _one_released(group, member)
    return False


def _one_released(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a partition the member waits for is free now: its heartbeat would get it
    (Kafka's reconciliation assigns the released ones without waiting for the rest)."""
    return any(group.current_partition_epoch(t, p) == NOT_OWNED for t, p in group.pending_partitions(member))


def nudge(shard: Shard, group_id: str) -> None:
    """After a change to the group: answer the watches it concerns (module rules)."""
    watches = shard.assignment_watches.get(group_id)
    if watches is None:
        return
    group = shard.consumer_groups.get(group_id)
    if group is None:
        for member_id in list(watches.by_member):
            _drop(shard, watches, group_id, member_id, CHANGED)
        return
    epochs = (group.group_epoch, group.assignment_epoch)
    full = epochs != watches.seen
    watches.seen = epochs
    candidates = list(watches.by_member if full else watches.waiting)
    answered = 0
    for member_id in candidates:
        watch = watches.by_member[member_id]
        if has_news(group, member_id, watch.epoch):
            _drop(shard, watches, group_id, member_id, CHANGED)
            answered += 1
    if (
        full
        and not answered
        and group.group_epoch > group.assignment_epoch
        and watches.assignor_woken != group.group_epoch
        and watches.by_member
        and assignment_due(shard, group)
    ):
        watches.assignor_woken = group.group_epoch
        _drop(shard, watches, group_id, next(iter(watches.by_member)), CHANGED)


def follow_heartbeat(shard: Shard, group_id: str, member_id: str) -> None:
    """After the member's own heartbeat: its parked watch goes on from the member's new state."""
    watches = shard.assignment_watches.get(group_id)
    watch = None if watches is None else watches.by_member.get(member_id)
    group = shard.consumer_groups.get(group_id)
    member = None if watch is None or group is None else group.members.get(member_id)
    if member is None:
        return  # no watch, or `nudge` answers it: the member is gone
    assert watches is not None and watch is not None
    watch.epoch = member.member_epoch
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        watches.waiting.add(member_id)
    else:
        watches.waiting.discard(member_id)


def on_watch_timeout(shard: Shard, group_id: str, member_id: str, payload: object = None) -> None:
    watches = shard.assignment_watches.get(group_id)
    if watches is not None:
        _drop(shard, watches, group_id, member_id, UNCHANGED)


def answer_all(shard: Shard, response: AssignmentWatchResponse) -> None:
    """Answer every parked watch (the shard unloads)."""
    for group_id in list(shard.assignment_watches):
        answer_group(shard, group_id, response)


def answer_group(shard: Shard, group_id: str, response: AssignmentWatchResponse) -> None:
    """Answer every parked watch of one group (it unloads, or leaves this shard)."""
    watches = shard.assignment_watches.get(group_id)
    if watches is not None:
        for member_id in list(watches.by_member):
            _drop(shard, watches, group_id, member_id, response)


def _drop(
    shard: Shard, watches: GroupWatches, group_id: str, member_id: str, response: AssignmentWatchResponse
) -> None:
    watch = watches.by_member.pop(member_id, None)
    if watch is None:
        return
    watches.waiting.discard(member_id)
    shard.timers.cancel(_key(group_id, member_id))
    shard.reply(watch.token, response)
    if not watches.by_member:
        del shard.assignment_watches[group_id]


def _key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (WATCH_TIMER, group_id, member_id)
