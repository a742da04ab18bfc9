"""Who may commit and fetch the offsets of a consumer group (KIP-848).

Kafka's `ConsumerGroup.validateOffsetCommit` / `validateOffsetFetch` with
`OffsetMetadataManager.validateOffsetCommit`'s version rules, at apache/kafka
1eb7644349cb (2024-10-25):
- A commit with a negative epoch to a group without members is accepted
  (the admin client, a consumer without group management).
- Otherwise the member must exist (UNKNOWN_MEMBER_ID); a consumer-protocol
  member must use OffsetCommit v9+ (UNSUPPORTED_VERSION); its epoch must be
  the member's (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a classic member).
- A fetch without member id and with a negative epoch is accepted; otherwise
  the same member and epoch checks apply (OffsetFetch v9+ carries them).
Departure: the offsets themselves stay in the shard's classic `Group` of the
same id (the offsets store both group types share); the admin calls never
show that holder as a classic group of its own (`coordinator/admin.py`).
"""

from __future__ import annotations

from coordinator.consumer.group import ConsumerGroup
from coordinator.errors import Errors
from coordinator.messages import OffsetCommitRequest, OffsetFetchRequest

MODERN_OFFSET_COMMIT_MIN_VERSION = 9


def commit_error(group: ConsumerGroup, request: OffsetCommitRequest) -> Errors | None:
    """Kafka's `validateOffsetCommit` for a consumer group (not transactional)."""
    if request.generation_id < 0 and not group.members:
        return None
    member = group.members.get(request.member_id)
    if member is None:
        return Errors.UNKNOWN_MEMBER_ID
    if not member.use_classic_protocol and request.version < MODERN_OFFSET_COMMIT_MIN_VERSION:
        return Errors.UNSUPPORTED_VERSION
    return _epoch_error(request.generation_id, member.member_epoch, member.use_classic_protocol)


def fetch_error(group: ConsumerGroup, request: OffsetFetchRequest) -> Errors | None:
    """Kafka's `validateOffsetFetch` for a consumer group."""
    if request.member_id is None and request.member_epoch < 0:
        return None
    member = group.members.get(request.member_id or "")
    if member is None:
        return Errors.UNKNOWN_MEMBER_ID
    return _epoch_error(request.member_epoch, member.member_epoch, member.use_classic_protocol)


def _epoch_error(received: int, expected: int, classic: bool) -> Errors | None:
    """Kafka's `validateMemberEpoch`."""
    if received == expected:
        return None
    return Errors.ILLEGAL_GENERATION if classic else Errors.STALE_MEMBER_EPOCH
