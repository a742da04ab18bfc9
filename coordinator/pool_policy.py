"""How many members a consumer pool wants: the pure scaling decision of `actors.ConsumerPool`.

Pure (no Ray, no clock: every call is given `now_ms`), so it is tested with a
manual clock (tests/core/test_pool_policy.py) and the pool's driver only feeds
it live lag and applies its answer.

How the lag reaches it: `LagPolicy` is pushed (`watched`): the pool parks a lag
watch at the group's leader (coordinator/lag_watch.py) built by `watch_terms`
(the target, a step of half the target), answered when the group's lag
crosses the target or moves by the step, and at the policy's
`next_check_ms`: the moment a decision may change with no change of lag (a
scale-up interval or a cooldown that ends, a partition that would turn
stuck), capped at `keep_alive_ms`. `KedaPolicy` is polled, as KEDA polls:
its `next_check_ms` is its next poll.

`LagPolicy` (the pool's own):
- It judges the group's partitions with a known lag, minus the *stuck* ones:
  lag > 0 and the committed offset unchanged for `stuck_after_ms` (a member
  failing on it, or a poison record). More members cannot help those, so they
  are left out of both the lag sum and the count of lagging partitions.
- Over target (lag in messages summed, or the largest lag in ms, above the
  target): scale up at once, sized from what was measured (below); again only
  after `scale_up_interval_ms`, and never while a scale-up is still starting:
  the caller says how many of its members are `pending` (added, not yet
  committing), and those count as members; a pending member that has not
  started within `start_timeout_ms` of the last change no longer holds the
  next step.
- Sizing a step: the policy keeps the recent decisions' samples (time, the
  committed offsets summed, the lag, the members committing) and, over the
  last `rate_window_ms` in which the same members were committing (at least
  `min_rate_span_ms` of it), measures what they consume (commits' offsets per
  second, per member) and how fast the lag grows (the newest sample before the
  window stays as its start: a steady lag is answered rarely). The producers' rate is the
  two summed; the members wanted are those that consume it plus the lag over
  the target within `catch_up_ms`: ceil((produced + excess / catch_up) /
  per member), a member's capacity being the best rate per member measured in
  the last `capacity_ms` (members idle part of the time measure less). Wanted
  no more than the members there are: no change (the lag falling, or for four
  intervals while it does not; then one more). Nothing measured (no two
  samples of the same members that far apart, or members that consumed
  nothing): within four intervals of the last step, wait for a measurement;
  else (the first step, or no measurement came) one step of `scale_up_step`.
  So a step that needs 3 members gets 3, not one more per interval while the
  lag keeps growing as each new member starts (bench/pool.py).
- Never more members than the lagging partitions (`limit_to_lagging=False`
  lifts it), the partitions, or `max_members`; never fewer than `min_members`.
- Under target for `cooldown_ms` since the last change or the last time over
  target: one member less (`scale_down_step`), and the cooldown starts again.
- Lag unknown (no committed offsets with an end): no change.

`KedaPolicy`: the same pool driven as KEDA's Kafka scaler and the HPA drive a
Deployment, for the comparison benchmark (bench/pool.py): it looks at the lag
every `poll_interval_ms` (KEDA's 30 s), wants ceil(lag / target) members (the
scaler's lagThreshold as an average per replica), capped at the partitions, and
scales down only to the highest want of the last `stabilization_ms` (the HPA's
300 s scale-down window).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

# (topic, partition, committed offset, lag in messages or None, lag in ms or None)
LagRow = tuple[str, int, int, int | None, int | None]


@dataclass(frozen=True, slots=True)
class Decision:
    members: int  # the members wanted
    reason: str  # why (for the pool's log and history)
    lag: int | None  # the lag judged (messages), stuck partitions left out
    lag_ms: int | None
    lagging: int  # partitions with lag > 0, not stuck
    stuck: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Target:
    """The pool's target: lag in messages (summed over the group) or in ms (its largest)."""

    messages: int | None = None
    ms: int | None = None

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.ms is None):
            raise ValueError("give exactly one of target_lag_messages and target_lag_seconds")
        value = self.messages if self.messages is not None else self.ms
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"the target lag must be a number >= 0, got {value!r}")

    def over(self, lag: int | None, lag_ms: int | None) -> bool:
        if self.messages is not None:
            return lag is not None and lag > self.messages
        return lag_ms is not None and self.ms is not None and lag_ms > self.ms

    def measure(self, lag: int | None, lag_ms: int | None) -> int | None:
        return lag if self.messages is not None else lag_ms


