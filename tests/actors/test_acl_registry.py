"""ACLs as service state: the topic registry's CreateAcls, DescribeAcls and DeleteAcls (no Ray)."""

from __future__ import annotations

import os

import pytest

from actors.client.acl_table import ACL_KIND, AclStoreCorrupt, entry_name
from actors.client.topic_registry import TopicRegistry
from actors.core.settings import ServiceSettings
from coordinator.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from coordinator.errors import Errors
from coordinator.service_state import ServiceEntry

from tests.actors.service_store_support import ShardStore

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def acl(name: str, principal: str = "User:alice", pattern: PatternType = LITERAL,
        operation: Operation = Operation.READ, resource: ResourceType = GROUP) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, Permission.ALLOW)


def registry(tmp_path: os.PathLike[str], store: ShardStore) -> TopicRegistry:
    return TopicRegistry(ServiceSettings(data_dir=str(tmp_path)), store=store)


def test_created_acls_survive_a_restart_and_deletes_use_kafkas_filters(tmp_path: os.PathLike[str]) -> None:
    store = ShardStore()
    first = registry(tmp_path, store)
    wanted = [acl("g"), acl("team.", pattern=PREFIXED), acl("orders", resource=TOPIC), acl("g")]
    assert first.create_acls(wanted) == [(Errors.NONE, "")] * 4
    store = store.restarted()
    again = registry(tmp_path, store)
    assert again.describe_acls(AclFilter())[2] == [wanted[2], *wanted[:2]], "once, replicated, by type"
    matching = AclFilter(GROUP, "team.x", PatternType.MATCH)
    assert again.describe_acls(matching)[2] == [acl("team.", pattern=PREFIXED)]
    (error, _, deleted), = again.delete_acls([AclFilter(GROUP)])
    assert error is Errors.NONE and deleted == wanted[:2]
    assert registry(tmp_path, store.restarted()).describe_acls(AclFilter())[2] == [wanted[2]]


def test_bad_bindings_are_refused_alone_with_kafkas_reason(tmp_path: os.PathLike[str]) -> None:
    reg = registry(tmp_path, ShardStore())
    results = reg.create_acls([
        acl("g", principal="alice"),  # no Type:name
        acl(""),  # empty name
        (3, "g", 3, "User:bob", "*", 99, 3),  # unknown operation code
        acl("not-kafka-cluster", resource=ResourceType.CLUSTER, operation=Operation.DESCRIBE),
        ("G", "g", 3, "User:bob", "*", 3, 3),  # not a code at all
        acl("ok"),
    ])
    assert [e for e, _ in results] == [Errors.INVALID_REQUEST] * 5 + [Errors.NONE]
    assert "principal" in results[0][1] and "name" in results[1][1] and "operation" in results[2][1]
    assert reg.describe_acls(AclFilter())[2] == [acl("ok")]
    error, why, _ = reg.describe_acls(AclFilter(ResourceType.UNKNOWN))
    assert error is Errors.INVALID_REQUEST and "resource type" in why
    assert reg.describe_acls("nonsense")[0] is Errors.INVALID_REQUEST


def test_the_view_token_changes_only_with_the_acls(tmp_path: os.PathLike[str]) -> None:
    reg = registry(tmp_path, ShardStore())
    token, acls = reg.acls_if_changed(None)  # type: ignore[misc]
    assert acls == () and reg.acls_if_changed(token) is None
    reg.create_topic("t", 1)
    assert reg.acls_if_changed(token) is None, "a topic is no ACL change"
    reg.create_acls([acl("g")])
    token2, acls = reg.acls_if_changed(token)  # type: ignore[misc]
    assert acls == (acl("g"),) and token2 != token
    reg.create_acls([acl("g")])
    assert reg.acls_if_changed(token2) is None, "an ACL already held changes nothing"


def test_a_corrupt_acl_entry_applies_nothing_until_an_operator_deletes_every_acl(
    tmp_path: os.PathLike[str]
) -> None:
    store = ShardStore()
    store.write("someone", [ServiceEntry(ACL_KIND, '[3, "g", 3, "alice"]', b""),
                            ServiceEntry(ACL_KIND, entry_name(acl("g")), b"")], claim=True)
    reg = registry(tmp_path, store)
    with pytest.raises(AclStoreCorrupt, match="no valid binding"):
        reg.acls_if_changed(None)
    assert reg.describe_acls(AclFilter())[0] is Errors.KAFKA_STORAGE_ERROR
    assert reg.create_topic("t", 1) is Errors.NONE, "the topics serve on"
    reg.delete_acls([AclFilter(GROUP)])
    with pytest.raises(AclStoreCorrupt):
        reg.acls_if_changed(None)
    (error, _, deleted), = reg.delete_acls([AclFilter()])
    assert error is Errors.NONE and deleted == []
    assert registry(tmp_path, store.restarted()).acls_if_changed(None)[1] == ()  # type: ignore[index]
