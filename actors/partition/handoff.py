"""A partition's part in a repartition: the controller's handoff steps, run on its shard.

The steps and their rules are `coordinator/handoff.py`'s; this part validates the
controller's arguments (any Ray process can call an actor), runs each step through the
runtime (`PartitionRuntime.drive`: the answer is released once everything it depends on
is durable at the high watermark, and a step that writes is refused below min ISR) and
carries the moved groups' records between partitions in the log's own encoding, so a
group arrives exactly as its source's log holds it.

- `export(routing, page)`: freeze the groups `routing` moves off this partition; a page
  of their records by target partition, once durable here, and where the next starts.
- `fence(routing, source, session)`: before an attempt's admits, forget the copies of
  `source`'s groups an older session or an abandoned attempt left here
  (coordinator/precopy_target.py); older sessions are refused from then on.
- `admit(version, payload)`: write another partition's exported groups as this one's own.
- `switch(routing)`: the commit point, the routing record in this partition's log.
- `abort()`: serve frozen groups again.
- `route(routing)`: the controller's current routing (which groups this leader owns).
- A pre-copy (docs/design-precopy.md) at the source: `precopy_begin(routing, session)`,
  `precopy_round(session, freeze)`, `precopy_export(session, page)` (records and gone
  groups by target), `precopy_confirm(session, page)`, `precopy_switch(routing, session)`;
  at each target `fence` then `precopy_admit(routing, source, session, payload, gone)`.
  Only the admits, the fence and the switches write (refused below min ISR); a copy
  round runs while a follower catches up.
An admit carries only a group's records (offsets, group metadata, KIP-848 records): never
a service-state entry, which could hand the partition's own groups away.
Both a switch and a route are recorded in a replicated leader's state file before they
are answered (`ReplicaRoles.record_leadership`): a full restart resumes from it.
A routing travels as `Routing.encode()`'s bytes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from coordinator import handoff, precopy_source, precopy_target
from coordinator.errors import Errors
from coordinator.handoff import HandoffAnswer
from coordinator.records import CONSUMER_GROUP_KEY_TYPES, GroupMetadataKey, OffsetCommitKey, Record
from coordinator.routing import Routing
from coordinator.runtime import PartitionRuntime
from coordinator.shard import Shard
from coordinator.status import MAX_GROUP_ID_BYTES
from log.codec import decode_records, encode_payload

# The most records one admit may carry (a partition's groups travel in several admits).
MAX_ADMIT_BYTES = 256 << 20
# The most gone groups one pre-copy admit may name (a page names at most its groups).
MAX_GONE = 1_000_000
MAX_GROUP_ID_CHARS = MAX_GROUP_ID_BYTES
# What a group's copy is made of (`handoff.group_records`): never a service-state entry (an
# admitted switch record would hand this partition's own groups away).
COPY_KEY_TYPES = frozenset({OffsetCommitKey, GroupMetadataKey, *CONSUMER_GROUP_KEY_TYPES})


class HandoffPart:
    """The handoff steps of one partition actor. `host` gives the runtime and delivers
    what it releases (`OffsetPartition._deliver`, which also starts the flush)."""

    def __init__(
        self,
        runtime: Callable[[], PartitionRuntime],
        deliver: Callable[[Any], None],
        now_ms: Callable[[], int],
        record: Callable[[], Awaitable[None]],
    ) -> None:
        self._runtime = runtime
        self._deliver = deliver
        self._now_ms = now_ms
        # Records the routing the shard now owns by in the leader's state file.
        self._record = record

    async def export(self, routing: bytes, page: int = 0) -> dict[str, Any]:
        grown = parse_routing(routing)
        if type(page) is not int or page < 0:
            raise ValueError(f"an export page is an int >= 0, got {page!r}")
        answer = await self._drive(lambda shard, token: handoff.export_step(shard, grown, token, page), False)
        return {
            **_plain(answer),
            "next_page": answer.next_page,
            "switched": answer.switched,
            "exported": {target: encode_payload(records) for target, records in answer.exported.items()},
        }

    async def fence(self, routing: bytes, source: int, session: int) -> dict[str, Any]:
        grown = parse_routing(routing)
        _check_source(source, session)
        step = partial(precopy_target.fence_step, source=source, routing=grown, session=session)
        answer = await self._drive(lambda shard, token: step(shard, token=token), True)
        return {**_plain(answer), "session": answer.session}

    async def admit(self, version: int, payload: bytes) -> dict[str, Any]:
        if type(version) is not int:
            raise ValueError("admit takes the repartition's version (an int) and the exported records' bytes")
        records = _decode(payload)
        if not records:
            return _plain(HandoffAnswer(Errors.NONE))
        step = partial(handoff.admit_step, admitted=records, version=version)
        return _plain(await self._drive(lambda shard, token: step(shard, token=token), True))

    # ------------------------------------------------ pre-copy (coordinator/precopy_*.py)

    async def precopy_begin(self, routing: bytes, session: int) -> dict[str, Any]:
        grown = parse_routing(routing)
        _check_session(session)
        step = partial(precopy_source.begin_step, routing=grown, session=session)
        return _plain(await self._drive(lambda shard, token: step(shard, token=token), False))

    async def precopy_round(self, session: int, freeze: bool = False) -> dict[str, Any]:
        """A round over the dirty moving groups; with `freeze`, the last one, every moving
        group frozen first."""
        _check_session(session)
        if type(freeze) is not bool:
            raise ValueError(f"freeze is a bool, got {freeze!r}")
        start = precopy_source.freeze_step if freeze else precopy_source.round_step
        step = partial(start, session=session)
        return _plain(await self._drive(lambda shard, token: step(shard, token=token), False))

    async def precopy_export(self, session: int, page: int) -> dict[str, Any]:
        _check_session(session)
        _check_page(page)
        step = partial(precopy_source.export_step, session=session, page=page)
        answer = await self._drive(lambda shard, token: step(shard, token=token), False)
        return {
            **_plain(answer),
            "next_page": answer.next_page,
            "exported": {target: encode_payload(records) for target, records in answer.exported.items()},
            "gone": answer.gone,
        }

    async def precopy_confirm(self, session: int, page: int) -> dict[str, Any]:
        _check_session(session)
        _check_page(page)
        step = partial(precopy_source.confirm_step, session=session, page=page)
        return _plain(await self._drive(lambda shard, token: step(shard, token=token), False))

    async def precopy_admit(
        self, routing: bytes, source: int, session: int, payload: bytes, gone: list[str]
    ) -> dict[str, Any]:
        grown = parse_routing(routing)
        _check_source(source, session)
        records = _decode(payload)
        if type(gone) is not list or len(gone) > MAX_GONE or not all(_group_id(g) for g in gone):
            raise ValueError(f"gone is a list of at most {MAX_GONE} group ids")
        step = partial(
            precopy_target.admit_step, source=source, routing=grown, session=session,
            records=records, gone=gone,
        )
        return _plain(await self._drive(lambda shard, token: step(shard, token=token), True))

    async def precopy_switch(self, routing: bytes, session: int) -> dict[str, Any]:
        grown = parse_routing(routing)
        _check_session(session)
        step = partial(precopy_source.switch_step, routing=grown, session=session)
        answer = await self._drive(lambda shard, token: step(shard, token=token), True)
        if answer.error is Errors.NONE:
            await self._record()
        return _plain(answer)

    # ------------------------------------------------ the commit point, the routing

    async def switch(self, routing: bytes) -> dict[str, Any]:
        grown = parse_routing(routing)
        answer = await self._drive(lambda shard, token: handoff.switch_step(shard, grown, token), True)
        if answer.error is Errors.NONE:
            await self._record()
        return _plain(answer)

    async def abort(self) -> dict[str, Any]:
        return _plain(await self._drive(handoff.abort_step, False))

    async def route(self, routing: bytes) -> int | None:
        """Own by `routing` from now, recorded in the state file before the answer (nothing
        is written to the log). The version known after; None without a shard (loading):
        the controller pushes again."""
        pushed = parse_routing(routing)
        shard = self._runtime().shard
        if shard is None:
            return None
        handoff.route_step(shard, pushed, self._now_ms())
        await self._record()
        return shard.owner.version if shard.owner is not None else 0

    async def _drive(self, step: Callable[[Shard, Any], None], writes: bool) -> HandoffAnswer:
        future: asyncio.Future[HandoffAnswer] = asyncio.get_running_loop().create_future()
        token = _Step(future)
        self._deliver(self._runtime().drive(step, token, self._now_ms(), writes))
        return await future


class _Step:
    """The runtime's token for one step (`OffsetPartition._deliver` delivers to it)."""

    __slots__ = ("deliver", "started", "kind")

    def __init__(self, future: asyncio.Future[HandoffAnswer]) -> None:
        self.started = time.perf_counter()
        self.kind = "Handoff"
        self.deliver = lambda answer: future.done() or future.set_result(answer)


