"""How long a replica took to rejoin its leader once its actor started (issue 29).

A replica actor the controller started (a new replica, or one restarted on
its node after its actor died) passes these phases, each logged as seconds
after the one before, in one line once it has caught up:
- `actor`: from the controller's request to the actor's construction (Ray
  schedules it, a worker process starts or is taken from Ray's pool, the
  modules import);
- `role`: the controller told it to follow (its next probe found it);
- `log open`: its log opened and replayed into the hot shard;
- `truncate`: its log cut where the leader's epochs say (only if it diverged);
- `caught up`: a push brought its log end to the leader's high watermark;
  the leader then adds it to the ISR (the controller logs that line).
A replica that leads first records nothing: it rejoins no one.
"""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)


class RejoinPhases:
    """The phases one replica actor passed, as wall-clock times (module docstring)."""

    def __init__(self, partition: int, requested_at: float | None = None) -> None:
        """`requested_at`: the controller's time.time() when it asked for the actor."""
        self.partition = partition
        now = time.time()
        start = now if requested_at is None else min(requested_at, now)
        self.marks: list[tuple[str, float]] = [("requested", start), ("actor", now)]
        self.done = False

    def mark(self, phase: str) -> None:
        if not self.done:
            self.marks.append((phase, time.time()))

    def finish(self, phase: str, replica: str) -> None:
        """The last phase: log the line and stop recording."""
        if self.done:
            return
        self.mark(phase)
        self.done = True
        logger.info(
            "partition %d: replica %s caught up with its leader %s", self.partition, replica, self.summary()
        )

    def abandon(self) -> None:
        """It took another role first (it leads): nothing to record."""
        self.done = True

    def durations(self) -> dict[str, float]:
        """Each phase's seconds after the one before."""
        out, before = {}, self.marks[0][1]
        for phase, at in self.marks[1:]:
            out[phase] = round(at - before, 3)
            before = at
        return out

    def summary(self) -> str:
        durations = self.durations()
        total = self.marks[-1][1] - self.marks[0][1]
        steps = ", ".join(f"{phase} +{s:.2f} s" for phase, s in durations.items())
        return f"{total:.2f} s after the controller asked for it ({steps})"
