"""Pre-copy for a repartition's handoff: copy the moving groups while they are served.

The fenced handoff (coordinator/handoff.py) freezes a source's moving groups for the whole
export and admit, which lasts as long as their state is big (bench.scale: 37.9 s for
300,000 groups). Pre-copy is live migration's answer (docs/design-precopy.md has the whole
design, its crash cases and its records): the source keeps serving the moving groups
while their state is copied to the targets in pages, tracks which of them changed since
their page was captured, copies those again while that set shrinks, and only then
freezes, for one small final delta, the switch and the routing.

This module is the pure core of it, no I/O and no clock (times come in as arguments):

- `DirtyTracker`, one per copy session on the source's leader (volatile: a new leader
  starts a new session). A group is *clean* once a target durably holds the state it has
  now: its page was captured (`captured`) and admitted (`confirm`) and nothing was
  written to it since. Everything else is *dirty*: never copied, written since its
  capture (`touch`, called by the shard's write methods, one set insertion), or captured
  in a page that was never confirmed (an admit that failed: back to dirty at the next
  round). A group deleted or expired at the source is dirty like any other written one;
  its next capture finds no records and the page says it is `gone` at its target.
- `CopyPlan`, the driver's decision after each round: another delta round, or freeze.
  It freezes once the predicted freeze (the dirty groups at the last round's measured
  cost per group) fits `freeze_target_ms`, or when rounds stop paying (the dirty set no
  longer shrinks by `shrink_ratio`), or after `max_rounds`, or past `copy_deadline_ms`.
- `export_page`, one page of the current round at the source: each group's records
  (`handoff.group_records`, what rebuilds it in replay order) by target partition, the
  gone groups by target partition, and where the next page starts.

The switch is allowed only from a tracker that is `clean` (`switch_step`'s caller checks
it): every moving group's current state is durable at its target, so a group that
changed after its copy can never switch with its stale copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from coordinator.handoff import group_records
from coordinator.records import Record

if TYPE_CHECKING:
    from coordinator.routing import Routing
    from coordinator.shard import Shard

# A pre-copy page is smaller than a frozen export's (handoff.EXPORT_PAGE_RECORDS): the
# source serves its other groups on the same thread meanwhile (DESIGN section 9), and an
# export costs about 3.5 us a record there (bench.scale), so a page holds it ~20 ms.
COPY_PAGE_RECORDS = 5_000


class DirtyTracker:
    """Which moving groups a target may not hold the current state of (module docstring).

    `session` is the driver's number for this copy (the targets are fenced by it), `routing`
    the repartition's with the source switched (what the groups move by)."""

    __slots__ = ("session", "routing", "round", "dirty", "in_flight", "order")

    def __init__(self, session: int, moving: Iterable[str], routing: Routing | None = None) -> None:
        self.session = session
        self.routing = routing
        self.round = 0
        # Written since captured, or never captured. May hold groups that stay here too
        # (`touch` does not ask the routing: the commit path pays one set insertion);
        # `start_round` drops them.
        self.dirty: set[str] = set(moving)
        # Captured pages not confirmed yet, by the index of their first group in `order`.
        self.in_flight: dict[int, list[str]] = {}
        # The current round's groups, in id order: pages are ranges of it.
        self.order: list[str] = []

    def touch(self, group_id: str) -> None:
        """The shard wrote a record of `group_id` (the commit path: keep it one insertion)."""
        self.dirty.add(group_id)

    def start_round(self, moves: Callable[[str], bool]) -> int:
        """Begin a round over every dirty moving group; how many it has.

        Pages captured but never confirmed are dirty again (their admit failed or was
        abandoned: the target may or may not hold them, and copying again is harmless)."""
        for ids in self.in_flight.values():
            self.dirty.update(ids)
        self.in_flight.clear()
        self.order = sorted(g for g in self.dirty if moves(g))
        self.dirty = set(self.order)
        self.round += 1
        return len(self.order)

    def captured(self, start: int, ids: list[str]) -> None:
        """The page of `ids` from `start` in `order` was read: their state as of now travels.

        A page asked again (the driver retries it) is captured again: the newer state wins."""
        self.dirty.difference_update(ids)
        self.in_flight[start] = ids

    def confirm(self, start: int) -> int:
        """Every target durably admitted the page captured at `start`; how many groups.

        Groups written after the capture are dirty already (`touch`) and stay so."""
        return len(self.in_flight.pop(start, ()))

    def pending(self, moves: Callable[[str], bool]) -> int:
        """How many moving groups are dirty or in flight now."""
        return sum(1 for g in self.dirty if moves(g)) + sum(map(len, self.in_flight.values()))

    def clean(self, moves: Callable[[str], bool]) -> bool:
        """Whether every moving group's current state is durable at its target."""
        return not self.in_flight and not any(moves(g) for g in self.dirty)


