"""The ACL calls of `Client`: Kafka's CreateAcls, DescribeAcls and DeleteAcls on the registry.

The registry (`actors/client/topic_registry.py`) holds the bindings as
service state and validates each where it enters
(`actors/client/acl_table.py`); these functions only carry them, retried
like every registry call while Ray restarts it (`actors.client.topics`).
A binding is a `coordinator.acl.AclBinding`, a filter an `AclFilter`.

Answers, as Kafka's Admin client gets them: `create_acls` one
(error, message) per binding, in order (INVALID_REQUEST with the reason for
a bad one, the others created); `describe_acls` the matching bindings, or
AclError for an invalid filter; `delete_acls` per filter the bindings it
deleted, or its error.

With `ServiceSettings.ray_credentials` on, the sync functions carry the
caller's credential (`Client`'s) and the registry checks it
(`actors/client/admin_guard.py`); the async ones are the gateway's, a service
component that authorized its Kafka client itself: they call the registry's
unchecked `serve`.

The Ray path's credentials (issue 49, docs/security.md) are the registry's
too: `issue_credential` and `revoke_credential` answer the credential or the
revoked id, or raise ValueError with the registry's reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from actors.client.topics import _call, _call_async
from coordinator.acl import AclBinding, AclFilter
from coordinator.errors import Errors

AclResult = tuple[Errors, str]
Deleted = tuple[Errors, str, list[AclBinding]]


class AclError(ValueError):
    """An ACL request the registry refused (`error` is Kafka's code)."""

    def __init__(self, error: Errors, detail: str) -> None:
        super().__init__(f"{error.name}: {detail}")
        self.error = error
        self.detail = detail


def create_acls(
    controller: Any, bindings: Iterable[AclBinding], credential: str | None = None
) -> list[AclResult]:
    return _call(controller, "create_acls", list(bindings), credential=credential)  # type: ignore[no-any-return]


async def create_acls_async(controller: Any, bindings: Iterable[AclBinding]) -> list[AclResult]:
    return await _call_async(controller, "serve", "create_acls", list(bindings))  # type: ignore[no-any-return]


def describe_acls(controller: Any, acl_filter: AclFilter, credential: str | None = None) -> list[AclBinding]:
    return _described(_call(controller, "describe_acls", acl_filter, credential=credential))


async def describe_acls_async(controller: Any, acl_filter: AclFilter) -> tuple[Errors, str, list[AclBinding]]:
    return await _call_async(controller, "serve", "describe_acls", acl_filter)  # type: ignore[no-any-return]


def _described(answer: tuple[Errors, str, list[AclBinding]]) -> list[AclBinding]:
    error, detail, acls = answer
    if error is not Errors.NONE:
        raise AclError(error, detail)
    return acls


def delete_acls(
    controller: Any, filters: Iterable[AclFilter], credential: str | None = None
) -> list[Deleted]:
    return _call(controller, "delete_acls", list(filters), credential=credential)  # type: ignore[no-any-return]


async def delete_acls_async(controller: Any, filters: Iterable[AclFilter]) -> list[Deleted]:
    return await _call_async(controller, "serve", "delete_acls", list(filters))  # type: ignore[no-any-return]


def issue_credential(controller: Any, principal: str, ttl_s: float, credential: str | None = None) -> str:
    """A credential of `principal`, issued for a caller holding `credential`."""
    return _answered(_call(controller, "issue_credential", principal, ttl_s, credential=credential))


def issue_service_credential(controller: Any, principal: str, ttl_s: float) -> str:
    """The service's own issuing (`actors.start`'s bootstrap credential): unchecked."""
    return _answered(_call(controller, "serve", "issue_credential", principal, ttl_s))


def revoke_credential(controller: Any, revoked: str, credential: str | None = None) -> str:
    return _answered(_call(controller, "revoke_credential", revoked, credential=credential))


def _answered(answer: tuple[str, str]) -> str:
    value, why = answer
    if why:
        raise ValueError(why)
    return value
