"""Handing groups from one offsets partition to another: the core of repartitioning online.

Kafka places a group on partition `abs(hash(group.id)) % N` (coordinator/routing.py).
Growing N to k*N sends every group of partition p to one of p, p+N, ...,
p+(k-1)N, since h % N == (h % kN) % N: each new partition takes its groups
from exactly one old one, and most groups stay where they are. Shrinking N to
N/k is the reverse: partition p's groups all go to p % (N/k). Any other count
would send groups from every old partition to every new one; `refusal` says
so, and which counts are allowed instead.

A partition's shard owns the groups its `owner` routing (coordinator/routing.py)
sends to it (None: every group sent to it, as before any repartition) and answers
NOT_COORDINATOR for any other (a client with an old routing, or a group already handed
off), so it never changes one it does not own. `owner` merges what the partition's own
log says (`switched`: the switch record, below) with what the controller last pushed
(`pushed`, `route_step`) and the routing an export froze groups under (`frozen`).

A handoff from N to M partitions, driven by the controller
(actors/controller/repartition.py) through the runtime (`PartitionRuntime.drive`:
each step's answer is released once what it depends on is durable at the high
watermark, and a step that writes is refused below min ISR):
1. `export_step` at the source, with the routing in which the source has switched:
   the groups that move are frozen (their parked requests answered NOT_COORDINATOR,
   their timers stopped, no request changes them again) and their records answered a
   page at a time: `group_records`, the records that rebuild a group's persistent state
   in replay order (classic metadata or KIP-848's records with its exact epochs, regular
   expressions, committed offsets with their metadata and timestamps).
   Before the first page's admits, each target's fence (coordinator/precopy_target.py
   `fence_step`, a new session number per attempt; skipped when the export says the
   source switched already, a retry after a lost save): the copies of this source's
   groups an abandoned attempt left there are forgotten durably, so a group deleted or
   expired at the source since is not served again by its new partition.
2. `admit_step` at each target: the records written as its own (whatever it held of
   those groups deleted first), then its
   marker (`ADMIT_KEY`, `version;count`: the analytics tell the copies from the
   target's own records by it, spark_bridge/ownership.py).
3. `switch_step` at the source, the commit point: a `routing` record in its own log
   (replayed by every replica and every reload, `replay_switch`), accepted only from the
   leader that froze and exported the groups; the moved groups are forgotten
   (`release_moved`; their older records stay in the log and are never served).
   Or, abandoned before it: `abort_step` serves the frozen groups again as they were.
The targets own the admitted groups once the routing they are pushed says their source
switched. Until then an admitted group is a copy (`Shard.copies`): answered NOT_COORDINATOR,
no timer of it runs and no expiry writes to it (a copy may be held for minutes by a pre-copy,
coordinator/precopy.py); `adopt` starts its timers, as a load does, once it is owned.
Volatile state does not move, as on a failover: members rejoin or re-heartbeat at the target
(NOT_COORDINATOR sends them there), whose session timers start afresh.
The shard's `begin_handoff`, `admit_groups` and `abort_handoff` are the same steps
without the driver's answers (tests drive them directly).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coordinator import lag_watch
from coordinator.classic import rebalance
from coordinator.consumer import fencing, records, watch
from coordinator.errors import Errors
from coordinator.messages import AssignmentWatchResponse
from coordinator.records import GroupMetadataKey, OffsetCommitKey, Record, ServiceStateKey, ServiceStateValue
from coordinator.routing import Routing

if TYPE_CHECKING:
    from coordinator.shard import Shard


def refusal(current: int, count: int) -> str | None:
    """Why `current` partitions cannot become `count` online, or None when they can."""
    if count == current:
        return f"the service already has {current} offsets partitions"
    if count < 1:
        return "the partition count must be at least 1"
    if count % current == 0 or current % count == 0:
        return None
    grow = [current * k for k in (2, 3, 4)]
    shrink = [current // k for k in range(2, current + 1) if current % k == 0][:3]
    return (
        f"{count} is neither a multiple nor a divisor of {current}: each group would move between "
        f"unrelated partitions; grow to a multiple ({', '.join(map(str, grow))}, ...) or shrink to a "
        f"divisor ({', '.join(map(str, shrink)) or 'none'})"
    )


def owns(shard: Shard, group_id: str) -> bool:
    owner = shard.owner
    return owner is None or owner.partition_for(group_id) == shard.partition


def moving(shard: Shard, routing: Routing) -> list[str]:
    """The groups of `shard` that another partition serves under `routing`."""
    ids = set(shard.groups) | set(shard.consumer_groups)
    return sorted(g for g in ids if routing.partition_for(g) != shard.partition)


def begin_handoff(shard: Shard, routing: Routing) -> list[str]:
    """Own only the groups `routing` sends here; freeze the others (step 1). Their ids, sorted."""
    shard.owner = routing
    ids = moving(shard, routing)
    for group_id in ids:
        _freeze(shard, group_id)
    # One pass over the timers for every frozen group, not one per group: a partition of
    # many groups holds as many timers (heartbeats, sessions).
    frozen = set(ids)
    for key in shard.timers.keys():
        if len(key) > 1 and key[1] in frozen:
            shard.timers.cancel(key)
    for group_id in [g for g in shard.lag_watches if routing.partition_for(g) != shard.partition]:
        lag_watch.answer_group(shard, group_id, Errors.NOT_COORDINATOR)  # watched, nothing committed yet
    return ids


def _freeze(shard: Shard, group_id: str) -> None:
    """Answer what waits on the group (its timers are `begin_handoff`'s)."""
    group = shard.groups.get(group_id)
    if group is not None:
        rebalance.answer_parked_not_coordinator(shard, group)
    watch.answer_group(shard, group_id, AssignmentWatchResponse(Errors.NOT_COORDINATOR))
    lag_watch.answer_group(shard, group_id, Errors.NOT_COORDINATOR)


def group_records(shard: Shard, group_id: str) -> list[Record]:
    """The records that rebuild `group_id`'s persistent state, in replay order (step 2)."""
    out: list[Record] = []
    consumer = shard.consumer_groups.get(group_id)
    classic = shard.groups.get(group_id)
    if consumer is not None:
        if consumer.subscription_metadata:
            out.append(records.subscription_metadata_record(group_id, consumer.subscription_metadata))
        out += [records.member_subscription_record(group_id, m) for m in consumer.members.values()]
        out.append(records.epoch_record(group_id, consumer.group_epoch))
        out += [
            records.target_assignment_record(group_id, member_id, consumer.target_assignment_of(member_id))
            for member_id in consumer.members
        ]
        out.append(records.target_assignment_epoch_record(group_id, consumer.assignment_epoch))
        out += [records.current_assignment_record(group_id, m) for m in consumer.members.values()]
        out += [
            records.regular_expression_record(group_id, regex, resolved)
            for regex, resolved in consumer.resolved_regular_expressions.items()
        ]
    elif classic is not None and classic.generation_id > 0:
        out.append(Record(GroupMetadataKey(group_id), classic.to_record_value()))
    if classic is not None:
        out += [Record(key, value) for key, value in classic.offsets.items()]
    return out


def admit_groups(shard: Shard, admitted: list[Record]) -> int:
    """Write another partition's groups as this shard's own and start their timers (step 3).

    Whatever this shard held of an admitted group before (an earlier handoff that was
    abandoned) is deleted first, so the group is exactly what its source exported.
    Returns how many records it wrote."""
    ids = list(dict.fromkeys(record.key.group_id for record in admitted))
    written = len(admitted)
    for group_id in ids:
        written += forget_durably(shard, group_id)
    for record in admitted:
        key = record.key
        if type(key) is OffsetCommitKey:
            shard.write_offset(key, record.value)  # type: ignore[arg-type]
        else:
            shard.write(record)
    for group_id in ids:
        if owns(shard, group_id):
            _start_timers(shard, group_id)
        else:
            shard.copies.add(group_id)  # held until owned (`adopt`): no timer writes to it
    return written


def forget_durably(shard: Shard, group_id: str) -> int:
    """Delete what this shard holds of `group_id`; how many records that wrote."""
    written = 0
    shard.copies.discard(group_id)
    consumer = shard.consumer_groups.get(group_id)
    if consumer is not None:
        tombstones = records.group_tombstone_records(consumer)
        for record in tombstones:
            shard.write(record)
        written += len(tombstones)
    group = shard.groups.get(group_id)
    if group is not None:
        keys = list(group.offsets)
        for key in keys:
            shard.write_offset(key, None)
        written += len(keys)
        if group.generation_id > 0:
            shard.write(Record(GroupMetadataKey(group_id), None))
            written += 1
        shard.groups.pop(group_id, None)
    return written


def _start_timers(shard: Shard, group_id: str) -> None:
    group = shard.groups.get(group_id)
    if group is not None:
        for member in group.members.values():
            rebalance.schedule_heartbeat(shard, group, member)
    consumer = shard.consumer_groups.get(group_id)
    if consumer is not None:
        fencing.schedule_group_timers(shard, consumer)


def adopt(shard: Shard) -> list[str]:
    """Start the timers of the copies this shard owns now (their source switched); their ids.

    Costs the copies held, not every group of the shard."""
    owned = sorted(g for g in shard.copies if owns(shard, g))
    shard.copies.difference_update(owned)
    for group_id in owned:
        _start_timers(shard, group_id)
    return owned


def release_moved(shard: Shard) -> list[str]:
    """Forget the groups this shard no longer owns (step 4); their ids."""
    gone = [g for g in shard.groups if not owns(shard, g)]
    gone += [g for g in shard.consumer_groups if g not in shard.groups and not owns(shard, g)]
    for group_id in gone:
        shard.groups.pop(group_id, None)
        shard.consumer_groups.pop(group_id, None)
        shard.assignment_watches.pop(group_id, None)
    shard.lag.forget_groups(gone)
    return sorted(gone)


def abort_handoff(shard: Shard, routing: Routing | None) -> None:
    """Own again what `routing` sends here, frozen groups included, timers restarted."""
    frozen = [g for g in set(shard.groups) | set(shard.consumer_groups) if not owns(shard, g)]
    shard.owner = routing
    for group_id in frozen:
        _start_timers(shard, group_id)


# ------------------------------------------------ the driver's steps, with their answers
#
# The partition actor runs these for the controller (`actors/partition/handoff.py`); each
# answers through the shard's Result, so the runtime releases the answer only once every
# record written before it (and its own) is durable at the high watermark.

# A partition's own entry (in its own log, whatever the partition): the routing under
# which it switched its groups to their new partitions. Replayed, it fences the moved
# groups on every replica and after every reload; it is the handoff's commit point.
ROUTING_KIND = "routing"
ROUTING_KEY = ServiceStateKey(ROUTING_KIND, "")
# A target's own entry, written right after each admit's records: "version;count", the
# repartition's version and how many records the admit wrote, so the `count` records before
# it in this log are copies of groups this partition did not own yet. Analytics tell them
# from its own records by it (spark_bridge/ownership.py); replay keeps it as opaque state.
ADMIT_KIND = "admitted"
ADMIT_KEY = ServiceStateKey(ADMIT_KIND, "")


@dataclass(frozen=True, slots=True)
class HandoffAnswer:
    """`error` NONE, or why the step was refused (nothing changed then). An export's page:
    `exported`, the records of moving groups by the partition that takes them over, and
    `next_page`, where the next page starts (-1: this was the last). A pre-copy's page
    (coordinator/precopy_source.py) also has `gone`: the groups whose copies its targets
    delete, by target partition."""

    error: Errors
    detail: str = ""
    exported: dict[int, list[Record]] = field(default_factory=dict)
    gone: dict[int, list[str]] = field(default_factory=dict)
    groups: int = 0
    next_page: int = -1
    switched: bool = False  # an export: this partition's switch under its routing is recorded
    session: int = 0  # a refused fence: the copy session fenced at the target already


# An export page holds the groups whose records reach this many (one group may exceed it).
EXPORT_PAGE_RECORDS = 20_000


def export_step(
    shard: Shard, routing: Routing, token: Any, page: int = 0, page_records: int = EXPORT_PAGE_RECORDS
) -> None:
    """Freeze the groups `routing` moves away from here and answer their records, a page
    at a time from group `page` of them (in id order).

    `routing` is the repartition with this partition switched. The groups are frozen
    once, by the first page asked under `routing`; a page asked again answers the same
    records (frozen groups do not change), so the driver may retry any page."""
    if (refused := stale(shard, routing)) is not None:
        shard.reply(token, refused)
        return
    if shard.frozen != routing:
        shard.frozen_ids = begin_handoff(shard, routing)
        shard.frozen = routing
    ids = shard.frozen_ids
    exported: dict[int, list[Record]] = {}
    end, taken = page, 0
    while end < len(ids) and (taken < page_records or end == page):
        group_id = ids[end]
        records = group_records(shard, group_id)
        exported.setdefault(routing.partition_for(group_id), []).extend(records)
        taken += len(records)
        end += 1
    next_page = end if end < len(ids) else -1
    shard.reply(token, HandoffAnswer(Errors.NONE, exported=exported, groups=end - page, next_page=next_page,
                                     switched=_has_switched(shard, routing)))


def admit_step(shard: Shard, admitted: list[Record], token: Any, version: int = 0) -> None:
    """Admit another partition's groups (`version`: the repartition's), then the marker."""
    written = admit_groups(shard, admitted)
    shard.write(Record(ADMIT_KEY, ServiceStateValue(f"{version};{written}".encode("ascii"))))
    groups = len({record.key.group_id for record in admitted})
    shard.reply(token, HandoffAnswer(Errors.NONE, groups=groups))


def _has_switched(shard: Shard, routing: Routing) -> bool:
    current = shard.switched
    return current is not None and current.version == routing.version and shard.partition in current.switched


def switch_step(shard: Shard, routing: Routing, token: Any) -> None:
    """The commit point: record that this partition's moved groups are the targets'.

    Only the leader that froze and exported them under `routing` may (a new leader
    after a failover has served them since: the driver exports again)."""
    if _has_switched(shard, routing):
        shard.reply(token, HandoffAnswer(Errors.NONE))  # a retried switch: done already
        return
    if shard.frozen != routing:
        shard.reply(token, HandoffAnswer(
            Errors.REBALANCE_IN_PROGRESS, "the groups were not exported under this routing by this leader",
        ))
        return
    moved = len(shard.frozen_ids)
    shard.write(Record(ROUTING_KEY, ServiceStateValue(routing.encode())))  # its replay releases them
    shard.frozen_ids = []
    shard.reply(token, HandoffAnswer(Errors.NONE, groups=moved))


def committed_routing(shard: Shard) -> Routing | None:
    """The routing this shard owns by without its export's freeze: its own switch record
    merged with the controller's last push, both of which say only what is committed. What
    a state file records and a probe shows (a frozen source that wrote its routing with
    itself switched would resume, after a full restart, as switched without its switch
    record: its moving groups routed to targets that may never have admitted them)."""
    return shard.switched.merged(shard.pushed) if shard.switched is not None else shard.pushed


def abort_step(shard: Shard, token: Any) -> None:
    """Serve the frozen groups again (an export the driver abandons)."""
    if shard.frozen is not None:
        abort_handoff(shard, committed_routing(shard))
        shard.frozen, shard.frozen_ids = None, []
    shard.reply(token, HandoffAnswer(Errors.NONE))


def route_step(shard: Shard, routing: Routing, now_ms: int) -> None:
    """The controller's current routing (volatile): which groups this shard owns, merged
    with the switch its own log records. A frozen export keeps its groups frozen. Copies
    it owns now start their timers from `now_ms` (`adopt`)."""
    shard.now_ms = max(shard.now_ms, now_ms)
    shard.pushed = routing
    copying = shard.copying
    if copying is not None and copying.routing is not None and copying.routing.version < routing.version:
        shard.copying = None  # a pre-copy of an older repartition: it can never switch now
    owner = routing.merged(shard.switched)
    if shard.frozen is not None:
        owner = owner.merged(shard.frozen)
    shard.owner = owner
    adopt(shard)


def replay_switch(shard: Shard, value: ServiceStateValue | None) -> None:
    """A switch record replayed (a load, a follower, or just written): own by it."""
    if value is None:
        return
    switched = Routing.decode(value.data)
    shard.switched = switched
    shard.owner = switched.merged(shard.owner)
    release_moved(shard)


def stale(shard: Shard, routing: Routing) -> HandoffAnswer | None:
    """Why a source step under `routing` is refused here (None: it is not)."""
    if shard.partition not in routing.switched or routing.previous is None:
        return HandoffAnswer(Errors.INVALID_REQUEST, "the routing does not switch this partition")
    known = shard.owner.merged(shard.switched) if shard.owner is not None else shard.switched
    if known is not None and known.version > routing.version:
        newer = f"a newer repartition ({known.version}) is known here"
        return HandoffAnswer(Errors.FENCED_LEADER_EPOCH, newer)
    return None