def check_bounds(min_members: int, max_members: int) -> None:
    for name, value in (("min_members", min_members), ("max_members", max_members)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if max_members < max(min_members, 1):
        raise ValueError(f"max_members ({max_members}) must be >= min_members ({min_members}) and >= 1")


@dataclass
class StuckTracker:
    """Partitions with lag whose committed offset has not moved for `stuck_after_ms`."""

    stuck_after_ms: int
    seen: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)  # tp -> (committed, since)
    lagging_since: list[int] = field(default_factory=list)  # `since` of the partitions with lag

    def observe(self, rows: Iterable[LagRow], now_ms: int) -> set[tuple[str, int]]:
        stuck: set[tuple[str, int]] = set()
        current: dict[tuple[str, int], tuple[int, int]] = {}
        lagging: list[int] = []
        for topic, partition, committed, lag, _ in rows:
            tp = (topic, partition)
            before = self.seen.get(tp)
            since = before[1] if before is not None and before[0] == committed else now_ms
            current[tp] = (committed, since)
            if lag:
                lagging.append(since)
                if now_ms - since >= self.stuck_after_ms:
                    stuck.add(tp)
        self.seen, self.lagging_since = current, lagging
        return stuck

    def next_stuck_ms(self, now_ms: int) -> int | None:
        """When the next partition with lag turns stuck if its commits stay where they are."""
        return min((s + self.stuck_after_ms for s in self.lagging_since if s + self.stuck_after_ms > now_ms),
                   default=None)


def judged(rows: list[LagRow], stuck: set[tuple[str, int]]) -> tuple[int | None, int | None, int]:
    """(lag summed, largest lag in ms, lagging partitions) over the rows not stuck."""
    live = [r for r in rows if (r[0], r[1]) not in stuck and r[3] is not None]
    if not live:
        return None, None, 0
    lag = sum(r[3] or 0 for r in live)
    known_ms = [r[4] for r in live if r[4] is not None]
    return lag, (max(known_ms) if known_ms else None), sum(1 for r in live if r[3])


