"""When the service grows its partition count by itself (`--auto-repartition`): the policy.

Opt-in (`ServiceSettings.auto_repartition`). The controller shows it, every
`AUTO_REPARTITION_CHECK_S`, the partitions' rows as `raygroups capacity` reads them (each
leader's requests/s against the rate docs/capacity.md plans a partition at); it answers the
count to grow to, or None. Rules:
- Grow only when the partitions' mean load has stayed past `HOT_SHARE` of their planned
  rate for `auto_repartition_after_s` without a break: a burst is not a trend. The mean,
  not the hottest: a growth moves groups off every partition alike, and one hot group
  cannot be split by hashing (docs/capacity.md says what to do about it).
- Hysteresis: a sample below `HOT_SHARE` starts the window again, and after a growth the
  window starts only once it is done, so the new partitions' load is judged, not the old.
- Never while a partition cannot take part (no leader, HELD, below min ISR: the caller
  says which) or a repartition runs; never past `max_partitions`: the count doubles if
  that fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actors.core.capacity import load_share

HOT_SHARE = 1.0
AUTO_REPARTITION_CHECK_S = 10.0


class AutoGrow:
    def __init__(self, after_s: float, max_partitions: int) -> None:
        self.after_s = after_s
        self.max_partitions = max_partitions
        # Since when the load has been past HOT_SHARE without a break (None: it is not).
        self.hot_since: float | None = None

    def decide(
        self, now_s: float, count: int, rows: Sequence[Mapping[str, Any]], unfit: Sequence[str], running: bool
    ) -> int | None:
        """The count to grow to now, or None (module docstring)."""
        if running or unfit:
            self.hot_since = None
            return None
        shares = [share for row in rows if (share := load_share(row)) is not None]
        if len(shares) < count or sum(shares) / len(shares) <= HOT_SHARE:
            self.hot_since = None
            return None
        if self.hot_since is None:
            self.hot_since = now_s
        if now_s - self.hot_since < self.after_s:
            return None
        grown = grown_count(count, self.max_partitions)
        if grown is not None:
            self.hot_since = None
        return grown


def grown_count(count: int, max_partitions: int) -> int | None:
    """Twice `count` if that fits `max_partitions`, else None."""
    return 2 * count if 2 * count <= max_partitions else None
