"""The Ray path's authorizer in the partition actor: who a Ray caller is, and what it may do (issue 49).

DESIGN section 10: authorization is checked where the request is decided,
from a principal the caller cannot forge. A Ray call carries no identity,
so with `ServiceSettings.ray_credentials` on, every call of `handle`,
`handle_wire` and `handle_batch` carries a credential (once per call, for
every request of a coalesced batch): `rgc1...` signed with the service's
secret (`coordinator/credentials.py`). This part of `OffsetPartition`
verifies it and checks each request with `coordinator.authz.check`, as a
Kafka listener does for its connection's principal:
- missing, malformed, forged, expired or revoked: CredentialError, answered
  to that call's requests alone; the partition serves everyone else on;
- then Kafka's rules and errors per request (GROUP_AUTHORIZATION_FAILED...);
  a denied request, or its denied part, never reaches the runtime, so it
  changes nothing;
- a super user's requests pass (`kafka_listener.super_users`, the service's
  `super.users`), and `allow_everyone_if_no_acl_found` is the listeners';
- a Ray caller has no host Kafka would know: only ACLs of host `*` apply.

The secret, the revoked credentials and the ACLs come from the topic
registry (`TopicRegistry.ray_auth_if_changed`) through a `RayAuthWatch`:
read at once when the registry nudges (`topics_changed`, after every ACL
change or revocation), else every 0.5 s. Before the first view a request
waits for it (bounded), then is answered COORDINATOR_NOT_AVAILABLE
(retriable), never allowed. A credential verified once is remembered (its
signature is not computed again per call; expiry and revocation are checked
every call) until the view changes.

Off (the default, and the embedded local service): no credential needed, no
cost but one attribute read per call. The service's own components call
`serve_wire`/`serve_batch`, unchecked (docs/security.md, The Ray path).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from actors.core.acl_watch import AclWatch
from coordinator.acl import WILDCARD, Authorizer
from coordinator.authz import Decision, check
from coordinator.checks import InvalidRequestError, validate_request
from coordinator.credentials import Credential, CredentialError, verify
from coordinator.errors import Errors
from coordinator.status import error_response

logger = logging.getLogger(__name__)
FIRST_VIEW_S = 10.0
VERIFIED_MAX = 10_000  # credentials remembered as verified; the cache is cleared when full
RAY_HOST = WILDCARD  # a Ray caller's host: only ACLs of host * match it


class RayAuthWatch(AclWatch):
    """The ACL watch of a partition leader: the ACLs, the secret and the revoked ids."""

    METHOD = "ray_auth_if_changed"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.secret = b""
        self.revoked: frozenset[str] = frozenset()
        self.on_change: Callable[[], None] = lambda: None

    def apply(self, view: tuple[Any, ...]) -> None:
        _, _, self.secret, self.revoked = view
        super().apply(view)
        self.on_change()


class RayGuard:
    """One partition actor's Ray-path authorizer (module docstring)."""

    def __init__(self, settings: Any, lookup: Callable[[], Any], now_ms: Callable[[], int]) -> None:
        self.on: bool = settings.ray_credentials
        listener = settings.kafka_listener
        self.watch = RayAuthWatch(lookup, listener.super_users, listener.allow_everyone_if_no_acl_found)
        self.watch.on_change = self._forget_verified
        self.now_ms = now_ms
        self._verified: dict[str, Credential] = {}

    def _forget_verified(self) -> None:
        self._verified = {}

    def nudge(self) -> None:
        if self.on:
            self.watch.nudge()

    async def decide(self, credential: object, requests: list[Any]) -> list[Decision]:
        """Per request what reaches the runtime; CredentialError for a refused credential."""
        authorizer = await self.watch.ready(FIRST_VIEW_S)
        if authorizer is None:
            raise _NotReady
        principal = self.principal(credential)
        if principal in self.watch.super_users:  # allowed everything
            return [_decide(None, principal, request) for request in requests]
        return [_decide(authorizer, principal, request) for request in requests]

    def principal(self, credential: object) -> str:
        """The principal of a valid credential; CredentialError why it is not valid."""
        now_ms, watch = self.now_ms(), self.watch
        known = self._verified.get(credential) if type(credential) is str else None
        if known is None or now_ms >= known.expires_ms or known.id in watch.revoked:
            known = verify(watch.secret, credential, now_ms, watch.revoked)  # raises why
            if len(self._verified) >= VERIFIED_MAX:
                self._verified = {}
            self._verified[credential] = known  # type: ignore[index]  # a str: verify took it
        return known.principal

    def close(self) -> None:
        self.watch.close()


class _NotReady(Exception):
    """No view of the ACLs yet: the requests are answered COORDINATOR_NOT_AVAILABLE."""


def not_ready_answer(request: Any) -> Any:
    try:
        validate_request(request)
    except InvalidRequestError as exc:
        return exc
    return error_response(request, Errors.COORDINATOR_NOT_AVAILABLE)


def _decide(authorizer: Authorizer | None, principal: str, request: Any) -> Decision:
    """What of `request` reaches the runtime (`authorizer` None: all of it, a super user's).
    Validated here, before the rules read its fields (the runtime then skips it)."""
    try:
        validate_request(request)
    except InvalidRequestError as exc:
        return Decision(None, exc)
    return Decision(request) if authorizer is None else check(authorizer, principal, RAY_HOST, request)


async def decisions_for(guard: RayGuard, credential: object, requests: list[Any]) -> list[Decision]:
    """`guard.decide`, with a refused credential or a view not read yet answered per request."""
    try:
        return await guard.decide(credential, requests)
    except CredentialError as exc:
        logger.info("Ray caller refused: %s", exc)
        return [Decision(None, exc) for _ in requests]
    except _NotReady:
        return [Decision(None, not_ready_answer(request)) for request in requests]


def completing(decision: Decision, deliver: Callable[[Any], None]) -> Callable[[Any], None]:
    """Where the runtime's answer to `decision.send` goes: completed with what the guard
    refused of the request, when it refused a part (an error answered in its place goes as
    it is)."""
    return partial(_finished, decision.finish, deliver) if decision.completes else deliver


def _finished(finish: Callable[[Any], Any], deliver: Callable[[Any], None], response: Any) -> None:
    deliver(response if isinstance(response, BaseException) else finish(response))
