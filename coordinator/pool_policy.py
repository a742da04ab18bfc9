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
  target): scale up at once, by `scale_up_step`; again only after
  `scale_up_interval_ms`, and only if the lag did not shrink since the last
  step (the members added are still catching up otherwise).
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
    watched = True  # pushed: the pool parks a lag watch (module docstring)
    _stuck: StuckTracker = field(init=False)
    _last_change_ms: int | None = field(default=None, init=False)
    _last_over_ms: int | None = field(default=None, init=False)
    _lag_at_step: int | None = field(default=None, init=False)
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
        return min(t for t in due if t > now_ms)

    def _quiet_since(self) -> int:
        return max(t for t in (self._last_change_ms, self._last_over_ms, 0) if t is not None)

    @property
    def ceiling(self) -> int:
        """At most: max_members, and one member per partition."""
        return max(self.min_members, min(self.max_members, max(self.partitions, 1)))

    def decide(self, rows: list[LagRow], members: int, now_ms: int) -> Decision:
        stuck = self._stuck.observe(rows, now_ms)
        lag, lag_ms, lagging = judged(rows, stuck)
        stuck_t = tuple(sorted(stuck))

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
        measure = self.target.measure(lag, lag_ms)
        if self.target.over(lag, lag_ms):
            self._last_over_ms = now_ms
            cap = min(self.ceiling, lagging) if self.limit_to_lagging else self.ceiling
            if members >= cap:
                return answer(members, "over target, at the cap")
            since = None if self._last_change_ms is None else now_ms - self._last_change_ms
            shrinking = self._lag_at_step is not None and measure is not None and measure < self._lag_at_step
            # The last step's members are joining (one interval), or the lag is coming down
            # (up to four intervals): wait for them before adding more.
            if since is not None and (since < self.scale_up_interval_ms
                                      or (shrinking and since < 4 * self.scale_up_interval_ms)):
                return answer(members, "over target, members added are catching up")
            self._lag_at_step = measure
            return answer(min(cap, members + self.scale_up_step), "over target")
        self._lag_at_step = None
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

    def decide(self, rows: list[LagRow], members: int, now_ms: int) -> Decision:
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
