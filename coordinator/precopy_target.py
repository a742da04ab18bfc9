"""A pre-copy's target steps: the per-source fence and the admit of a copy session's pages.

docs/design-precopy.md has the whole design; coordinator/precopy.py the source's side.

- `fence_step(source, routing, session)`: a new copy session from `source` begins. The
  target deletes, durably, every copy it holds of `source`'s groups (left by an earlier
  session or an abandoned handoff: a group deleted at the source since would otherwise
  come back when the target takes ownership), then records the fence, a service-state
  entry `copy-session/<source>` = `version;session;count;previous` (replayed as opaque
  service state: a reload, a promoted follower and a compacted log keep it, and a load
  owns by `planned_routing` until the controller's routing arrives). Refused when the target
  knows a newer repartition or a session as new (a late call of an older attempt must
  not wipe a newer session's copies; the refusal's `session` says the fenced one, so a
  controller restarted without its numbers goes past it), and by a target that does not
  know the repartition yet (loaded since the controller's push). Once `source` switched it
  answers done and deletes nothing: its groups are this target's own then. Today's
  fenced handoff fences too, before an attempt's first admit (coordinator/handoff.py).
- `admit_step(source, routing, session, records, gone)`: a page of the fenced session:
  refused for any other session (a late call of an older one must not overwrite a newer
  copy); the `gone` groups and the page's groups are deleted first, then the records
  written (`handoff.admit_groups`: not owned, they are copies, no timer runs), then the
  `admitted` marker, counting every record written, tombstones included, so analytics
  count them as copies (spark_bridge/ownership.py).
Both answer through the shard's Result, released once durable (`PartitionRuntime.drive`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator import handoff
from coordinator.errors import Errors
from coordinator.handoff import HandoffAnswer
from coordinator.records import Record, ServiceStateKey, ServiceStateValue
from coordinator.routing import Routing, group_hash

if TYPE_CHECKING:
    from coordinator.shard import Shard

COPY_SESSION_KIND = "copy-session"
_SWITCHED = "the source switched: its groups are owned here"


def fence_key(source: int) -> ServiceStateKey:
    return ServiceStateKey(COPY_SESSION_KIND, str(source))


def fenced(shard: Shard, source: int) -> tuple[int, int] | None:
    """(version, session) of `source`'s latest fence here, or None."""
    data = shard.service_state.get(fence_key(source))
    if data is None:
        return None
    version, session = data.decode("ascii").split(";")[:2]
    return int(version), int(session)


def fence_value(routing: Routing, session: int) -> ServiceStateValue:
    """`version;session;count;previous`: the session, and the repartition's counts (a
    reloaded target knows from them which groups it holds as copies, `planned_routing`)."""
    text = f"{routing.version};{session};{routing.count};{routing.previous}"
    return ServiceStateValue(text.encode("ascii"))


def planned_routing(shard: Shard) -> Routing | None:
    """The newest repartition a fence in this shard's log names, with no source switched:
    what a target loaded without the controller's routing owns by until the controller
    pushes it (`Shard.on_loaded`). Its copies are then copies (no timer runs for them,
    NOT_COORDINATOR for their requests), never its own before their source's switch; the
    push (`handoff.route_step`) says which sources switched. None: no fence here."""
    newest: Routing | None = None
    for key, data in shard.service_state.items():
        if key.kind != COPY_SESSION_KIND:
            continue
        fields = data.decode("ascii", "replace").split(";")
        if len(fields) != 4 or not all(f.isdigit() for f in fields):
            continue  # not a fence this version wrote: a load never fails on it
        version, _, count, previous = map(int, fields)
        if newest is None or version > newest.version:
            newest = Routing(count, previous, frozenset(), version)
    return newest


def copies_from(shard: Shard, source: int, routing: Routing) -> list[str]:
    """The copies this shard holds of groups `source` owns before it switches."""
    previous = routing.previous
    assert previous is not None
    return sorted(g for g in shard.copies if group_hash(g) % previous == source)