def parse_routing(data: object) -> Routing:
    if type(data) is not bytes or len(data) > 65_536:
        raise ValueError("a routing travels as Routing.encode()'s bytes")
    try:
        routing = Routing.decode(data)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"not an encoded routing: {data[:80]!r}") from None
    if routing.count < 1 or (routing.previous is not None and routing.previous < 1) or routing.version < 0:
        raise ValueError(f"not a valid routing: {routing}")
    return routing


def _plain(answer: HandoffAnswer) -> dict[str, Any]:
    return {"error": answer.error.name, "detail": answer.detail, "groups": answer.groups}


def _check_source(source: object, session: object) -> None:
    if type(source) is not int or source < 0:
        raise ValueError(f"a source partition is an int >= 0, got {source!r}")
    _check_session(session)


def _check_session(session: object) -> None:
    if type(session) is not int or session < 1:
        raise ValueError(f"a copy session is an int >= 1, got {session!r}")


def _check_page(page: object) -> None:
    if type(page) is not int or page < 0:
        raise ValueError(f"a page is an int >= 0, got {page!r}")


def _group_id(group_id: object) -> bool:
    return type(group_id) is str and 0 < len(group_id) <= MAX_GROUP_ID_CHARS


def _decode(payload: object) -> list[Record]:
    if type(payload) is not bytes or len(payload) > MAX_ADMIT_BYTES:
        raise ValueError(f"the exported records travel as bytes of at most {MAX_ADMIT_BYTES}")
    try:
        records = decode_records(payload)
    except Exception as exc:
        raise ValueError(f"the exported records do not decode: {exc!r}") from None
    if not all(type(record.key) in COPY_KEY_TYPES for record in records):
        raise ValueError("the exported records hold a record no group's copy has")
    return records
