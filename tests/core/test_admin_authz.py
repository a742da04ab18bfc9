"""Kafka's operations for the administrative calls over Ray (coordinator/admin_authz.py)."""

from __future__ import annotations

import pytest

from coordinator.acl import (
    CLUSTER_NAME,
    AclBinding,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from coordinator.admin_authz import RULES, AuthorizationError, refusal
from coordinator.checks import InvalidRequestError
from coordinator.errors import Errors

ALICE = "User:alice"
TOPIC_METHODS = {"create_topic", "create_partitions", "set_end_offsets", "set_start_offsets"}


def acl(resource: ResourceType, name: str, operation: Operation,
        permission: Permission = Permission.ALLOW, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, ALICE, "*", operation, permission)


def cluster(operation: Operation, permission: Permission = Permission.ALLOW) -> AclBinding:
    return acl(ResourceType.CLUSTER, CLUSTER_NAME, operation, permission)


@pytest.mark.parametrize("method, operation", [
    ("create_acls", Operation.ALTER), ("delete_acls", Operation.ALTER), ("describe_acls", Operation.DESCRIBE),
    ("config_set", Operation.ALTER_CONFIGS), ("config_get", Operation.DESCRIBE_CONFIGS),
    ("issue_credential", Operation.ALTER), ("revoke_credential", Operation.ALTER),
    ("repartition", Operation.ALTER), ("reassign", Operation.ALTER), ("elect_leader", Operation.ALTER),
    ("rolling_restart", Operation.ALTER),
])
def test_cluster_methods_need_their_operation_on_the_cluster(method: str, operation: Operation) -> None:
    refused = refusal(Authorizer(), ALICE, method, ())
    assert isinstance(refused, AuthorizationError) and isinstance(refused, InvalidRequestError)
    assert refused.error is Errors.CLUSTER_AUTHORIZATION_FAILED and ALICE in str(refused)
    assert refusal(Authorizer([cluster(operation)]), ALICE, method, ()) is None
    other = Authorizer([cluster(Operation.CLUSTER_ACTION)])
    assert refusal(other, ALICE, method, ()) is not None, "another operation is not enough"
    denied = Authorizer([cluster(operation), cluster(Operation.ALL, Permission.DENY)])
    assert refusal(denied, ALICE, method, ()) is not None, "DENY wins"
    assert refusal(Authorizer(super_users=[ALICE]), ALICE, method, ()) is None


def test_describe_configs_is_implied_by_alter_configs_and_describe_acls_by_alter() -> None:
    assert refusal(Authorizer([cluster(Operation.ALTER_CONFIGS)]), ALICE, "config_get", ()) is None
    assert refusal(Authorizer([cluster(Operation.ALTER)]), ALICE, "describe_acls", ()) is None


def test_create_topic_needs_create_on_the_cluster_or_on_the_topic() -> None:
    assert refusal(Authorizer([cluster(Operation.CREATE)]), ALICE, "create_topic", ("orders", 3)) is None
    team_a = acl(ResourceType.TOPIC, "team-a.", Operation.CREATE, pattern=PatternType.PREFIXED)
    prefixed = Authorizer([team_a])
    assert refusal(prefixed, ALICE, "create_topic", ("team-a.orders", 3)) is None
    refused = refusal(prefixed, ALICE, "create_topic", ("team-b.orders", 3))
    assert refused is not None and refused.error is Errors.TOPIC_AUTHORIZATION_FAILED
    assert "team-b.orders" in str(refused)


def test_topic_methods_name_the_topics_refused() -> None:
    authorizer = Authorizer([acl(ResourceType.TOPIC, "a", Operation.WRITE),
                             acl(ResourceType.TOPIC, "b", Operation.ALTER)])
    assert refusal(authorizer, ALICE, "set_end_offsets", ({("a", 0): 5, ("a", 1): 6}, None)) is None
    refused = refusal(authorizer, ALICE, "set_end_offsets", ({("a", 0): 5, ("b", 0): 1, ("c", 0): 1}, None))
    assert refused is not None and refused.error is Errors.TOPIC_AUTHORIZATION_FAILED
    assert "b, c" in str(refused) and " a," not in str(refused)
    assert refusal(authorizer, ALICE, "set_start_offsets", ({("a", 0): 1},)) is not None, "DELETE needed"
    assert refusal(authorizer, ALICE, "create_partitions", ("b", 4)) is None
    assert refusal(authorizer, ALICE, "create_partitions", ("a", 4)) is not None


def test_an_unknown_method_is_refused_and_every_rule_answers_garbage() -> None:
    everything = Authorizer(allow_everyone_if_no_acl_found=True)
    refused = refusal(everything, ALICE, "ray_auth_if_changed", ())
    assert refused is not None and refused.error is Errors.CLUSTER_AUTHORIZATION_FAILED
    nobody = Authorizer()
    for method in RULES:  # malformed arguments never crash a rule; the method validates them after
        for args in [(), (None,), ("x",), ({1: 2},), ({("t",): 1},)]:
            refused = refusal(nobody, ALICE, method, args)
            if method not in TOPIC_METHODS:
                assert refused is not None and refused.error is Errors.CLUSTER_AUTHORIZATION_FAILED


def test_a_refusal_crosses_a_process_whole() -> None:
    import pickle

    refused = refusal(Authorizer(), ALICE, "create_acls", ())
    again = pickle.loads(pickle.dumps(refused))
    assert isinstance(again, AuthorizationError) and again.error is Errors.CLUSTER_AUTHORIZATION_FAILED
    assert str(again) == str(refused)
