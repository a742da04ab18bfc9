"""What a group request gets when the write it waits for fails to replicate.

Kafka's new group coordinator, CoordinatorOperationExceptionHelper.java
`handleOperationException` and GroupCoordinatorService.java
`handleOffsetFetchException` (replication notes section 3). A replication
outcome is named by the Kafka error a produce would get:

- NOT_ENOUGH_REPLICAS: the ISR is below min ISR (`LeaderState.writable` is
  False). Kafka's new coordinator appends anyway and times out because the
  HWM cannot move; we refuse before writing, as the classic acks=all path
  does, so the client hears sooner. Either way it gets
  COORDINATOR_NOT_AVAILABLE and retries.
- NOT_ENOUGH_REPLICAS_AFTER_APPEND cannot happen with HWM-gated responses;
  it maps as in the classic coordinator, for completeness.
- REQUEST_TIMED_OUT: the HWM did not reach the write within
  `offsets_commit_timeout_ms`.
- NOT_LEADER_OR_FOLLOWER: this replica lost leadership (a newer epoch).
- KAFKA_STORAGE_ERROR: the local append or fsync failed.

Any other error passes through unchanged.
"""

from __future__ import annotations

from types import MappingProxyType

from coordinator.errors import Errors

GROUP_ERROR_FOR_WRITE_ERROR = MappingProxyType(
    {
        Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
        Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    }
)

# OffsetFetch: consumers before 3.9 do not retry the first group, so they get
# NOT_COORDINATOR, which every consumer retries after a lookup.
OFFSET_FETCH_ERROR_FOR_WRITE_ERROR = MappingProxyType(
    {
        **GROUP_ERROR_FOR_WRITE_ERROR,
        Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.NOT_COORDINATOR,
        Errors.NOT_ENOUGH_REPLICAS: Errors.NOT_COORDINATOR,
        Errors.REQUEST_TIMED_OUT: Errors.NOT_COORDINATOR,
    }
)


def group_error(write_error: Errors, *, offset_fetch: bool = False) -> Errors:
    """The error a group request is answered with when its write failed with `write_error`."""
    table = OFFSET_FETCH_ERROR_FOR_WRITE_ERROR if offset_fetch else GROUP_ERROR_FOR_WRITE_ERROR
    return table.get(write_error, write_error)
