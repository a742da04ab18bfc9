"""Kafka's ACL decision (coordinator/acl.py), case by case as StandardAuthorizer decides."""

from __future__ import annotations

import pytest

from coordinator.acl import (
    AclBinding,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
READ, DESCRIBE, DELETE, ALL = Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.ALL


def acl(
    name: str, operation: Operation = READ, permission: Permission = ALLOW, principal: str = "User:alice",
    pattern: PatternType = LITERAL, resource: ResourceType = GROUP, host: str = "*",
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def allowed(authorizer: Authorizer, name: str, operation: Operation = READ, principal: str = "User:alice",
            host: str = "10.0.0.1", resource: ResourceType = GROUP) -> bool:
    return authorizer.authorize(principal, host, operation, resource, name)


def test_literal_prefixed_and_wildcard_patterns() -> None:
    bob = acl("*", DESCRIBE, principal="User:bob")
    auth = Authorizer([acl("billing"), acl("team-a.", pattern=PREFIXED), bob])
    assert allowed(auth, "billing") and not allowed(auth, "billing-2")
    assert allowed(auth, "team-a.orders") and not allowed(auth, "team-b.orders")
    assert allowed(auth, "anything", DESCRIBE, "User:bob") and not allowed(auth, "anything", READ, "User:bob")


def test_deny_wins_over_allow_and_the_wildcard_principal_counts() -> None:
    auth = Authorizer([acl("g"), acl("g", READ, DENY, principal="User:*")])
    assert not allowed(auth, "g")
    auth = Authorizer([acl("g", principal="User:*")])
    assert allowed(auth, "g", principal="User:carol")


def test_allows_of_read_write_delete_alter_imply_describe_denies_do_not() -> None:
    auth = Authorizer([acl("g", READ), acl("h", DELETE), acl("h", DESCRIBE, DENY)])
    assert allowed(auth, "g", DESCRIBE)
    assert not allowed(auth, "h", DESCRIBE), "an explicit DENY of DESCRIBE still denies"
    auth = Authorizer([acl("g", DESCRIBE), acl("g", READ, DENY)])
    assert allowed(auth, "g", DESCRIBE) and not allowed(auth, "g", READ)
    auth = Authorizer([acl("g", ALL, DENY), acl("g", READ)])
    assert not allowed(auth, "g", DESCRIBE)


def test_hosts_must_match_unless_the_binding_says_every_host() -> None:
    auth = Authorizer([acl("g", host="10.0.0.2")])
    assert allowed(auth, "g", host="10.0.0.2") and not allowed(auth, "g", host="10.0.0.1")


@pytest.mark.parametrize("allow_if_none", [True, False])
def test_no_binding_for_the_resource_falls_back_to_the_setting(allow_if_none: bool) -> None:
    auth = Authorizer([acl("g", principal="User:bob")], allow_everyone_if_no_acl_found=allow_if_none)
    assert allowed(auth, "other") is allow_if_none
    assert not allowed(auth, "g"), "the resource has bindings, none for alice: denied"


def test_super_users_are_allowed_everything() -> None:
    auth = Authorizer([acl("g", ALL, DENY, principal="User:*")], super_users=["User:admin"])
    assert allowed(auth, "g", DELETE, "User:admin") and not allowed(auth, "g", DELETE, "User:bob")


def test_resource_types_are_kept_apart() -> None:
    auth = Authorizer([acl("orders", resource=TOPIC)])
    assert allowed(auth, "orders", resource=TOPIC) and not allowed(auth, "orders", resource=GROUP)


def test_filters_as_describe_and_delete_acls_use_them() -> None:
    bindings = [acl("g"), acl("team.", pattern=PREFIXED), acl("*"), acl("orders", resource=TOPIC)]
    assert [b for b in bindings if AclFilter().matches(b)] == bindings
    matching = AclFilter(GROUP, "team.x", PatternType.MATCH)
    assert [b.name for b in bindings if matching.matches(b)] == ["team.", "*"]
    assert [b.name for b in bindings if AclFilter(GROUP, "g", LITERAL).matches(b)] == ["g"]
    assert [b.name for b in bindings if AclFilter(TOPIC).matches(b)] == ["orders"]


@pytest.mark.parametrize(
    ("binding", "why"),
    [
        (acl("g", Operation.ANY), "operation"),
        (acl("g", pattern=PatternType.MATCH), "pattern type"),
        (acl("", READ), "name"),
        (acl("g", principal="alice"), "principal"),
        (acl("g", resource=ResourceType.ANY), "resource type"),
    ],
)
def test_bindings_kafka_refuses_to_create_say_why(binding: AclBinding, why: str) -> None:
    problem = binding.problem()
    assert problem is not None and why in problem
    assert acl("g").problem() is None
