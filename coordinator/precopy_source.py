"""A pre-copy's source steps, run for the controller on the source partition's leader.

docs/design-precopy.md has the whole design; coordinator/precopy.py the dirty tracking and
the pages, coordinator/precopy_target.py the target's fence and admits. Each step answers
a `HandoffAnswer` through the shard's Result, released once what it read is durable at the
high watermark (`PartitionRuntime.drive`, as coordinator/handoff.py's steps).

- `begin_step(routing, session)`: a copy session starts: every moving group dirty, the
  shard's writes touch the tracker from now on. Answered `detail="switched"` when this
  partition's log already records its switch under `routing` (the driver then switches,
  which answers done). Refused while groups are frozen (the driver aborts first).
- `round_step(session)`: a round over the dirty moving groups; `groups` says how many.
- `export_step(session, page)`: one page of the round, `CopyPage`'s records and gone
  groups by target; the driver admits them at the targets, then `confirm_step(page)`.
- `freeze_step(session)`: freeze every moving group (`handoff.begin_handoff`) and start
  the last round over what is still dirty: its pages are exported, admitted, confirmed.
- `switch_step(session)`: the commit point, `handoff.switch_step`, only once the tracker
  is clean (every moving group's current state durable at its target) and by the leader
  that froze them; the tracker is then dropped.
Any step naming another session (a new leader has none) is refused REBALANCE_IN_PROGRESS:
the driver begins a new session. `handoff.abort_step` unfreezes, the session goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator import handoff
from coordinator.errors import Errors
from coordinator.handoff import HandoffAnswer
from coordinator.precopy import COPY_PAGE_RECORDS, DirtyTracker, export_page

if TYPE_CHECKING:
    from collections.abc import Callable

    from coordinator.routing import Routing
    from coordinator.shard import Shard


def begin_step(shard: Shard, routing: Routing, session: int, token: Any) -> None:
    if _switched(shard, routing):
        shard.reply(token, HandoffAnswer(Errors.NONE, "switched"))
        return
    if (refused := handoff.stale(shard, routing)) is not None:
        shard.reply(token, refused)
        return
    if shard.frozen is not None:
        shard.reply(token, HandoffAnswer(Errors.REBALANCE_IN_PROGRESS, "groups are frozen: abort first"))
        return
    moving = handoff.moving(shard, routing)
    shard.copying = DirtyTracker(session, moving, routing)
    shard.reply(token, HandoffAnswer(Errors.NONE, groups=len(moving)))


def round_step(shard: Shard, session: int, token: Any) -> None:
    if (tracker := _session(shard, session, token)) is not None:
        shard.reply(token, HandoffAnswer(Errors.NONE, groups=tracker.start_round(_moves(shard, tracker))))


def export_step(
    shard: Shard, session: int, page: int, token: Any, page_records: int = COPY_PAGE_RECORDS
) -> None:
    if (tracker := _session(shard, session, token)) is None:
        return
    assert tracker.routing is not None
    try:
        copied = export_page(shard, tracker, tracker.routing, page, page_records)
    except ValueError as exc:
        shard.reply(token, HandoffAnswer(Errors.INVALID_REQUEST, str(exc)))
        return
    exported, gone = copied.exported, copied.gone
    shard.reply(token, HandoffAnswer(
        Errors.NONE, exported=exported, gone=gone, groups=copied.groups, next_page=copied.next_page,
    ))


def confirm_step(shard: Shard, session: int, page: int, token: Any) -> None:
    if (tracker := _session(shard, session, token)) is not None:
        shard.reply(token, HandoffAnswer(Errors.NONE, groups=tracker.confirm(page)))


def freeze_step(shard: Shard, session: int, token: Any) -> None:
    if (tracker := _session(shard, session, token)) is None:
        return
    assert tracker.routing is not None
    if shard.frozen != tracker.routing:
        shard.frozen_ids = handoff.begin_handoff(shard, tracker.routing)
        shard.frozen = tracker.routing
    shard.reply(token, HandoffAnswer(Errors.NONE, groups=tracker.start_round(_moves(shard, tracker))))


def switch_step(shard: Shard, routing: Routing, session: int, token: Any) -> None:
    if _switched(shard, routing):
        handoff.switch_step(shard, routing, token)  # a retried switch: answered done
        return
    if (tracker := _session(shard, session, token)) is None:
        return
    if tracker.routing != routing or not tracker.clean(_moves(shard, tracker)):
        pending = tracker.pending(_moves(shard, tracker))
        shard.reply(token, HandoffAnswer(
            Errors.REBALANCE_IN_PROGRESS, f"{pending} moving groups are not durably at their targets",
        ))
        return
    handoff.switch_step(shard, routing, token)
    if _switched(shard, routing):  # its groups are the targets' now: nothing to track
        shard.copying = None


def _switched(shard: Shard, routing: Routing) -> bool:
    switched = shard.switched
    if switched is None or switched.version != routing.version:
        return False
    return shard.partition in switched.switched


def _session(shard: Shard, session: int, token: Any) -> DirtyTracker | None:
    tracker = shard.copying
    if tracker is None or tracker.session != session:
        shard.reply(token, HandoffAnswer(Errors.REBALANCE_IN_PROGRESS, f"no copy session {session} here"))
        return None
    return tracker


def _moves(shard: Shard, tracker: DirtyTracker) -> Callable[[str], bool]:
    routing, partition = tracker.routing, shard.partition
    assert routing is not None
    return lambda group_id: routing.partition_for(group_id) != partition