def watch_terms(target: Target) -> tuple[int | None, int | None, int]:
    """The lag watch the pool parks for `target`: (over_messages, over_ms, step)."""
    value = target.messages if target.messages is not None else target.ms
    assert value is not None
    return target.messages, target.ms, max(1, value // 2)


@dataclass(frozen=True, slots=True)
class Sample:
    at_ms: int
    consumed: int  # committed offsets summed
    lag: int
    active: int  # members committing (not pending)


@dataclass(frozen=True, slots=True)
class Rates:
    per_member: float  # messages per second each committing member consumed
    growth: float  # messages per second the lag grew (< 0: it fell)
    consumed: float  # messages per second, all members


def measure_rates(samples: list[Sample], min_span_ms: int) -> Rates | None:
    """Rates over the newest run of samples with the same committing members, if it spans
    `min_span_ms`; None otherwise, or with no member committing."""
    if not samples or samples[-1].active <= 0:
        return None
    last = samples[-1]
    first = last
    for sample in reversed(samples):
        if sample.active != last.active:
            break
        first = sample
    span_ms = last.at_ms - first.at_ms
    if span_ms < max(1, min_span_ms):
        return None
    consumed = max(0, last.consumed - first.consumed) * 1000 / span_ms
    return Rates(consumed / last.active, (last.lag - first.lag) * 1000 / span_ms, consumed)


def sized_step(rates: Rates, per_member: float, excess: float, catch_up_ms: int) -> int | None:
    """The members that consume the producers' rate (`rates`: consumed + lag growth) and
    `excess` messages over the target within `catch_up_ms`, at `per_member` messages per
    second each; None: nothing measured to size from."""
    if per_member <= 0:
        return None
    produced = rates.consumed + rates.growth
    return math.ceil((produced + max(0.0, excess) * 1000 / max(1, catch_up_ms)) / per_member)


@dataclass
class LagPolicy:
    target: Target
    min_members: int
    max_members: int
    partitions: int  # the subscribed topics' partitions: more members would idle
    cooldown_ms: int = 30_000
    scale_up_interval_ms: int = 2_000
    scale_up_step: int = 1
    scale_down_step: int = 1
    stuck_after_ms: int = 60_000
    limit_to_lagging: bool = True
    keep_alive_ms: int = 10_000  # the longest the pool's lag watch stays parked
    rate_window_ms: int = 5_000
    min_rate_span_ms: int = 1_000
    catch_up_ms: int = 30_000
    start_timeout_ms: int = 10_000
    capacity_ms: int = 60_000  # how long a measured rate per member stays the capacity
    pending_check_ms: int = 500  # while members start: how often to look again
    watched = True  # pushed: the pool parks a lag watch (module docstring)
    _stuck: StuckTracker = field(init=False)
    _samples: list[Sample] = field(default_factory=list, init=False)
    _pending: int = field(default=0, init=False)
    _over: bool = field(default=False, init=False)  # over target at the last decision
    _capacity: list[tuple[int, float]] = field(default_factory=list, init=False)  # (at, per member)
    _last_change_ms: int | None = field(default=None, init=False)
    _last_over_ms: int | None = field(default=None, init=False)
    _members: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        check_bounds(self.min_members, self.max_members)
        self._stuck = StuckTracker(self.stuck_after_ms)

    def next_check_ms(self, now_ms: int) -> int:
        """When a decision may change with the lag unchanged: a scale-up wait or a cooldown
        that ends, a partition that turns stuck; at the latest `keep_alive_ms` from now."""
        due = [now_ms + self.keep_alive_ms]
        if self._last_change_ms is not None:
            changed = self._last_change_ms
            due += [changed + self.scale_up_interval_ms, changed + 4 * self.scale_up_interval_ms]
        if self._members > self.min_members:
            due.append(self._quiet_since() + self.cooldown_ms)
        stuck = self._stuck.next_stuck_ms(now_ms)
        if stuck is not None:
            due.append(stuck)
        starting = self._last_change_ms is not None and now_ms - self._last_change_ms < self.start_timeout_ms
        if self._pending and starting:
            due.append(now_ms + self.pending_check_ms)  # members starting: they hold the next step
        measured = self._measurable_ms()
        if measured is not None and self._over:
            due.append(measured)  # over target, waiting for a measurement
        return min(t for t in due if t > now_ms)

    def _measurable_ms(self) -> int | None:
        """When the newest run of samples with the same members committing spans enough to measure."""
        if not self._samples:
            return None
        active = self._samples[-1].active
        start = self._samples[-1].at_ms
        for sample in reversed(self._samples):
            if sample.active != active:
                break
            start = sample.at_ms
        return start + self.min_rate_span_ms

    def _quiet_since(self) -> int:
        return max(t for t in (self._last_change_ms, self._last_over_ms, 0) if t is not None)

    @property
    def ceiling(self) -> int:
        """At most: max_members, and one member per partition."""
        return max(self.min_members, min(self.max_members, max(self.partitions, 1)))

    def _sample(self, rows: list[LagRow], stuck: set[tuple[str, int]], lag: int, active: int,
                now_ms: int) -> None:
        consumed = sum(r[2] for r in rows if (r[0], r[1]) not in stuck and r[2] >= 0)
        recent = [s for s in self._samples if now_ms - s.at_ms <= self.rate_window_ms]
        older = self._samples[:len(self._samples) - len(recent)]
        # The newest sample before the window stays as an anchor: answers come as the lag
        # moves, so a steady lag gives few, and the rate is then measured over a longer span.
        self._samples = [*older[-1:], *recent, Sample(now_ms, consumed, lag, active)]

    def _per_member(self, rates: Rates, now_ms: int) -> float:
        """A member's capacity: the best rate per member measured over the last `capacity_ms`
        (a member idle part of the time, its partitions caught up or moving, measures less
        than it can do)."""
        self._capacity = [(at, r) for at, r in self._capacity if now_ms - at <= self.capacity_ms]
        self._capacity.append((now_ms, rates.per_member))
        return max(r for _, r in self._capacity)

    def _excess(self, lag: int, lag_ms: int | None) -> float:
        """The messages over the target (for an ms target, its share of the lag)."""
        if self.target.messages is not None:
            return lag - self.target.messages
        if not lag_ms or self.target.ms is None:
            return 0.0
        return lag * max(0.0, 1 - self.target.ms / lag_ms)

    def decide(self, rows: list[LagRow], members: int, now_ms: int, pending: int = 0) -> Decision:
        """`pending`: of `members`, those added but not yet committing (module docstring)."""
        stuck = self._stuck.observe(rows, now_ms)
        lag, lag_ms, lagging = judged(rows, stuck)
        stuck_t = tuple(sorted(stuck))
        pending = max(0, min(pending, members))
        self._pending = pending

        def answer(wanted: int, reason: str) -> Decision:
            wanted = max(self.min_members, min(self.ceiling, wanted))
            if wanted != members:
                self._last_change_ms = now_ms
            self._members = wanted
            return Decision(wanted, reason, lag, lag_ms, lagging, stuck_t)

        if members < self.min_members or members > self.ceiling:
            return answer(members, "bounds")
        if lag is None:
            return answer(members, "lag unknown")
        self._sample(rows, stuck, lag, members - pending, now_ms)
        self._over = self.target.over(lag, lag_ms)
        if self._over:
            self._last_over_ms = now_ms
            cap = min(self.ceiling, lagging) if self.limit_to_lagging else self.ceiling
            if members >= cap:
                return answer(members, "over target, at the cap")
            since = None if self._last_change_ms is None else now_ms - self._last_change_ms
            if pending and (since is None or since < self.start_timeout_ms):
                return answer(members, "over target, a scale-up is starting")
            if since is not None and since < self.scale_up_interval_ms:
                return answer(members, "over target, members added are catching up")
            rates = measure_rates(self._samples, self.min_rate_span_ms)
            per_member = 0.0 if rates is None else self._per_member(rates, now_ms)
            sized = None if rates is None else sized_step(rates, per_member, self._excess(lag, lag_ms),
                                                          self.catch_up_ms)
            if sized is not None and rates is not None:
                if sized > members:
                    return answer(min(cap, sized), f"over target, sized: {per_member:.0f}/s per member, "
                                                   f"lag {rates.growth:+.0f}/s")
                if rates.growth < 0:
                    return answer(members, "over target, the lag falls fast enough")
                # Enough members by their measured capacity, the lag not falling yet (partitions
                # moving, an uneven backlog): one more only after four intervals of it.
                if since is not None and since < 4 * self.scale_up_interval_ms:
                    return answer(members, "over target, enough measured: waiting for the lag to fall")
                return answer(min(cap, members + 1), "over target, enough measured but the lag not falling")
            # Nothing measured since the last step (its members just started committing):
            # wait for a measurement, up to four intervals, rather than guess again.
            if since is not None and since < 4 * self.scale_up_interval_ms:
                return answer(members, "over target, measuring the members added")
            return answer(min(cap, members + self.scale_up_step), "over target, not measured: one step")
        if members > self.min_members and now_ms - self._quiet_since() >= self.cooldown_ms:
            self._last_over_ms = now_ms  # the next step waits a whole cooldown again
            return answer(members - self.scale_down_step, "under target for the cooldown")
        return answer(members, "under target")


@dataclass
class KedaPolicy:
    """KEDA's Kafka scaler with the HPA's defaults, scaled by the caller (see the module docstring)."""

    target: Target
    min_members: int
    max_members: int
    partitions: int
    poll_interval_ms: int = 30_000
    stabilization_ms: int = 300_000
    watched = False  # polled, as KEDA does
    _wants: list[tuple[int, int]] = field(default_factory=list, init=False)  # (at, wanted)
    _last_poll_ms: int | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        check_bounds(self.min_members, self.max_members)

    def next_check_ms(self, now_ms: int) -> int:
        """The next poll."""
        last = self._last_poll_ms
        return now_ms if last is None else max(now_ms, last + self.poll_interval_ms)

    def decide(self, rows: list[LagRow], members: int, now_ms: int, pending: int = 0) -> Decision:
        lag, lag_ms, lagging = judged(rows, set())
        if self._last_poll_ms is not None and now_ms - self._last_poll_ms < self.poll_interval_ms:
            return Decision(members, "between polls", lag, lag_ms, lagging)
        self._last_poll_ms = now_ms
        measure = self.target.measure(lag, lag_ms)
        threshold = self.target.messages if self.target.messages is not None else self.target.ms
        assert threshold is not None
        if measure is None:
            want = members
        else:
            want = math.ceil(measure / threshold) if threshold > 0 else (1 if measure else 0)
        want = max(self.min_members, min(self.max_members, max(self.partitions, 1), want))
        self._wants = [(at, w) for at, w in self._wants if now_ms - at < self.stabilization_ms]
        self._wants.append((now_ms, want))
        wanted = want if want >= members else min(members, max(w for _, w in self._wants))
        return Decision(wanted, "keda", lag, lag_ms, lagging)
