"""The controller's pre-copy of one source partition in a repartition (docs/design-precopy.md).

The fenced handoff (actors/controller/repartition.py) freezes a source's moving groups for
its whole export and admits, which grows with their state. For a source of at least
`precopy_min_groups` groups whose leaders all have the pre-copy methods (`fits`; an older
replica has not, and is handed off the fenced way), `attempt` copies while the source
serves and freezes only for the last delta:

1. A copy session, numbered in the plan (`Plan.sessions`, persisted before use): the
   source's leader starts tracking its moving groups (`precopy_begin`; "switched" when
   its log records its switch already: straight to the switch, answered done); then each
   target is fenced with the session (`handoff_fence`: the copies an older session left
   are deleted, older sessions refused). The begin comes first: a switched source never
   has its targets' groups wiped.
2. Rounds while the source serves: a round over the dirty moving groups
   (`precopy_round`), each page exported once durable at the source (`precopy_export`),
   admitted by every target of it with the session (`precopy_admit`), then confirmed
   (`precopy_confirm`); one page at a time, so each target's thread is held one admit at
   a time. After each round `CopyPlan.next_step` (coordinator/precopy.py) decides:
   another round, or freeze.
3. The freeze: every moving group frozen and the last round over what is still dirty
   (`precopy_round(freeze=True)`), its pages exported, admitted, confirmed.
4. The switch (`precopy_switch`: refused unless every moving group's current state is
   durably at its target and this leader froze them), then, as the fenced handoff does,
   the plan records it and the routing is pushed (`Repartitioner.record_switch`).
Any step refused or failed abandons the attempt: the repartitioner aborts a freeze
(`handoff_abort`) and retries with a new session, which copies everything again (the
new fence wipes the old session's copies). The source is in `handing_off` (clients told
NOT_COORDINATOR wait there for its routing) only from its freeze.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from actors.controller.cluster_view import ClusterError
from coordinator.precopy import CopyPlan, CopySettings, Step
from log.codec import encode_payload

if TYPE_CHECKING:
    from actors.controller.repartition import Plan, Repartitioner

logger = logging.getLogger(__name__)
# The methods every leader of the source and its targets needs for a pre-copy.
PRECOPY_METHODS = ("precopy_begin", "precopy_round", "precopy_export", "precopy_confirm", "precopy_admit",
                   "precopy_switch", "handoff_fence")
EMPTY_PAYLOAD = encode_payload([])


class PrecopyDriver:
    """Pre-copies one source at a time per call of `attempt` (module docstring)."""

    def __init__(self, repartitioner: Repartitioner, settings: CopySettings | None = None) -> None:
        self._r = repartitioner
        self.settings = settings or CopySettings()

    async def fits(self, plan: Plan, source: int) -> bool:
        """Whether `source` is pre-copied: big enough, and every leader concerned has the
        methods (a replica of an older version has not)."""
        least = self._r.plane.settings.precopy_min_groups
        if least <= 0:
            return False
        for partition in self._r.takers(plan, source):
            handle = self._r.plane._routed(partition)
            if handle is None or not all(hasattr(handle, method) for method in PRECOPY_METHODS):
                return False
        info = await self._r.call(source, "info")
        return int(info.get("groups") or 0) >= least

    async def attempt(self, plan: Plan, source: int) -> str | None:
        """One pre-copy of `source`; None once its switch is recorded, else why not."""
        r = self._r
        routing = plan.routing().with_switched(source).encode()
        session = await r.new_session(plan, source)
        clock = asyncio.get_running_loop().time
        began = clock()
        begun = await r.call(source, "precopy_begin", routing, session)
        if begun["error"] != "NONE":
            return f"begin: {begun['error']} {begun['detail']}"
        took: dict[str, float] = {"copy_s": 0.0, "copy_rounds": 0.0}
        if begun["detail"] != "switched":
            if why := await r.fence(plan, source, routing, session):
                return why
            copy = CopyPlan(self.settings, _ms(began))
            groups = (await self._step(source, "precopy_round", session))["groups"]
            while True:
                round_began = clock()
                if why := await self._copy_round(plan, source, routing, session):
                    return why
                copy.round_done(groups, _ms(round_began), _ms(clock()))
                groups = (await self._step(source, "precopy_round", session))["groups"]
                if copy.next_step(groups, _ms(clock())) is Step.FREEZE:
                    break
            took.update(copy_s=clock() - began, copy_rounds=float(len(copy.rounds)))
            logger.info("repartition %d: partition %d copied in %d rounds; freezing: %s",
                        plan.version, source, len(copy.rounds), copy.reason)
        frozen = clock()
        r.handing_off.add(source)
        if begun["detail"] != "switched":
            await self._step(source, "precopy_round", session, True)
            if why := await self._copy_round(plan, source, routing, session):
                return why
        took["delta_s"] = clock() - frozen
        switch_began = clock()
        switched = await r.call(source, "precopy_switch", routing, session)
        if switched["error"] != "NONE":
            return f"switch: {switched['error']} {switched['detail']}"
        took["switch_s"] = clock() - switch_began
        await r.record_switch(plan, source, took, frozen, int(begun["groups"]))
        return None

    async def _copy_round(self, plan: Plan, source: int, routing: bytes, session: int) -> str | None:
        """Every page of the current round: exported, admitted by each target, confirmed."""
        r, page = self._r, 0
        while page >= 0:
            exported = await r.call(source, "precopy_export", session, page)
            if exported["error"] != "NONE":
                return f"copy export: {exported['error']} {exported['detail']}"
            records: dict[Any, bytes] = exported["exported"]
            gone: dict[Any, list[str]] = exported["gone"]
            targets = sorted(set(records) | set(gone))
            admitted = await asyncio.gather(*(
                r.call(int(t), "precopy_admit", routing, source, session, records.get(t, EMPTY_PAYLOAD),
                       list(gone.get(t, ())))
                for t in targets
            ))
            for target, answer in zip(targets, admitted, strict=True):
                if answer["error"] != "NONE":
                    return f"copy admit at {target}: {answer['error']} {answer['detail']}"
            await self._step(source, "precopy_confirm", session, page)
            page = exported["next_page"]
        return None

    async def _step(self, source: int, method: str, *args: Any) -> dict[str, Any]:
        """A source step that must succeed (else the attempt is abandoned: `StepRefused`)."""
        answer: dict[str, Any] = await self._r.call(source, method, *args)
        if answer["error"] != "NONE":
            raise StepRefused(f"{method}: {answer['error']} {answer['detail']}")
        return answer


class StepRefused(ClusterError):
    """A source step of a pre-copy was refused (its leader changed: the session is gone);
    the attempt is abandoned like one whose call failed."""


def _ms(seconds: float) -> int:
    return int(seconds * 1000)
