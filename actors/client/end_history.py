"""The end-offset history of the topic registry: each partition's end offset over time.

Owns the samples `(topic, partition, at_ms, end_offset)` in memory, so lag
over time is measured against the end offset of that time (as Burrow and lag
exporters sample a broker's offsets). Their durable copy is the registry's:
each kept sample is one service state entry in offsets partition 0's log
(`actors/client/topic_registry.py`), each dropped one a tombstone; this
module says which.

Rules:
- Per partition, samples only move forward: `at_ms` never before the last
  sample's, the end offset never below it. Kafka's end offset only decreases
  when a log is truncated or a topic re-created; a report that goes back is
  refused (`check`), so a stale or reordered reporter is told, not recorded.
- Bounded like a lag exporter's ring: a sample equal to the previous end is
  dropped within `min_interval_ms` of the previous kept sample (a flat
  partition costs one sample a minute); samples older than `retention_ms`
  (Kafka's offsets.retention.minutes, 7 days) are dropped; above
  `samples_max` samples the older half of a partition's history is thinned
  to every second sample, so old history gets coarser, never the recent.
  A partition's latest sample (its current end) is never dropped.
- `record` and `load` return what they dropped, for the owner to delete.
- `read_legacy_file` reads the history file a registry kept on its node's
  disk before service state was replicated, once, to import it: a last line
  without its newline is a torn write and is dropped, an unreadable line is
  skipped.
"""


from __future__ import annotations

import bisect
import json
import logging
import os
from dataclasses import dataclass

HISTORY_FILE = "end-offsets.jsonl"
Sample = tuple[str, int, int, int]  # topic, partition, at_ms, end_offset
_MAX_OFFSET = 2**63  # above any offset, for bisecting (at_ms, end) pairs by time

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HistoryLimits:
    min_interval_ms: int = 60_000
    retention_ms: int = 7 * 24 * 3600 * 1000
    samples_max: int = 2048


class EndOffsetHistory:
    """Samples per partition, in time order."""

    def __init__(self, limits: HistoryLimits | None = None) -> None:
        self.limits = limits or HistoryLimits()
        self.samples: dict[tuple[str, int], list[tuple[int, int]]] = {}

    # ------------------------------------------------------------- reading

    def latest(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(at_ms, end_offset) of the partition's newest sample, if any."""
        kept = self.samples.get((topic, partition))
        return kept[-1] if kept else None

    def check(self, topic: str, partition: int, at_ms: int, end_offset: int) -> str:
        """Why this sample may not be recorded ('' when it may)."""
        last = self.latest(topic, partition)
        if last is None:
            return ""
        if at_ms < last[0]:
            return f"sample time {at_ms} is before the last sample's {last[0]}"
        if end_offset < last[1]:
            return f"end offset {end_offset} is below the recorded {last[1]}: end offsets never decrease"
        return ""

    def rows(self, topics: list[str] | None, since_ms: int | None) -> list[Sample]:
        """Samples sorted by topic, partition, at_ms. With `since_ms`, those at or
        after it plus each partition's last sample before it: the end offset in
        effect at `since_ms`, so a step function over the rows holds from there."""
        wanted = None if topics is None else set(topics)
        out: list[Sample] = []
        for (topic, partition), kept in sorted(self.samples.items()):
            if wanted is not None and topic not in wanted:
                continue
            start = 0
            if since_ms is not None:
                # the last sample at or before since_ms is the one in effect then
                start = max(bisect.bisect_right(kept, (since_ms, _MAX_OFFSET)) - 1, 0)
            out.extend((topic, partition, at, end) for at, end in kept[start:])
        return out

    # ------------------------------------------------------------- writing

    def record(self, samples: list[Sample], now_ms: int) -> tuple[list[Sample], list[Sample]]:
        """Keep the samples (each already `check`ed): (the ones kept, the ones dropped)."""
        kept = [s for s in samples if self._keep(*s)]
        dropped = [d for key in {(t, p) for t, p, _, _ in samples} for d in self._bound(key, now_ms)]
        gone = set(dropped)
        return [s for s in kept if s not in gone], dropped

    def load(self, samples: list[Sample], now_ms: int) -> list[Sample]:
        """Rebuild from stored samples (any order); the ones now out of bounds or out of
        order are dropped and returned."""
        dropped = []
        for sample in sorted(samples):
            if self.check(*sample) or not self._keep(*sample):
                dropped.append(sample)
        for key in list(self.samples):
            dropped.extend(self._bound(key, now_ms))
        return dropped

    def kept_count(self) -> int:
        return sum(len(kept) for kept in self.samples.values())

    def _keep(self, topic: str, partition: int, at_ms: int, end_offset: int) -> bool:
        kept = self.samples.setdefault((topic, partition), [])
        if kept and kept[-1][1] == end_offset and at_ms - kept[-1][0] < self.limits.min_interval_ms:
            return False
        kept.append((at_ms, end_offset))
        return True

    def _bound(self, key: tuple[str, int], now_ms: int) -> list[Sample]:
        kept = self.samples[key]
        cutoff = now_ms - self.limits.retention_ms
        expired = bisect.bisect_left(kept, (cutoff, -1))
        gone = kept[: min(expired, len(kept) - 1)]
        del kept[: len(gone)]
        if len(kept) > self.limits.samples_max:
            half = len(kept) // 2
            gone.extend(kept[1:half:2])
            kept[:half] = kept[:half:2]
        return [(*key, at, end) for at, end in gone]


def read_legacy_file(directory: str) -> list[Sample]:
    """The samples of `<directory>/end-offsets.jsonl`, if there is one (module docstring)."""
    path = os.path.join(directory, HISTORY_FILE)
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    lines.pop()  # b"" when the file ends with its newline, else a torn last line
    samples: list[Sample] = []
    for number, line in enumerate(lines, 1):
        parsed = _parse_line(line)
        if parsed is None:
            logger.warning("%s: line %d unreadable, skipped", path, number)
        else:
            samples.extend(parsed)
    return samples


def _parse_line(line: bytes) -> list[Sample] | None:
    try:
        raw = json.loads(line)
        samples = [(str(t), int(p), int(at), int(end)) for t, p, at, end in raw]
    except (ValueError, TypeError):
        return None
    return samples
