"""The leader epoch cache of one replica's log: which epoch wrote which offsets.

Kafka's `LeaderEpochFileCache` (replication notes section 5), without the
file: an ordered map epoch -> start offset, kept here as parallel lists.
Persisting `entries` and truncating it with the log is the log layer's job;
this class only holds the rules.

Rules:
- Epochs and start offsets are both strictly increasing (`assign` removes
  what would break that, as `maybeTruncateNonMonotonicEntries` does).
- A leader assigns (its new epoch, its log end) when it is elected; every
  replica assigns (batch epoch, batch base offset) for each batch it appends.
- `end_offset_for(epoch, log_end)` answers "where did this epoch end here":
  the latest epoch ends at the log end, any other at the start of the next
  higher epoch. It answers UNDEFINED for an undefined or unknown-future
  epoch, and for an empty cache.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
UNDEFINED: tuple[int, int] = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


class EpochCache:
    """Epoch -> start offset of one log, both strictly increasing."""

    __slots__ = ("_epochs", "_starts")

    def __init__(self, entries: Iterable[tuple[int, int]] = ()) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries:
            self.assign(epoch, start)

    def __repr__(self) -> str:
        return f"EpochCache({self.entries!r})"

    @property
    def entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs, oldest first: what the log layer persists."""
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or UNDEFINED_EPOCH when the cache is empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def copy(self) -> EpochCache:
        return EpochCache(self.entries)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed.

        Ignored when it repeats the latest epoch at a start not smaller (every
        batch of an epoch calls this). Otherwise entries with an epoch >= the
        new one or a start >= the new one are dropped first, so a rewritten
        tail cannot leave a non-monotonic map behind.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        keep = len(self._epochs)
        while keep and (self._epochs[keep - 1] >= epoch or self._starts[keep - 1] >= start_offset):
            keep -= 1
        del self._epochs[keep:], self._starts[keep:]
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """(largest known epoch <= `epoch`, the offset where it ends in this log).

        `epoch` is the latest: (epoch, log_end). Below every entry: (epoch,
        start of the first entry), since those offsets are gone here anyway.
        Undefined, above every entry, or an empty cache: UNDEFINED.
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED
        if epoch == self._epochs[-1]:
            return epoch, log_end
        higher = bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def truncate_from_end(self, offset: int) -> None:
        """Drop entries starting at or after `offset` (the log was truncated to it)."""
        keep = bisect_left(self._starts, offset)
        del self._epochs[keep:], self._starts[keep:]

    def truncate_from_start(self, offset: int) -> None:
        """The log now starts at `offset`: drop entries wholly below it, and move
        the entry covering `offset` to start there."""
        covering = bisect_right(self._starts, offset) - 1
        if covering < 0:
            return
        del self._epochs[:covering], self._starts[:covering]
        self._starts[0] = offset
