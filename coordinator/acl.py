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
from typing import Any


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
MAX_TEXT = 32_767  # a Kafka STRING's longest
MEMO_MAX = 100_000  # decisions an Authorizer remembers
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
        why = principal_error(self.principal)
        if why:
            return why
        if not self.host:
            return "the host must not be empty ('*' is every host)"
        if self.resource_type is ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            return f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
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

    def problem(self) -> str | None:
        """Why Kafka refuses this filter in DescribeAcls or DeleteAcls (None: it is valid)."""
        if self.resource_type is ResourceType.UNKNOWN:
            return "the resource type must not be UNKNOWN"
        if self.pattern_type is PatternType.UNKNOWN:
            return "the pattern type must not be UNKNOWN"
        if self.operation is Operation.UNKNOWN:
            return "the operation must not be UNKNOWN"
        if self.permission is Permission.UNKNOWN:
            return "the permission must not be UNKNOWN"
        return None

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.pattern_type is PatternType.MATCH:
            return self.name is None or acl.matches_resource(acl.resource_type, self.name)
        if self.pattern_type is not PatternType.ANY and acl.pattern_type is not self.pattern_type:
            return False
        return self.name is None or acl.name == self.name


class Authorizer:
    """The bindings in force, indexed by resource type and name, and the decision of module docstring.

    Indexed so a decision costs a few dict lookups whatever the number of
    bindings: LITERAL bindings by name (with "*"), PREFIXED ones by their
    prefix, looked up for each prefix of the resource's name. Decisions are
    remembered (the bindings of an Authorizer never change: a new set is a
    new Authorizer), at most `MEMO_MAX` of them, so a consumer's repeated
    requests cost one dict lookup per resource."""

    def __init__(
        self,
        acls: Iterable[AclBinding] = (),
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._memo: dict[tuple[str, str, Operation, ResourceType, str], bool] = {}
        self.literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self.prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        for acl in acls:
            if acl.pattern_type is PatternType.PREFIXED:
                self.prefixed.setdefault(acl.resource_type, {}).setdefault(acl.name, []).append(acl)
            else:
                self.literal.setdefault((acl.resource_type, acl.name), []).append(acl)

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every binding whose pattern matches the resource, whoever it is for."""
        found = list(self.literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self.literal.get((resource_type, WILDCARD), ())
        prefixes = self.prefixed.get(resource_type)
        if prefixes:
            for end in range(1, len(name) + 1):
                found += prefixes.get(name[:end], ())
        return found

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        key = (principal, host, operation, resource_type, name)
        decided = self._memo.get(key)
        if decided is None:
            if len(self._memo) >= MEMO_MAX:
                self._memo.clear()
            decided = self._memo[key] = self._decide(principal, host, operation, resource_type, name)
        return decided

    def _decide(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        found = allowed = False
        for acl in self.matching(resource_type, name):
            found = True
            if acl.principal not in principals or acl.host not in (WILDCARD, host):
                continue
            if not _operation_matches(acl, operation):
                continue
            if acl.permission is Permission.DENY:
                return False
            allowed = True
        return allowed or (not found and self.allow_everyone_if_no_acl_found)


def _valid_principal(principal: str) -> bool:
    kind, colon, name = principal.partition(":")
    return bool(kind and colon and name)


def principal_error(principal: object) -> str | None:
    """Why `principal` is no Kafka principal (`Type:name`), None when it is one."""
    if not isinstance(principal, str) or len(principal) > MAX_TEXT or not _valid_principal(principal):
        return f"could not parse the principal {principal!r}: not of the form Type:name"
    return None


def binding_from(fields: object) -> AclBinding | str:
    """An AclBinding from untrusted `fields` (an AclBinding or its seven values in order),
    or why it is no valid one: what CreateAcls answers per binding (INVALID_REQUEST)."""
    return _parsed(AclBinding, fields, nullable=False)  # type: ignore[no-any-return]


def filter_from(fields: object) -> AclFilter | str:
    """An AclFilter from untrusted `fields` (an AclFilter or its seven values, names None
    for any), or why it is no valid one (DescribeAcls and DeleteAcls answer INVALID_REQUEST)."""
    return _parsed(AclFilter, fields, nullable=True)  # type: ignore[no-any-return]


def _parsed(cls: type[AclBinding] | type[AclFilter], fields: object, nullable: bool) -> Any:
    if isinstance(fields, cls):
        fields = tuple(getattr(fields, f) for f in cls.__slots__)
    if not isinstance(fields, (tuple, list)) or len(fields) != 7:
        return f"an {cls.__name__} has seven fields"
    resource, name, pattern, principal, host, operation, permission = fields
    if not all((nullable and v is None) or (isinstance(v, str) and len(v) <= MAX_TEXT)
               for v in (name, principal, host)):
        either = "None or " if nullable else ""
        return f"the resource name, principal and host must be {either}strings of <= {MAX_TEXT} characters"
    codes: list[IntEnum] = []
    for value, enum in ((resource, ResourceType), (pattern, PatternType), (operation, Operation),
                        (permission, Permission)):
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{enum.__name__} must be an int code, got {value!r}"
        # An unknown code reads as UNKNOWN, as Kafka reads it; problem() then refuses it.
        codes.append(enum(value) if value in enum._value2member_map_ else enum(0))
    made = cls(codes[0], name, codes[1], principal, host, codes[2], codes[3])  # type: ignore[arg-type]
    return made.problem() or made


def _operation_matches(acl: AclBinding, operation: Operation) -> bool:
    if acl.operation is Operation.ALL:
        return True
    if acl.permission is Permission.ALLOW:
        if operation is Operation.DESCRIBE:
            return acl.operation in IMPLIES_DESCRIBE
        if operation is Operation.DESCRIBE_CONFIGS:
            return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return acl.operation is operation
