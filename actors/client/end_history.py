"""The end-offset history of the topic registry: each partition's end offset over time.

Owns the samples `(topic, partition, at_ms, end_offset)` and their file,
`<data_dir>/end-offsets.jsonl`, so lag over time is measured against the end
offset of that time (as Burrow and lag exporters sample a broker's offsets).

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
- Durable: each `record` appends one JSON line holding its samples and
  fsyncs before returning. A last line without its newline is a torn write
  and is dropped on load; an unreadable line is skipped. The file is
  rewritten atomically (temporary file, fsync, rename) from memory when it
  holds more than twice the kept samples (plus slack), and after a load that
  dropped anything.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
from dataclasses import dataclass

from log.fsutil import atomic_write, fsync_dir

HISTORY_FILE = "end-offsets.jsonl"
Sample = tuple[str, int, int, int]  # topic, partition, at_ms, end_offset
_MAX_OFFSET = 2**63  # above any offset, for bisecting (at_ms, end) pairs by time

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HistoryLimits:
    min_interval_ms: int = 60_000
    retention_ms: int = 7 * 24 * 3600 * 1000
    samples_max: int = 2048
    # Samples the file may hold beyond twice the kept ones before a rewrite.
    compaction_slack: int = 10_000


class EndOffsetHistory:
    """In-memory samples per partition, mirrored by an append-only file."""

    def __init__(self, directory: str, limits: HistoryLimits | None = None) -> None:
        self.path = os.path.join(directory, HISTORY_FILE)
        self.limits = limits or HistoryLimits()
        self.samples: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.file_samples = 0

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

    def record(self, samples: list[Sample], now_ms: int) -> None:
        """Keep the samples (each already `check`ed) and make them durable."""
        written = [s for s in samples if self._keep(*s)]
        for key in {(t, p) for t, p, _, _ in samples}:
            self._bound(key, now_ms)
        if written:
            self._append(written)
        if self.file_samples > 2 * self.kept_count() + self.limits.compaction_slack:
            self.compact()

    def kept_count(self) -> int:
        return sum(len(kept) for kept in self.samples.values())

    def _keep(self, topic: str, partition: int, at_ms: int, end_offset: int) -> bool:
        kept = self.samples.setdefault((topic, partition), [])
        if kept and kept[-1][1] == end_offset and at_ms - kept[-1][0] < self.limits.min_interval_ms:
            return False
        kept.append((at_ms, end_offset))
        return True

    def _bound(self, key: tuple[str, int], now_ms: int) -> None:
        kept = self.samples[key]
        cutoff = now_ms - self.limits.retention_ms
        expired = bisect.bisect_left(kept, (cutoff, -1))
        del kept[: min(expired, len(kept) - 1)]
        if len(kept) > self.limits.samples_max:
            half = len(kept) // 2
            kept[:half] = kept[:half:2]

    def _append(self, samples: list[Sample]) -> None:
        line = (json.dumps([list(s) for s in samples], separators=(",", ":")) + "\n").encode("utf-8")
        created = not os.path.exists(self.path)
        with open(self.path, "ab") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        if created:
            fsync_dir(os.path.dirname(self.path) or ".")
        self.file_samples += len(samples)

    def compact(self) -> None:
        """Rewrite the file from the kept samples, one line per partition."""
        lines = [
            json.dumps([[t, p, at, end] for at, end in kept], separators=(",", ":")) + "\n"
            for (t, p), kept in sorted(self.samples.items())
            if kept
        ]
        atomic_write(self.path, "".join(lines).encode("utf-8"))
        self.file_samples = self.kept_count()

    # ------------------------------------------------------------- loading

    def load(self, now_ms: int) -> None:
        """Read the file; drop a torn tail and unreadable lines (then rewrite it)."""
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as f:
            data = f.read()
        lines = data.split(b"\n")
        torn = lines.pop()  # b"" when the file ends with its newline
        damaged = bool(torn)
        for number, line in enumerate(lines, 1):
            samples = _parse_line(line)
            if samples is None:
                logger.warning("%s: line %d unreadable, skipped", self.path, number)
                damaged = True
                continue
            for sample in samples:
                if self.check(*sample):
                    damaged = True
                    continue
                self._keep(*sample)
                self.file_samples += 1
        for key in self.samples:
            self._bound(key, now_ms)
        if damaged:
            logger.warning("%s: torn or damaged lines dropped, file rewritten", self.path)
            self.compact()


def _parse_line(line: bytes) -> list[Sample] | None:
    try:
        raw = json.loads(line)
        samples = [(str(t), int(p), int(at), int(end)) for t, p, at, end in raw]
    except (ValueError, TypeError):
        return None
    return samples
