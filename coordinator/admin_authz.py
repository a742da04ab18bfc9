"""Who may administer the service over Ray: Kafka's operations per administrative method (issue 49).

With `ServiceSettings.ray_credentials` on, the topic registry's and the
controller's administrative methods need a credential whose principal may do
what the method does, decided with Kafka's mapping of its admin APIs:

| method | Kafka's API | needs |
|---|---|---|
| create_acls, delete_acls | CreateAcls, DeleteAcls | ALTER on the CLUSTER |
| describe_acls | DescribeAcls | DESCRIBE on the CLUSTER |
| config_set | IncrementalAlterConfigs | ALTER_CONFIGS on the CLUSTER |
| config_get | DescribeConfigs | DESCRIBE_CONFIGS on the CLUSTER |
| create_topic | CreateTopics | CREATE on the CLUSTER, or CREATE on the topic |
| create_partitions | CreatePartitions | ALTER on the topic |
| set_end_offsets | Produce (it moves a topic's end) | WRITE on each topic |
| set_start_offsets | DeleteRecords (it moves a topic's start) | DELETE on each topic |
| issue_credential, revoke_credential | AlterUserScramCredentials | ALTER on the CLUSTER |
| repartition, reassign, rolling_restart, rolling_stop | AlterPartitionReassignments | ALTER on the CLUSTER |
| elect_leader | ElectLeaders | ALTER on the CLUSTER |

Why credentials are ALTER on the CLUSTER: a credential makes its holder a
principal, which is what Kafka's SCRAM credentials do, and Kafka guards
AlterUserScramCredentials with ALTER on the CLUSTER (a delegation token is
the other analogue, but Kafka issues one only to its own holder, or with
CREATE_TOKENS on a USER resource raygroups does not have). Moving or
restarting the offsets partitions is what AlterPartitionReassignments and
ElectLeaders do: ALTER on the CLUSTER. A super user may do all of it.

Refusals are Kafka's errors: CLUSTER_AUTHORIZATION_FAILED, or
TOPIC_AUTHORIZATION_FAILED naming the topics; the caller checks before it
changes anything, so a refused call changes nothing. Pure: the Authorizer,
the principal and the call's arguments are inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from coordinator.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from coordinator.checks import InvalidRequestError
from coordinator.errors import Errors

HOST = "*"  # a Ray caller has no host Kafka would know: only ACLs of host * apply


class AuthorizationError(InvalidRequestError):
    """An administrative call its principal may not make; `error` is Kafka's code.
    An InvalidRequestError: answered to that caller alone, never retried."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error
        self.message = message

    def __reduce__(self) -> tuple[type[AuthorizationError], tuple[Errors, str]]:
        return AuthorizationError, (self.error, self.message)  # crosses Ray (a pickle) whole


Rule = Callable[[Authorizer, str, tuple[Any, ...]], "AuthorizationError | None"]


def _cluster(operation: Operation) -> Rule:
    def rule(authorizer: Authorizer, principal: str, args: tuple[Any, ...]) -> AuthorizationError | None:
        if authorizer.authorize(principal, HOST, operation, ResourceType.CLUSTER, CLUSTER_NAME):
            return None
        return AuthorizationError(Errors.CLUSTER_AUTHORIZATION_FAILED,
                                  f"{principal} may not {operation.name} the CLUSTER")
    return rule


def _topics_refused(authorizer: Authorizer, principal: str, operation: Operation,
                    topics: Iterable[Any]) -> AuthorizationError | None:
    names = sorted({str(t) for t in topics})
    denied = [t for t in names if not authorizer.authorize(principal, HOST, operation, ResourceType.TOPIC, t)]
    if not denied:
        return None
    return AuthorizationError(Errors.TOPIC_AUTHORIZATION_FAILED,
                              f"{principal} may not {operation.name} topic(s) {', '.join(denied)}")


def _topic(operation: Operation) -> Rule:
    """The topic is the call's first argument."""
    def rule(authorizer: Authorizer, principal: str, args: tuple[Any, ...]) -> AuthorizationError | None:
        return _topics_refused(authorizer, principal, operation, args[:1])
    return rule


def _offsets_topics(operation: Operation) -> Rule:
    """The call's first argument maps (topic, partition) to an offset: each topic's."""
    def rule(authorizer: Authorizer, principal: str, args: tuple[Any, ...]) -> AuthorizationError | None:
        offsets = args[0] if args and isinstance(args[0], dict) else {}
        topics = [key[0] for key in offsets if isinstance(key, tuple) and key]
        return _topics_refused(authorizer, principal, operation, topics)
    return rule


def _create_topic(authorizer: Authorizer, principal: str, args: tuple[Any, ...]) -> AuthorizationError | None:
    """Kafka's CreateTopics: CREATE on the CLUSTER, else CREATE on the topic."""
    if authorizer.authorize(principal, HOST, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return _topics_refused(authorizer, principal, Operation.CREATE, args[:1])


RULES: dict[str, Rule] = {
    "create_acls": _cluster(Operation.ALTER),
    "delete_acls": _cluster(Operation.ALTER),
    "describe_acls": _cluster(Operation.DESCRIBE),
    "config_set": _cluster(Operation.ALTER_CONFIGS),
    "config_get": _cluster(Operation.DESCRIBE_CONFIGS),
    "create_topic": _create_topic,
    "create_partitions": _topic(Operation.ALTER),
    "set_end_offsets": _offsets_topics(Operation.WRITE),
    "set_start_offsets": _offsets_topics(Operation.DELETE),
    "issue_credential": _cluster(Operation.ALTER),
    "revoke_credential": _cluster(Operation.ALTER),
    "repartition": _cluster(Operation.ALTER),
    "reassign": _cluster(Operation.ALTER),
    "elect_leader": _cluster(Operation.ALTER),
    "rolling_restart": _cluster(Operation.ALTER),
    "rolling_stop": _cluster(Operation.ALTER),
}


def refusal(
    authorizer: Authorizer, principal: str, method: str, args: tuple[Any, ...]
) -> AuthorizationError | None:
    """Why `principal` may not call `method` with `args` (None: it may). A method this
    table does not know is refused: only what is listed is ever allowed."""
    rule = RULES.get(method)
    if rule is None:
        return AuthorizationError(Errors.CLUSTER_AUTHORIZATION_FAILED,
                                  f"{method} is not an administrative call")
    return rule(authorizer, principal, args)
