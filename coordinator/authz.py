"""Authorization of one coordinator request, as Kafka's KafkaApis authorizes each API (issue 49).

Pure: given the Authorizer in force (coordinator/acl.py), the caller's
principal and host and a request, `check` decides what of the request may
reach the shard and how the shard's answer is completed, with Kafka's
errors exactly:

- JoinGroup, SyncGroup, Heartbeat, LeaveGroup (and a Ray member's
  AssignmentWatch): READ on the group, else GROUP_AUTHORIZATION_FAILED.
- OffsetCommit: READ on the group, else GROUP_AUTHORIZATION_FAILED on every
  partition; READ on each topic, else TOPIC_AUTHORIZATION_FAILED on its
  partitions while the others are committed.
- OffsetFetch: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED;
  DESCRIBE on each topic asked for, else TOPIC_AUTHORIZATION_FAILED on its
  partitions (offset -1); asked for every offset, the topics it may not
  describe are left out of the answer.
- OffsetDelete: DELETE on the group, else GROUP_AUTHORIZATION_FAILED; READ on
  each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions.
- DescribeGroups, ConsumerGroupDescribe: DESCRIBE per group, else that
  group's GROUP_AUTHORIZATION_FAILED; DeleteGroups: DELETE per group.
- ListGroups: every group with DESCRIBE on the CLUSTER, else only the groups
  the principal may DESCRIBE.
- ConsumerGroupHeartbeat: READ on the group, else GROUP_AUTHORIZATION_FAILED;
  DESCRIBE on every subscribed topic name, else TOPIC_AUTHORIZATION_FAILED
  (the whole heartbeat, naming the topics).
- Service state (the registry's store): ALTER (write) or DESCRIBE (read) on
  the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED.

A denied request, or the denied part of one, never reaches the shard, so it
changes no state; a request wholly denied is answered here. Every request
type the shard handles has its rule (a test checks), so nothing new slips
through unchecked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coordinator.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from coordinator.errors import Errors
from coordinator.lag_query import LagRequest, LagResponse
from coordinator.lag_watch import LagWatchRequest
from coordinator.messages import (
    AssignmentWatchRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FetchedOffset,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionResult,
    Request,
    SyncGroupRequest,
)
from coordinator.service_state import ServiceStateReadRequest, ServiceStateWriteRequest
from coordinator.status import error_response

GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER
READ, DESCRIBE, DELETE, ALTER = Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.ALTER
GROUP_DENIED, TOPIC_DENIED = Errors.GROUP_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED


def _same(response: Any) -> Any:
    return response


@dataclass(frozen=True, slots=True)
class Decision:
    """`send` goes to the shard and `finish` completes its answer; `send` None: `answer` is it."""

    send: Request | None
    answer: Any = None
    finish: Callable[[Any], Any] = _same

    @property
    def completes(self) -> bool:
        """Whether `finish` changes the shard's answer (a part of the request was refused)."""
        return self.finish is not _same


class Caller:
    """One request's principal and host against the Authorizer in force."""

    def __init__(self, authorizer: Authorizer, principal: str, host: str) -> None:
        self.authorizer, self.principal, self.host = authorizer, principal, host

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def denied_topics(self, operation: Operation, topics: Any) -> set[str]:
        return {t for t in set(topics) if not self.may(operation, TOPIC, t)}


def check(authorizer: Authorizer, principal: str, host: str, request: Request) -> Decision:
    """What of `request` `principal` at `host` may do (module docstring)."""
    rule = RULES.get(type(request))
    if rule is None:
        raise TypeError(f"no authorization rule for {type(request).__name__}")
    return rule(Caller(authorizer, principal, host), request)


def _group_op(operation: Operation) -> Callable[[Caller, Any], Decision]:
    def rule(caller: Caller, request: Any) -> Decision:
        if caller.may(operation, GROUP, request.group_id):
            return Decision(request)
        return Decision(None, error_response(request, GROUP_DENIED))
    return rule


def _offset_commit(caller: Caller, request: OffsetCommitRequest) -> Decision:
    if not caller.may(READ, GROUP, request.group_id):
        return Decision(None, error_response(request, GROUP_DENIED))
    denied = caller.denied_topics(READ, (p.topic for p in request.partitions))
    if not denied:
        return Decision(request)
    refused = tuple(PartitionResult(p.topic, p.partition, TOPIC_DENIED)
                    for p in request.partitions if p.topic in denied)
    kept = tuple(p for p in request.partitions if p.topic not in denied)
    if not kept:
        return Decision(None, OffsetCommitResponse(refused))
    return Decision(dataclasses.replace(request, partitions=kept),
                    finish=lambda r: OffsetCommitResponse(r.partitions + refused))


def _offset_fetch(caller: Caller, request: OffsetFetchRequest) -> Decision:
    if not caller.may(DESCRIBE, GROUP, request.group_id):
        return Decision(None, error_response(request, GROUP_DENIED))
    if request.partitions is None:  # every offset: leave out the topics it may not describe
        def visible(response: OffsetFetchResponse) -> OffsetFetchResponse:
            hidden = caller.denied_topics(DESCRIBE, (p.topic for p in response.partitions))
            kept = tuple(p for p in response.partitions if p.topic not in hidden)
            return dataclasses.replace(response, partitions=kept) if hidden else response
        return Decision(request, finish=visible)
    denied = caller.denied_topics(DESCRIBE, (t for t, _ in request.partitions))
    if not denied:
        return Decision(request)
    asked = request.partitions
    refused = tuple(FetchedOffset(t, p, -1, -1, "", TOPIC_DENIED) for t, p in asked if t in denied)
    kept = tuple((t, p) for t, p in request.partitions if t not in denied)
    if not kept:
        return Decision(None, OffsetFetchResponse(Errors.NONE, refused))
    return Decision(dataclasses.replace(request, partitions=kept),
                    finish=lambda r: dataclasses.replace(r, partitions=r.partitions + refused))


