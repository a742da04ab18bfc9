"""The ACL set a process enforces: the topic registry's, polled with a change token.

Every place that authorizes Kafka requests (a gateway, each partition
leader's listener: `gateway/authorize.py`) holds one `AclWatch`. It asks the
registry `acls_if_changed(token)` every `interval_s` (0.5 s: a change applies
everywhere within a second, issue 49); an unchanged set answers None, so a
poll is one small Ray call. The poll runs as a task on the loop of the
process's first request (started lazily, so no server start-up changes).

Rules (nothing is allowed by mistake):
- Until the first view arrives there is no `Authorizer`; callers wait for it
  (`ready`, bounded) and otherwise refuse with a retriable error.
- A registry that is down or slow keeps the last view in force (it was the
  service's ACL set when it was read); the poll is logged and tried again.
- A view the registry cannot give (a corrupt ACL entry: the registry raises)
  is the same: the last view stays, nothing new is allowed.
- `nudge` polls at once: the registry's push after a change
  (`TopicRegistry._nudge_soon`: the leaders' `topics_changed`, the attached
  gateways' `acls_changed`, actors/core/attached.py), so the interval only
  bounds a lost push; a foreground `raygroups gateway` has only the poll.
- A partition leader's watch (`actors/partition/ray_guard.py`) asks
  `METHOD = "ray_auth_if_changed"` instead: the ACLs with the Ray path's
  secret and revoked credentials.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from coordinator.acl import Authorizer

logger = logging.getLogger(__name__)
INTERVAL_S = 0.5
CALL_TIMEOUT_S = 5.0


class AclWatch:
    METHOD = "acls_if_changed"  # the registry's method giving (token, acls, ...) or None

    def __init__(
        self,
        lookup: Callable[[], Any],
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.lookup = lookup  # the registry's handle (blocking: run in a thread)
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.interval_s = interval_s
        self.authorizer: Authorizer | None = None
        self.token: str | None = None
        self._registry: Any = None
        self._task: asyncio.Task[None] | None = None
        self._first = asyncio.Event()
        self._wake = asyncio.Event()
        self._failures = 0

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="acl watch")

    def current(self) -> Authorizer | None:
        """The Authorizer in force while the watch runs; None otherwise (then `ready`, which
        starts it again and waits for a first view): every request's fast path."""
        task = self._task
        return self.authorizer if task is not None and not task.done() else None

    async def ready(self, timeout_s: float) -> Authorizer | None:
        """The Authorizer in force, waiting up to `timeout_s` for the first view."""
        self.start()
        if self.authorizer is None:
            try:
                await asyncio.wait_for(self._first.wait(), timeout_s)
            except TimeoutError:
                return None
        return self.authorizer

    def apply(self, view: tuple[Any, ...]) -> None:
        """A view of the registry (`TopicRegistry.acls_if_changed`) becomes the one in force."""
        self.token, acls = view[0], view[1]
        self.authorizer = Authorizer(acls, self.super_users, self.allow_everyone_if_no_acl_found)
        self._first.set()

    async def poll(self) -> None:
        try:
            registry = self._registry or await asyncio.to_thread(self.lookup)
            view = await asyncio.wait_for(getattr(registry, self.METHOD).remote(self.token), CALL_TIMEOUT_S)
        except Exception as exc:  # down, restarting, slow or refusing: the last view stays
            self._registry = None
            self._failures += 1
            log = logger.warning if self._failures in (1, 10) or self._failures % 100 == 0 else logger.debug
            log("ACLs not read from the topic registry (%d times): %r", self._failures, exc)
            return
        self._registry, self._failures = registry, 0
        if view is not None:
            self.apply(view)

    def nudge(self) -> None:
        """Poll now (the registry pushed a change), once the watch runs."""
        if self._task is not None and not self._task.done():
            self._wake.set()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            await self.poll()
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            except TimeoutError:
                pass

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
