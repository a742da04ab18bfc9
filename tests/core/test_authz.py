"""Authorization per API (coordinator/authz.py): Kafka's operations and errors, over a real shard."""

from __future__ import annotations

import dataclasses
from typing import Any

from coordinator.acl import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from coordinator.authz import RULES, check
from coordinator.errors import Errors
from coordinator.lag_query import LagRequest
from coordinator.lag_watch import LagWatchRequest
from coordinator.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from coordinator.service_state import ServiceEntry, ServiceStateReadRequest, ServiceStateWriteRequest
from coordinator.shard import HANDLERS

from tests.core.harness import Harness

GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER
READ, DESCRIBE, DELETE, ALL = Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.ALL
GROUP_DENIED, TOPIC_DENIED = Errors.GROUP_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED
ALICE = "User:alice"


def allow(
    resource: ResourceType, name: str, operation: Operation, principal: str = ALICE,
    pattern: PatternType = PatternType.LITERAL, permission: Permission = Permission.ALLOW,
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


class Guarded:
    """A harness whose requests go through `check` first, as the listeners send them."""

    def __init__(self, *acls: AclBinding, **settings: Any) -> None:
        self.h = Harness()
        self.authorizer = Authorizer(acls, **settings)

    def call(self, request: Any, principal: str = ALICE) -> Any:
        decision = check(self.authorizer, principal, "10.0.0.1", request)
        if decision.send is None:
            return decision.answer
        return decision.finish(self.h.call(decision.send))

    def commit(self, group: str, offsets: dict[tuple[str, int], int], principal: str = ALICE) -> Any:
        parts = tuple(OffsetCommitPartition(t, p, o) for (t, p), o in offsets.items())
        return self.call(OffsetCommitRequest(group, parts), principal).errors()


def test_every_request_the_shard_handles_has_a_rule() -> None:
    assert set(HANDLERS) == set(RULES)


def test_membership_needs_read_on_the_group_and_a_denial_changes_nothing() -> None:
    g = Guarded(allow(GROUP, "g", DESCRIBE))
    join = g.h.join_request("g")
    requests = [join, SyncGroupRequest("g", 1, "m"), HeartbeatRequest("g", 1, "m"),
                LeaveGroupRequest("g", (MemberIdentity("m"),))]
    for request in requests:
        assert g.call(request).error is GROUP_DENIED, type(request).__name__
    assert not g.h.log and not g.h.shard.groups, "nothing written, no group made"
    g = Guarded(allow(GROUP, "g", READ))
    assert g.call(join).error is Errors.MEMBER_ID_REQUIRED, "allowed: the shard answers"


def test_offset_commit_checks_the_group_then_each_topic() -> None:
    g = Guarded(allow(GROUP, "g", READ), allow(TOPIC, "t", READ))
    assert g.commit("g", {("t", 0): 5, ("secret", 0): 7, ("secret", 1): 7}) == {
        ("t", 0): Errors.NONE, ("secret", 0): TOPIC_DENIED, ("secret", 1): TOPIC_DENIED}
    assert g.h.fetch("g") == {("t", 0): 5}, "the denied partitions were not committed"
    records = len(g.h.log)
    assert g.commit("g", {("secret", 0): 1}) == {("secret", 0): TOPIC_DENIED}
    assert g.commit("other", {("t", 0): 1}) == {("t", 0): GROUP_DENIED}
    assert len(g.h.log) == records, "denied commits write nothing"


def test_offset_fetch_needs_describe_and_hides_topics_it_may_not_describe() -> None:
    g = Guarded(allow(GROUP, "g", DESCRIBE), allow(TOPIC, "t", DESCRIBE))
    g.h.commit("g", {("t", 0): 5, ("secret", 0): 7})
    everything = g.call(OffsetFetchRequest("g", None))
    assert everything.error is Errors.NONE and everything.offsets() == {("t", 0): 5}
    asked = g.call(OffsetFetchRequest("g", (("t", 0), ("secret", 0))))
    assert {(p.topic, p.error, p.offset) for p in asked.partitions} == {
        ("t", Errors.NONE, 5), ("secret", TOPIC_DENIED, -1)}
    assert g.call(OffsetFetchRequest("h", None)).error is GROUP_DENIED


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic() -> None:
    g = Guarded(allow(GROUP, "g", DELETE), allow(TOPIC, "t", READ))
    g.h.commit("g", {("t", 0): 5, ("secret", 0): 7})
    answer = g.call(OffsetDeleteRequest("g", (("t", 0), ("secret", 0))))
    assert answer.error is Errors.NONE
    assert {(p.topic, p.error) for p in answer.partitions} == {("t", Errors.NONE), ("secret", TOPIC_DENIED)}
    assert g.h.fetch("g") == {("secret", 0): 7}
    g = Guarded(allow(GROUP, "g", READ), allow(TOPIC, "t", READ))
    assert g.call(OffsetDeleteRequest("g", (("t", 0),))).error is GROUP_DENIED


def test_describe_and_delete_groups_answer_each_group_in_order() -> None:
    g = Guarded(allow(GROUP, "a", DESCRIBE), allow(GROUP, "c", DELETE))
    for name in ("a", "b", "c"):
        g.h.commit(name, {("t", 0): 1})
    described = g.call(DescribeGroupsRequest(("b", "a", "c")))
    assert [(d.group_id, d.error) for d in described.groups] == [
        ("b", GROUP_DENIED), ("a", Errors.NONE), ("c", Errors.NONE)], "DELETE implies DESCRIBE"
    consumer = g.call(ConsumerGroupDescribeRequest(("b", "a")))
    assert [(d.group_id, d.error) for d in consumer.groups][0] == ("b", GROUP_DENIED)
    deleted = g.call(DeleteGroupsRequest(("a", "c")))
    assert deleted.results == (("a", GROUP_DENIED), ("c", Errors.NONE))
    assert set(g.h.shard.groups) == {"a", "b"}


def test_list_groups_shows_the_groups_it_may_describe_or_all_with_cluster_describe() -> None:
    g = Guarded(allow(GROUP, "team.", DESCRIBE, pattern=PatternType.PREFIXED),
                allow(CLUSTER, "kafka-cluster", DESCRIBE, principal="User:ops"))
    for name in ("team.a", "team.b", "other"):
        g.h.commit(name, {("t", 0): 1})
    listed = g.call(ListGroupsRequest())
    assert sorted(x.group_id for x in listed.groups) == ["team.a", "team.b"]
    assert len(g.call(ListGroupsRequest(), "User:ops").groups) == 3
    assert g.call(ListGroupsRequest(), "User:nobody").groups == ()


def test_live_lag_shows_the_groups_it_may_describe_or_all_with_cluster_describe() -> None:
    g = Guarded(allow(GROUP, "team.", DESCRIBE, pattern=PatternType.PREFIXED),
                allow(CLUSTER, "kafka-cluster", DESCRIBE, principal="User:ops"))
    for name in ("team.a", "other"):
        g.h.commit(name, {("t", 0): 1})
    lag = g.call(LagRequest())
    assert [row[0] for row in lag.groups] == ["team.a"] and {row[0] for row in lag.partitions} == {"team.a"}
    assert sorted(row[0] for row in g.call(LagRequest(), "User:ops").groups) == ["other", "team.a"]
    assert g.call(LagRequest(("other",)), "User:nobody").groups == ()
    as_json = LagRequest(as_json=True)
    assert [text[0] for text in g.call(as_json).json_groups] == ["team.a"], "the JSON form is filtered too"
    assert [text[0] for text in g.call(as_json, "User:ops").json_groups] == ["other", "team.a"]
    watch = LagWatchRequest("other", "pool", None, None, 100, None, 0, 1_000)
    assert g.call(watch).error is Errors.GROUP_AUTHORIZATION_FAILED, "a lag watch needs Describe on its group"
    assert g.call(dataclasses.replace(watch, group_id="team.a", seen_lag=0)).groups[0][0] == "team.a"


def test_consumer_group_heartbeat_needs_read_and_describe_on_subscribed_topics() -> None:
    g = Guarded(allow(GROUP, "g", READ), allow(TOPIC, "t", DESCRIBE))
    beat = ConsumerGroupHeartbeatRequest("g", "m1", 0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=("t", "secret"), topic_partitions=())
    refused = g.call(beat)
    assert refused.error is TOPIC_DENIED and "secret" in (refused.error_message or "")
    assert not g.h.shard.consumer_groups
    assert g.call(dataclasses.replace(beat, subscribed_topic_names=("t",))).error is Errors.NONE
    assert g.call(dataclasses.replace(beat, group_id="h")).error is GROUP_DENIED


def test_service_state_needs_the_cluster() -> None:
    g = Guarded(allow(CLUSTER, "kafka-cluster", DESCRIBE))
    write = ServiceStateWriteRequest("w", True, (ServiceEntry("topic", "t", b"x"),))
    assert g.call(write).error is Errors.CLUSTER_AUTHORIZATION_FAILED and not g.h.log
    assert g.call(ServiceStateReadRequest(("topic",))).error is Errors.NONE


def test_prefixed_deny_wins_and_super_users_and_the_no_acl_setting() -> None:
    g = Guarded(allow(GROUP, "*", READ, "User:*"), allow(TOPIC, "*", ALL, "User:*"),
                allow(GROUP, "pay", READ, pattern=PatternType.PREFIXED, permission=Permission.DENY))
    assert g.commit("payments", {("t", 0): 1}) == {("t", 0): GROUP_DENIED}, "a PREFIXED DENY wins"
    assert g.commit("payments", {("t", 0): 1}, "User:bob") == {("t", 0): Errors.NONE}
    g.authorizer = Authorizer([], super_users=["User:admin"])
    assert g.commit("g", {("t", 0): 1}) == {("t", 0): GROUP_DENIED}, "no ACL: denied by default"
    assert g.commit("g", {("t", 0): 1}, "User:admin") == {("t", 0): Errors.NONE}
    g.authorizer = Authorizer([allow(TOPIC, "t", READ, "User:bob")], allow_everyone_if_no_acl_found=True)
    assert g.commit("g", {("t", 0): 1, ("u", 0): 1}) == {("t", 0): TOPIC_DENIED, ("u", 0): Errors.NONE}
