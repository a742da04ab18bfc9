"""What the classic member loop (`loop.MemberLoop`) and the consumer-protocol one
(`consumer_loop.ConsumerLoop`) share: the state the application reads under
`lock`, polling (max.poll.interval.ms), a fatal error, closing, and telling
the driver whether the member is stable."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from actors.member.api import GroupMemberError, MemberConfig
from coordinator.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class LoopBase:
    def __init__(
        self,
        config: MemberConfig,
        wake: Callable[[], None],
        set_stable: Callable[[bool], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.wake, self._set_stable, self.clock = wake, set_stable, clock
        self.lock = threading.RLock()
        self.owned: frozenset[TopicPartition] = frozenset()
        self.rebalances = 0
        self.stable = False
        self.closed = False
        self.fatal: BaseException | None = None
        self.last_poll = clock()
        self.next_heartbeat = 0.0

    # ------------------------------------------------- called by the application

    def assignment(self) -> set[TopicPartition]:
        with self.lock:
            return set(self.owned)

    def poll(self) -> None:
        expired = self._poll_expired()
        self.last_poll = self.clock()
        if expired:
            self.wake()

    def fail(self, exc: BaseException) -> None:
        if not isinstance(exc, GroupMemberError):
            logger.error("%s: member loop failed", self.config.group_id, exc_info=exc)
        self.fatal = exc
        self._set_stable(True)  # wakes waiters, who raise

    def raise_fatal(self) -> None:
        if self.fatal is not None:
            raise self.fatal

    def close(self) -> bool:
        """Mark closed; False when it already was."""
        if self.closed:
            return False
        self.closed = True
        self.wake()
        return True

    # ------------------------------------------------------------- internals

    def _poll_expired(self) -> bool:
        # At the deadline itself, as the loops' idle time wakes for it: never a wait of 0 s over and over.
        return (self.clock() - self.last_poll) * 1000 >= self.config.max_poll_interval_ms

    def _change_stable(self, stable: bool) -> None:
        self.stable = stable
        self._set_stable(stable)
