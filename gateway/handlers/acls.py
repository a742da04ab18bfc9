"""CreateAcls, DescribeAcls and DeleteAcls: Kafka's Admin API for the service's ACLs (issue 49).

The ACLs are the service's (the topic registry's, `actors/client/acls.py`),
so any gateway manages them and every gateway and leader listener enforces
them within a second. As Kafka's broker (`AclApis`):
- Without an authorizer (a loopback gateway with neither SASL nor TLS)
  every request is answered SECURITY_DISABLED, "No Authorizer is
  configured."
- DescribeAcls needs DESCRIBE on the CLUSTER, CreateAcls and DeleteAcls
  ALTER on it; else CLUSTER_AUTHORIZATION_FAILED (per creation or filter).
- A bad binding or filter (unknown operation, pattern or resource type, a
  principal not Type:name, an empty name) is answered INVALID_REQUEST with
  the reason, alone; the others are applied.
- DescribeAcls groups the bindings by resource pattern, as Kafka answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.client import acls
from actors.client.retry import CoordinatorUnavailableError
from coordinator.acl import CLUSTER_NAME, AclBinding, Operation, ResourceType
from coordinator.errors import Errors
from gateway.handlers.entities import respond

if TYPE_CHECKING:
    from gateway.context import RequestContext

NO_AUTHORIZER = "No Authorizer is configured."
NOT_AUTHORIZED = "Cluster authorization failed."


async def _refusal(ctx: RequestContext, operation: Operation) -> tuple[Errors, str] | None:
    """Why this connection may not do `operation` on the ACLs, None when it may."""
    may = getattr(ctx.client, "may", None)
    if may is None:
        return Errors.SECURITY_DISABLED, NO_AUTHORIZER
    try:
        if not await may(operation, ResourceType.CLUSTER, CLUSTER_NAME):
            return Errors.CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED
    except CoordinatorUnavailableError as exc:  # the ACLs are not read yet: retriable
        return Errors.COORDINATOR_NOT_AVAILABLE, str(exc)
    return None


def _filter_fields(f: Any) -> tuple[Any, ...]:
    return (int(f.resource_type_filter), f.resource_name_filter, int(f.pattern_type_filter),
            f.principal_filter, f.host_filter, int(f.operation), int(f.permission_type))


async def handle_create_acls(ctx: RequestContext, request: Any) -> Any:
    refused = await _refusal(ctx, Operation.ALTER)
    if refused is not None:
        results = [refused] * len(request.creations)
    else:
        creations = [
            (int(c.resource_type), c.resource_name, int(c.resource_pattern_type), c.principal, c.host,
             int(c.operation), int(c.permission_type))
            for c in request.creations
        ]
        results = await acls.create_acls_async(ctx.client.controller, creations)
    return respond(request, {
        "throttle_time": 0,
        "results": [{"error_code": e, "error_message": m or None} for e, m in results],
    })


async def handle_describe_acls(ctx: RequestContext, request: Any) -> Any:
    refused = await _refusal(ctx, Operation.DESCRIBE)
    if refused is not None:
        error, message, found = refused[0], refused[1], []
    else:
        error, message, found = await acls.describe_acls_async(ctx.client.controller, _filter_fields(request))
    resources: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in found:
        resources.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(acl)
    return respond(request, {
        "throttle_time": 0, "error_code": error, "error_message": message or None,
        "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p,
             "acls": [{"principal": a.principal, "host": a.host, "operation": a.operation,
                       "permission_type": a.permission} for a in bindings]}
            for (t, n, p), bindings in resources.items()
        ],
    })


async def handle_delete_acls(ctx: RequestContext, request: Any) -> Any:
    refused = await _refusal(ctx, Operation.ALTER)
    if refused is not None:
        results: list[tuple[Errors, str, list[AclBinding]]] = [(*refused, [])] * len(request.filters)
    else:
        filters = [_filter_fields(f) for f in request.filters]
        results = await acls.delete_acls_async(ctx.client.controller, filters)
    return respond(request, {
        "throttle_time": 0,
        "filter_results": [
            {"error_code": e, "error_message": m or None, "matching_acls": [
                {"error_code": Errors.NONE, "error_message": None, "resource_type": a.resource_type,
                 "resource_name": a.name, "pattern_type": a.pattern_type, "principal": a.principal,
                 "host": a.host, "operation": a.operation, "permission_type": a.permission}
                for a in deleted]}
            for e, m, deleted in results
        ],
    })

