"""The topic registry's authorizer of administrative calls over Ray (issue 49, docs/security.md).

With `ServiceSettings.ray_credentials` on, the registry's administrative
methods (`guarded`: ACLs, credentials, settings, topics, reported offsets)
and, through `TopicRegistry.authorize_admin`, the controller's
(`repartition`, `reassign`, `elect_leader`, `rolling_restart`) take the
caller's credential as the keyword `credential`. `AdminGuard.check` decides
before the method changes anything:
- the credential is verified as a partition leader verifies it (the
  registry's own secret and revocation list: `coordinator/credentials.py`);
  missing, forged, expired or revoked: CredentialError saying which;
- a super user (the leaders' `kafka_listener.super_users`) may do all;
- else Kafka's operation for the method (`coordinator/admin_authz.py`)
  against the registry's ACLs, with `allow_everyone_if_no_acl_found`:
  AuthorizationError, CLUSTER_AUTHORIZATION_FAILED or
  TOPIC_AUTHORIZATION_FAILED. While an ACL entry is unreadable, only super
  users pass (nothing is allowed by mistake; they can delete it).

Both errors are InvalidRequestError: they reach the caller unwrapped and are
never retried (actors/client/retry.py). Off, the default: no check, no cost.

`TopicRegistry.serve(method, *args)` calls a guarded method unchecked, for
the service's own components that authorized their caller themselves (a
gateway's Kafka client) and for `actors.start`'s bootstrap credential; like
the leaders' `serve_*` it is what the Ray path does not protect against.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from actors.client.acl_table import AclStoreCorrupt, AclTable
from actors.client.credential_table import CredentialTable
from coordinator.acl import Authorizer
from coordinator.admin_authz import RULES, AuthorizationError, refusal
from coordinator.checks import InvalidRequestError
from coordinator.credentials import verify
from coordinator.errors import Errors

logger = logging.getLogger(__name__)


class AdminGuard:
    def __init__(self, settings: Any, acls: AclTable, credentials: CredentialTable, clock: Any) -> None:
        self.acls, self.credentials, self.clock = acls, credentials, clock
        self.follow(settings)

    def follow(self, settings: Any) -> None:
        """Check as `settings` say (the registry's start settings, then those in force: a
        rolling restart that turned `ray_credentials` on restarts the registry with its
        start settings, and the registry then reads the controller's)."""
        self.on: bool = settings.ray_credentials
        listener = settings.kafka_listener
        self.super_users = frozenset(listener.super_users)
        self.allow_everyone = listener.allow_everyone_if_no_acl_found
        self._authorizer: tuple[int, Authorizer] | None = None  # per ACL change count

    def check(self, method: str, args: tuple[Any, ...], credential: object) -> None:
        """Return when `credential` may call `method(*args)`; else raise why not."""
        if not self.on:
            return
        table = self.credentials
        principal = verify(table.secret, credential, self.clock.now_ms(), table.revoked).principal
        if principal in self.super_users:
            return
        why = refusal(self.authorizer(principal), principal, method, args)
        if why is not None:
            logger.info("administrative call %s refused: %s", method, why)
            raise why

    def authorizer(self, principal: str) -> Authorizer:
        """The registry's ACLs in force, rebuilt once per change."""
        changes = self.acls.changes
        if self._authorizer is None or self._authorizer[0] != changes:
            try:
                _, acls = self.acls.view("")
            except AclStoreCorrupt as exc:  # an unreadable entry: nothing allowed but to super users
                raise AuthorizationError(Errors.CLUSTER_AUTHORIZATION_FAILED,
                                         f"{principal} refused: the ACLs are unreadable ({exc})") from None
            self._authorizer = changes, Authorizer(acls, self.super_users, self.allow_everyone)
        return self._authorizer[1]

    @staticmethod
    def unchecked(registry: Any, method: str) -> Callable[..., Any]:
        """The guarded `method` of `registry` without its check; ValueError for any other."""
        wrapper = getattr(type(registry), method, None) if method in RULES else None
        original = getattr(wrapper, "unchecked", None)
        if original is None:
            raise ValueError(f"{method!r} is not an administrative method of the topic registry")
        return original.__get__(registry)  # type: ignore[no-any-return]


def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method(self, *args)` of the registry, called as `(*args, credential=...)`: checked
    by `self.guard` first. Not functools.wraps: Ray reads the wrapper's own signature,
    whose keyword `credential` it must accept."""

    signature = inspect.signature(method)

    def wrapper(self: Any, *args: Any, credential: str | None = None, **kwargs: Any) -> Any:
        self._ready()
        # The rules read the arguments by position: keywords are bound to theirs first, so
        # no argument escapes the check by being passed by name.
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise InvalidRequestError(f"{method.__name__}: {exc}") from None
        self.guard.check(method.__name__, tuple(bound.arguments.values())[1:], credential)
        return method(*bound.args, **bound.kwargs)

    wrapper.__name__, wrapper.__qualname__ = method.__name__, method.__qualname__
    wrapper.__doc__ = method.__doc__
    wrapper.unchecked = method  # type: ignore[attr-defined]
    return wrapper
