"""The topic registry's feed of new end-offset samples, read by every partition leader for live lag.

Live lag (coordinator/lag.py) needs, in every leader, the end offsets
producers report to the registry, as they arrive. The registry nudges every
leader after a report (as it does after a topic change); a leader then asks
`TopicRegistry.end_offsets_since(cursor)` with the cursor of the last answer
it applied, and gets only the samples recorded since (DESIGN section 10:
pushed as they change, never a scan per question). Pulling on a nudge keeps
one path for a nudge lost, a leader started late and a registry restarted.

Rules:
- The cursor is `(feed id, sequence number)`. The feed id names this feed:
  a new one each time the registry (re)loads its state, so a cursor of
  another incarnation, None, or one older than the feed keeps
  (`FEED_SAMPLES_MAX`) gets the whole history instead (`whole=True`): the
  leader's tracker then replaces every end it had.
- Only the samples the history kept are fed (a flat partition's repeats
  within the history's interval are not).
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from itertools import islice

from actors.client.end_history import Sample

FEED_SAMPLES_MAX = 100_000
Cursor = tuple[str, int]
# (the cursor after it, the samples in time order per partition, whole: replace every end)
FeedAnswer = tuple[Cursor, list[Sample], bool]


class EndOffsetFeed:
    def __init__(self) -> None:
        self.feed_id = uuid.uuid4().hex
        self.seq = 0
        self.recent: deque[tuple[int, Sample]] = deque(maxlen=FEED_SAMPLES_MAX)

    def reset(self) -> None:
        """The registry reloaded its state: every reader gets the whole history next."""
        self.__init__()  # type: ignore[misc]

    def record(self, samples: list[Sample]) -> None:
        for sample in samples:
            self.seq += 1
            self.recent.append((self.seq, sample))

    def since(self, cursor: object, whole_history: Callable[[], list[Sample]]) -> FeedAnswer | None:
        """The samples after `cursor`; None when there are none."""
        current = (self.feed_id, self.seq)
        if cursor == current:
            return None
        if not _is_cursor(cursor) or cursor[0] != self.feed_id or cursor[1] > self.seq:  # type: ignore[index]
            return current, whole_history(), True
        after: int = cursor[1]  # type: ignore[index]
        oldest = self.recent[0][0] if self.recent else self.seq + 1
        if after + 1 < oldest:
            return current, whole_history(), True
        skip = after + 1 - oldest
        return current, [sample for _, sample in islice(self.recent, skip, None)], False


def _is_cursor(value: object) -> bool:
    return (
        isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
        and isinstance(value[1], int) and not isinstance(value[1], bool)
    )
