"""Kafka's server-side assignors for consumer groups (KIP-848): `uniform` (the default) and `range`.

Pure and deterministic; each module names the Kafka source it follows.
`ASSIGNORS` maps names to assignors in the order of Kafka's
`group.consumer.assignors` default, the first being the default.
Imports only `coordinator.routing` (Java's string hash) outside this package.
"""

from collections.abc import Mapping

from coordinator.consumer.assignors.range import RANGE_ASSIGNOR_NAME, RangeAssignor
from coordinator.consumer.assignors.spec import (
    EMPTY_ASSIGNMENT,
    Assignment,
    ConsumerGroupPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    SubscriptionType,
    TopicMetadata,
)
from coordinator.consumer.assignors.uniform import UNIFORM_ASSIGNOR_NAME, UniformAssignor

ASSIGNORS: Mapping[str, ConsumerGroupPartitionAssignor] = {
    UNIFORM_ASSIGNOR_NAME: UniformAssignor(),
    RANGE_ASSIGNOR_NAME: RangeAssignor(),
}
DEFAULT_ASSIGNOR_NAME = UNIFORM_ASSIGNOR_NAME

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR_NAME",
    "EMPTY_ASSIGNMENT",
    "RANGE_ASSIGNOR_NAME",
    "UNIFORM_ASSIGNOR_NAME",
    "Assignment",
    "ConsumerGroupPartitionAssignor",
    "GroupAssignment",
    "GroupSpec",
    "MemberSpec",
    "PartitionAssignorError",
    "RangeAssignor",
    "SubscriptionType",
    "TopicMetadata",
    "UniformAssignor",
]
