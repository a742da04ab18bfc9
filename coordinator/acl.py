"""Kafka's ACLs: bindings, filters and the authorizer's decision, sans I/O (issue 49).

The model and the decision are Kafka's `StandardAuthorizer`'s
(metadata/.../authorizer/StandardAuthorizerData.java), with Kafka's enum
codes so the wire APIs (CreateAcls, DescribeAcls, DeleteAcls) map one to one:
- A binding is a resource pattern (type, name, LITERAL or PREFIXED; the
  LITERAL name "*" is every resource of the type) and an entry (principal
  such as "User:alice" or "User:*", host or "*", operation, ALLOW or DENY).
- `authorize`: a super user is allowed everything. Otherwise, among the
  bindings whose pattern matches the resource and whose principal (the
  caller's or "User:*") and host match: any DENY denies; else any ALLOW
  allows; else, when no binding at all matches the resource (whoever it is
  for), `allow_everyone_if_no_acl_found` decides; else denied.
- Operations: ALL matches every operation. An ALLOW of READ, WRITE, DELETE
  or ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS allows
  DESCRIBE_CONFIGS; a DENY denies exactly its operation (or ALL).
- Filters (DescribeAcls, DeleteAcls): ANY matches every value of a field,
  None every name, principal or host; the pattern type MATCH matches every
  pattern that would apply to the named resource (LITERAL equal or "*",
  PREFIXED a prefix of it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # Kafka's name of the one CLUSTER resource
IMPLIES_DESCRIBE = frozenset(
    {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def problem(self) -> str | None:
        """Why Kafka's CreateAcls would refuse this binding (None: it is valid)."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return "the resource type must be a concrete one"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "the pattern type must be LITERAL or PREFIXED"
        if not self.name:
            return "the resource name must not be empty"
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            return "the operation must be a concrete one"
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            return "the permission must be ALLOW or DENY"
        if ":" not in self.principal:
            return f"the principal {self.principal!r} is not of the form Type:name"
        if not self.host:
            return "the host must not be empty ('*' is every host)"
        return None

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Which bindings a DescribeAcls or DeleteAcls names (module docstring)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and acl.resource_type is not self.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        return (
            (self.principal is None or acl.principal == self.principal)
            and (self.host is None or acl.host == self.host)
            and (self.operation is Operation.ANY or acl.operation is self.operation)
            and (self.permission is Permission.ANY or acl.permission is self.permission)
        )

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.pattern_type is PatternType.MATCH:
            return self.name is None or acl.matches_resource(acl.resource_type, self.name)
        if self.pattern_type is not PatternType.ANY and acl.pattern_type is not self.pattern_type:
            return False
        return self.name is None or acl.name == self.name


class Authorizer:
    """The bindings in force, by resource type, and the decision of module docstring."""

    def __init__(
        self,
        acls: Iterable[AclBinding] = (),
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.by_type: dict[ResourceType, list[AclBinding]] = {}
        for acl in acls:
            self.by_type.setdefault(acl.resource_type, []).append(acl)

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        found = allowed = False
        for acl in self.by_type.get(resource_type, ()):
            if not acl.matches_resource(resource_type, name):
                continue
            found = True
            if acl.principal not in principals or acl.host not in (WILDCARD, host):
                continue
            if not _operation_matches(acl, operation):
                continue
            if acl.permission is Permission.DENY:
                return False
            allowed = True
        return allowed or (not found and self.allow_everyone_if_no_acl_found)


def _operation_matches(acl: AclBinding, operation: Operation) -> bool:
    if acl.operation is Operation.ALL:
        return True
    if acl.permission is Permission.ALLOW:
        if operation is Operation.DESCRIBE:
            return acl.operation in IMPLIES_DESCRIBE
        if operation is Operation.DESCRIBE_CONFIGS:
            return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return acl.operation is operation
