"""A replica's disk health: failed or not, since when, and when to try it again.

DESIGN 5b: a disk that fails or fills is a failure like a crash, never a
reason to wait for a person. A replica whose log write, fsync, open or rename
failed stops trusting that log (`on_failure`), retries its disk with
exponential backoff (`retry_due`, `on_retry_failed`) and, once a write and an
fsync succeed and its log is reopened from what was durably written, is
healthy again (`on_recovered`). The controller reads the same facts from the
replica's probe (`describe`): a replica whose disk failed never leads and
leaves the ISR; a follower that recovered catches up and the leader admits
it again.

Pure: time is an argument (the replica's wall clock, so `since_ms` can be
shown to an operator).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RETRY_INITIAL_MS = 100
RETRY_MAX_MS = 5_000


@dataclass(slots=True)
class DiskHealth:
    retry_initial_ms: int = RETRY_INITIAL_MS
    retry_max_ms: int = RETRY_MAX_MS
    failed: bool = False
    # The first error of the current outage and the latest, with their times.
    error: str | None = None
    last_error: str | None = None
    since_ms: int | None = None
    next_retry_ms: int | None = None
    # Outages since the replica started (the metric counts them) and failed
    # retries within the current one (they set the backoff).
    failures: int = 0
    retries: int = 0

    def on_failure(self, error: str, now_ms: int) -> bool:
        """The log failed; True if this starts an outage (False: already failed)."""
        self.last_error = error
        if self.failed:
            return False
        self.failed, self.error, self.since_ms, self.retries = True, error, now_ms, 0
        self.failures += 1
        self.next_retry_ms = now_ms + self.retry_initial_ms
        return True

    def on_retry_failed(self, error: str, now_ms: int) -> None:
        """A retry found the disk still broken: back off further."""
        self.last_error = error
        self.retries += 1
        delay = min(self.retry_max_ms, self.retry_initial_ms << min(self.retries, 20))
        self.next_retry_ms = now_ms + delay

    def retry_in_ms(self, now_ms: int) -> int:
        """How long until the next retry is due (0: now)."""
        return 0 if self.next_retry_ms is None else max(0, self.next_retry_ms - now_ms)

    def on_recovered(self) -> None:
        self.failed, self.error, self.last_error = False, None, None
        self.since_ms = self.next_retry_ms = None
        self.retries = 0

    def describe(self) -> dict[str, Any]:
        """The probe's `disk` entry: plain values."""
        return {
            "failed": self.failed,
            "error": self.error,
            "last_error": self.last_error,
            "since_ms": self.since_ms,
            "next_retry_ms": self.next_retry_ms,
            "failures": self.failures,
            "retries": self.retries,
        }


def disk_failed(probe: object) -> bool:
    """Whether a replica's probe (a dict, or a verdict string) reports a failed disk."""
    if not isinstance(probe, dict):
        return False
    disk = probe.get("disk")
    return isinstance(disk, dict) and bool(disk.get("failed"))