def fence_step(shard: Shard, source: int, routing: Routing, session: int, token: Any) -> None:
    if (refused := _refusal(shard, source, routing, session)) is not None:
        if refused.detail != _SWITCHED:
            shard.reply(token, refused)
            return
        shard.reply(token, HandoffAnswer(Errors.NONE))  # its groups are this target's own: no copy
        return
    latest = fenced(shard, source)
    if latest is not None and latest >= (routing.version, session):
        # Never twice the same session: its copies, confirmed at the source, stay.
        shard.reply(token, HandoffAnswer(
            Errors.FENCED_LEADER_EPOCH, f"session {latest[1]} of repartition {latest[0]} is fenced here",
            session=latest[1] if latest[0] == routing.version else 0,
        ))
        return
    stale = copies_from(shard, source, routing)
    written = sum(handoff.forget_durably(shard, group_id) for group_id in stale)
    if written:
        _mark(shard, routing, written)
    shard.write(Record(fence_key(source), fence_value(routing, session)))
    shard.reply(token, HandoffAnswer(Errors.NONE, groups=len(stale)))


def admit_step(
    shard: Shard,
    source: int,
    routing: Routing,
    session: int,
    records: list[Record],
    gone: list[str],
    token: Any,
) -> None:
    if (refused := _refusal(shard, source, routing, session)) is not None:
        shard.reply(token, refused)
        return
    if fenced(shard, source) != (routing.version, session):
        shard.reply(token, HandoffAnswer(
            Errors.FENCED_LEADER_EPOCH, f"not the fenced copy session of partition {source}",
        ))
        return
    previous = routing.previous or 1  # a repartition's: `_refusal` checked
    ids = {record.key.group_id for record in records} | set(gone)
    if any(group_hash(group_id) % previous != source for group_id in ids):
        shard.reply(token, HandoffAnswer(Errors.INVALID_REQUEST, f"groups not of partition {source}"))
        return
    written = sum(handoff.forget_durably(shard, group_id) for group_id in gone)
    written += handoff.admit_groups(shard, records)
    if written:
        _mark(shard, routing, written)
    shard.reply(token, HandoffAnswer(Errors.NONE, groups=len(ids)))


def _mark(shard: Shard, routing: Routing, written: int) -> None:
    shard.write(Record(handoff.ADMIT_KEY, ServiceStateValue(f"{routing.version};{written}".encode("ascii"))))


def _refusal(shard: Shard, source: int, routing: Routing, session: int) -> HandoffAnswer | None:
    previous = routing.previous
    if previous is None or not 0 <= source < previous or session < 1:
        return HandoffAnswer(Errors.INVALID_REQUEST, "not a repartition's copy session")
    if shard.partition not in handoff_takers(routing, source) or shard.partition == source:
        why = f"partition {shard.partition} takes no group of {source}"
        return HandoffAnswer(Errors.INVALID_REQUEST, why)
    known = shard.owner
    if known is None or known.version < routing.version:
        # A leader loaded since the controller's last push: it could not tell a copy from a
        # group it owns (an admit would start the copy's timers). The push comes soon.
        why = f"repartition {routing.version} is not known here yet"
        return HandoffAnswer(Errors.REBALANCE_IN_PROGRESS, why)
    if known.version > routing.version:
        why = f"a newer repartition ({known.version}) is known here"
        return HandoffAnswer(Errors.FENCED_LEADER_EPOCH, why)
    if source in known.switched:
        return HandoffAnswer(Errors.FENCED_LEADER_EPOCH, _SWITCHED)
    return None


def handoff_takers(routing: Routing, source: int) -> range:
    """The partitions `source`'s groups go to under `routing` (itself included when growing)."""
    previous = routing.previous
    assert previous is not None
    if routing.count > previous:
        return range(source, routing.count, previous)
    return range(source % routing.count, source % routing.count + 1)