@dataclass(frozen=True, slots=True)
class CopyPage:
    """One page of a round: records and gone groups by target, where the next page starts
    (-1: the round's last), and how many groups it covered."""

    exported: dict[int, list[Record]] = field(default_factory=dict)
    gone: dict[int, list[str]] = field(default_factory=dict)
    groups: int = 0
    records: int = 0
    next_page: int = -1


def export_page(
    shard: Shard, tracker: DirtyTracker, routing: Routing, start: int, page_records: int = COPY_PAGE_RECORDS
) -> CopyPage:
    """Capture the page of `tracker.order` from `start`: groups until their records reach
    `page_records` (at least one group). A group with no records left is gone: its target
    deletes its copy."""
    if start < 0 or (start >= len(tracker.order) and start != 0):
        raise ValueError(f"page {start} is outside round {tracker.round} of {len(tracker.order)} groups")
    order = tracker.order
    exported: dict[int, list[Record]] = {}
    gone: dict[int, list[str]] = {}
    end, taken = start, 0
    while end < len(order) and (taken < page_records or end == start):
        group_id = order[end]
        target = routing.partition_for(group_id)
        records = group_records(shard, group_id)
        if records:
            exported.setdefault(target, []).extend(records)
        else:
            gone.setdefault(target, []).append(group_id)
        taken += len(records)
        end += 1
    tracker.captured(start, order[start:end])
    next_page = end if end < len(order) else -1
    return CopyPage(exported, gone, end - start, taken, next_page)


class Step(Enum):
    COPY = "copy"  # another delta round while the source serves
    FREEZE = "freeze"  # freeze every moving group and copy the last delta


@dataclass(frozen=True, slots=True)
class CopySettings:
    freeze_target_ms: int = 500  # the freeze the issue allows a moved group is 1 s at p99
    max_rounds: int = 4  # the full copy and up to three deltas
    shrink_ratio: float = 0.5  # a delta round must at least halve the dirty groups to repeat
    copy_deadline_ms: int = 600_000  # a copy that never converges freezes anyway

    def __post_init__(self) -> None:
        if self.freeze_target_ms < 0 or self.max_rounds < 1 or self.copy_deadline_ms < 0:
            raise ValueError(f"copy settings out of range: {self}")
        if not 0.0 < self.shrink_ratio <= 1.0:
            raise ValueError(f"shrink_ratio must be in (0, 1], got {self.shrink_ratio}")


@dataclass(frozen=True, slots=True)
class Round:
    groups: int
    elapsed_ms: int


@dataclass(slots=True)
class CopyPlan:
    """The driver's record of one session's rounds and its decision after each."""

    settings: CopySettings
    began_ms: int
    rounds: list[Round] = field(default_factory=list)
    reason: str = ""

    def round_done(self, groups: int, began_ms: int, now_ms: int) -> None:
        self.rounds.append(Round(groups, max(0, now_ms - began_ms)))

    def predicted_freeze_ms(self, dirty: int) -> int:
        """The last round's cost per group times `dirty` (0 without a round that moved any)."""
        timed = [r for r in self.rounds if r.groups > 0]
        if not timed:
            return 0
        last = timed[-1]
        return -(-dirty * last.elapsed_ms // last.groups)

    def next_step(self, dirty: int, now_ms: int) -> Step:
        """After a round: copy again, or freeze (`reason` says why)."""
        settings, rounds = self.settings, self.rounds
        predicted = self.predicted_freeze_ms(dirty)
        if dirty == 0 or predicted <= settings.freeze_target_ms:
            return self._freeze(f"{dirty} dirty groups, a freeze of ~{predicted} ms")
        if len(rounds) >= settings.max_rounds:
            return self._freeze(f"{len(rounds)} rounds done, {dirty} dirty groups")
        if now_ms - self.began_ms >= settings.copy_deadline_ms:
            return self._freeze(f"the copy ran {now_ms - self.began_ms} ms, {dirty} dirty groups")
        if len(rounds) >= 2 and dirty > settings.shrink_ratio * rounds[-1].groups:
            return self._freeze(f"the dirty set stopped shrinking ({rounds[-1].groups} -> {dirty})")
        self.reason = f"{dirty} dirty groups, a freeze of ~{predicted} ms: another round"
        return Step.COPY

    def _freeze(self, reason: str) -> Step:
        self.reason = reason
        return Step.FREEZE
