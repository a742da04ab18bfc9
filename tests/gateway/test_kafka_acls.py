"""ACLs with real Kafka clients (issue 49): a SASL/PLAIN gateway in front of the session's
service, its authorizer on, managed with kafka-python's and confluent-kafka's admin clients.

kafka-python's admin (as the super user) creates, describes and deletes ACLs; a consumer
without READ on its group is refused GROUP_AUTHORIZATION_FAILED and, once an ACL allows it,
commits (the change reaches the gateway within a second); a PREFIXED DENY wins over an
ALLOW; confluent-kafka's admin is refused CLUSTER_AUTHORIZATION_FAILED as a plain user."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AclBinding as CkBinding
from confluent_kafka.admin import AclOperation, AclPermissionType, AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType as CkResourceType
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import GroupAuthorizationFailedError
from kafka.structs import OffsetAndMetadata

from actors import Client
from coordinator.acl import AclBinding, AclFilter, Operation, PatternType, Permission
from coordinator.acl import ResourceType as Resource
from gateway.security import SecurityConfig

from tests.gateway.gateway_support import GatewayThread
from tests.gateway.java_support import run_program
from tests.gateway.test_java_client import require_java

pytestmark = [pytest.mark.ray, pytest.mark.slow]

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def gateway(service: Client) -> Iterator[GatewayThread]:
    import actors

    security = SecurityConfig(plain_users=USERS, super_users=frozenset({"User:admin"}))
    running = GatewayThread(actors.connect(), security=security, direct=False)
    yield running
    running.close()


def sasl(user: str) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def commit_as_alice(gateway: GatewayThread, group: str, topic: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, group_id=group, enable_auto_commit=False,
                             **sasl("alice"))
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(7, "", -1)})
        assert consumer.committed(TopicPartition(topic, 0)) == 7, "read back through OffsetFetch"
    finally:
        consumer.close()


def eventually(check: Any, what: str) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return check()
        except Exception:
            if time.monotonic() > deadline:
                raise AssertionError(f"not in time: {what}") from None
            time.sleep(0.2)


def test_a_consumer_needs_read_on_its_group_and_admins_manage_acls(
    service: Client, gateway: GatewayThread
) -> None:
    topic, group = unique("topic"), unique("group")
    service.create_topic(topic, 1)
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, **sasl("admin"))
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            commit_as_alice(gateway, group, topic)
        assert service.fetch_offsets(group).partitions == (), "the denied commit changed nothing"
        allowed = [
            ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.GROUP, group, ACLResourcePatternType.LITERAL)),
            ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL)),
        ]
        created = admin.create_acls(allowed)
        assert not created["failed"] and len(created["succeeded"]) == 2
        eventually(lambda: commit_as_alice(gateway, group, topic), "alice's commit allowed")
        assert service.fetch_offsets(group).offsets() == {(topic, 0): 7}

        group_filter = ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                 ResourcePatternFilter(ResourceType.GROUP, group, ACLResourcePatternType.ANY))
        described, error = admin.describe_acls(group_filter)
        assert [a.resource_pattern.resource_name for a in described] == [group]

        prefix = group[:8]  # "group-xx": a PREFIXED DENY wins over the LITERAL ALLOW
        deny = ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.DENY,
                   ResourcePattern(ResourceType.GROUP, prefix, ACLResourcePatternType.PREFIXED))
        assert not admin.create_acls([deny])["failed"]

        def refused() -> None:
            try:
                commit_as_alice(gateway, group, topic)
            except GroupAuthorizationFailedError:
                return
            raise AssertionError("allowed")
        eventually(refused, "the DENY applied")

        any_group = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                              ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
        deleted = admin.delete_acls([any_group])
        (_, matched, error), = deleted
        assert error.errno == 0 and len(matched) >= 3
        assert admin.describe_acls(any_group)[0] == []
    finally:
        admin.close()


def test_a_plain_user_may_not_change_acls(gateway: GatewayThread) -> None:
    admin = AdminClient({
        "bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": USERS["alice"],
    })
    binding = CkBinding(CkResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)
    future = admin.create_acls([binding], request_timeout=20)[binding]
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_confluent_consumer_without_read_on_its_group_is_refused(
    service: Client, gateway: GatewayThread, protocol: str
) -> None:
    topic, group = unique("topic"), unique("group")
    service.create_topic(topic, 1)
    describe = AclBinding(Resource.TOPIC, topic, PatternType.LITERAL, "User:alice", "*",
                          Operation.DESCRIBE, Permission.ALLOW)  # its Metadata answers the topic
    service.create_acls([describe])
    consumer = Consumer({
        "bootstrap.servers": gateway.bootstrap, "group.id": group, "group.protocol": protocol,
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
        "sasl.password": USERS["alice"], "enable.auto.commit": False,
    })
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        errors = []  # TOPIC_AUTHORIZATION_FAILED first where the DESCRIBE is not applied yet
        while KafkaError.GROUP_AUTHORIZATION_FAILED not in errors and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None:
                errors.append(message.error().code())
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in errors, errors
        assert service.describe_groups([group])[0].members == (), "it never joined"
    finally:
        consumer.close()
        service.delete_acls([AclFilter(Resource.TOPIC, topic)])


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_java_client_is_refused_then_allowed_by_acls_its_admin_manages(
    service: Client, gateway: GatewayThread, protocol: str
) -> None:
    require_java()
    topic, group, other = unique("topic"), unique(f"java-{protocol}"), unique("other")
    service.create_topic(topic, 1)
    service.commit_offsets(other, {(topic, 0): 1})  # a group alice may not describe
    seen = run_program("KafkaAclCheck", gateway.bootstrap, topic, group, protocol, other)
    assert seen["refused"] == ["GroupAuthorizationException"] and seen["committed"] == ["17"]
    assert seen["alice_listed"] == [group], "ListGroups shows only the groups alice may describe"
    assert seen["alice_may"] == ["[DESCRIBE, READ]"], "the group operations alice may do"
    assert seen["described"] == ["3"] and seen["deleted"] == ["3"] and seen["left"] == ["0"]