def _offset_delete(caller: Caller, request: OffsetDeleteRequest) -> Decision:
    if not caller.may(DELETE, GROUP, request.group_id):
        return Decision(None, error_response(request, GROUP_DENIED))
    denied = caller.denied_topics(READ, (t for t, _ in request.partitions))
    if not denied:
        return Decision(request)
    refused = tuple(PartitionResult(t, p, TOPIC_DENIED) for t, p in request.partitions if t in denied)
    kept = tuple((t, p) for t, p in request.partitions if t not in denied)
    if not kept:
        return Decision(None, OffsetDeleteResponse(Errors.NONE, refused))
    return Decision(dataclasses.replace(request, partitions=kept),
                    finish=lambda r: dataclasses.replace(r, partitions=r.partitions + refused))


def _per_group(
    operation: Operation, refuse: Callable[[str], Any], items: Callable[[Any], tuple[Any, ...]],
    key: Callable[[Any], str], build: Callable[[tuple[Any, ...]], Any],
) -> Callable[[Caller, Any], Decision]:
    """A rule for requests naming several groups: the allowed ones are sent, answers kept in order."""
    def rule(caller: Caller, request: Any) -> Decision:
        denied = {g for g in request.group_ids if not caller.may(operation, GROUP, g)}
        if not denied:
            return Decision(request)
        allowed = tuple(g for g in request.group_ids if g not in denied)
        if not allowed:
            return Decision(None, build(tuple(refuse(g) for g in request.group_ids)))

        def merge(response: Any) -> Any:
            answered = {key(item): item for item in items(response)}
            return build(tuple(refuse(g) if g in denied else answered[g] for g in request.group_ids))
        return Decision(dataclasses.replace(request, group_ids=allowed), finish=merge)
    return rule


def _list_groups(caller: Caller, request: ListGroupsRequest) -> Decision:
    if caller.may(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return Decision(request)

    def visible(response: ListGroupsResponse) -> ListGroupsResponse:
        kept = tuple(g for g in response.groups if caller.may(DESCRIBE, GROUP, g.group_id))
        return dataclasses.replace(response, groups=kept)
    return Decision(request, finish=visible)


def _lag(caller: Caller, request: Any) -> Decision:  # a LagRequest
    """Live lag is what OffsetFetch and DescribeGroups show: the groups the caller may Describe
    (every group with Describe on the cluster), as ListGroups filters."""
    if caller.may(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return Decision(request)

    def visible(response: LagResponse) -> LagResponse:
        return dataclasses.replace(
            response,
            groups=tuple(row for row in response.groups if caller.may(DESCRIBE, GROUP, row[0])),
            partitions=tuple(row for row in response.partitions if caller.may(DESCRIBE, GROUP, row[0])),
            json_groups=tuple(text for text in response.json_groups if caller.may(DESCRIBE, GROUP, text[0])),
        )
    return Decision(request, finish=visible)


def _consumer_heartbeat(caller: Caller, request: ConsumerGroupHeartbeatRequest) -> Decision:
    if not caller.may(READ, GROUP, request.group_id):
        return Decision(None, ConsumerGroupHeartbeatResponse(GROUP_DENIED))
    denied = caller.denied_topics(DESCRIBE, request.subscribed_topic_names or ())
    if denied:
        why = f"The following topics are not authorized: {', '.join(sorted(denied))}"
        return Decision(None, ConsumerGroupHeartbeatResponse(TOPIC_DENIED, why))
    return Decision(request)


def _cluster_op(operation: Operation) -> Callable[[Caller, Any], Decision]:
    def rule(caller: Caller, request: Any) -> Decision:
        if caller.may(operation, CLUSTER, CLUSTER_NAME):
            return Decision(request)
        return Decision(None, error_response(request, Errors.CLUSTER_AUTHORIZATION_FAILED))
    return rule


def _deleted_group(group_id: str) -> tuple[str, Errors]:
    return group_id, GROUP_DENIED


RULES: dict[type, Callable[[Caller, Any], Decision]] = {
    JoinGroupRequest: _group_op(READ),
    SyncGroupRequest: _group_op(READ),
    HeartbeatRequest: _group_op(READ),
    LeaveGroupRequest: _group_op(READ),
    AssignmentWatchRequest: _group_op(READ),
    OffsetCommitRequest: _offset_commit,
    OffsetFetchRequest: _offset_fetch,
    OffsetDeleteRequest: _offset_delete,
    DescribeGroupsRequest: _per_group(
        DESCRIBE, lambda g: DescribedGroup(GROUP_DENIED, g, ""), lambda r: r.groups, lambda i: i.group_id,
        DescribeGroupsResponse),
    ConsumerGroupDescribeRequest: _per_group(
        DESCRIBE, lambda g: DescribedConsumerGroup(GROUP_DENIED, g), lambda r: r.groups,
        lambda i: i.group_id, ConsumerGroupDescribeResponse),
    DeleteGroupsRequest: _per_group(
        DELETE, _deleted_group, lambda r: r.results, lambda i: i[0], DeleteGroupsResponse),
    ListGroupsRequest: _list_groups,
    LagRequest: _lag,
    LagWatchRequest: _group_op(DESCRIBE),
    ConsumerGroupHeartbeatRequest: _consumer_heartbeat,
    ServiceStateWriteRequest: _cluster_op(ALTER),
    ServiceStateReadRequest: _cluster_op(DESCRIBE),
}
