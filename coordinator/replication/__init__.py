"""Replication of one offsets partition: the pure state machine (DESIGN section 5b).

Kafka's ISR replication, read from `replication-notes.md`; each module names
the notes' section and the Kafka source it follows, and its departures:

- `epochs`: the leader epoch cache (section 5, LeaderEpochFileCache).
- `divergence`: divergence detection and follower truncation by epoch
  (section 5, Fetch v12 DivergingEpoch, KIP-279), leader-epoch fencing
  (section 4).
- `follower`: what a follower accepts from a push, and its HWM (sections 2, 4).
- `leader`: the leader's view of its replicas: caught-up tracking, ISR
  shrink/expand proposals, the high watermark (sections 1 and 2), and the
  push numbers that confirm its reads (Raft's read index, adapted).
- `controller`: elections from the ISR and ISR-change validation with
  Kafka's epoch bumps (sections 1 and 4).
- `health`: a replica's disk health and its retry backoff (section 5b of
  DESIGN: a failed disk is a failure like a crash, healed without a person).
- `outcomes`: replication failures mapped to group-request errors (section 3).
- `placement`: which nodes hold a partition's replicas, and a replacement
  for a lost node.
- `rolling`: a rolling restart's plan, node order, min ISR check and where
  leadership goes (issue 48).

The one departure that shapes everything: replication is PUSH. The leader
sends each follower the batches past the follower's log end; the follower
appends and fsyncs them and answers with its durable log end and the epoch
of its last batch (its epoch cache's latest epoch, as Kafka's follower
sends; a former leader's may have no batch yet). That answer is Kafka's next
Fetch: its log end is the acknowledgement (FetchOffset) and its epoch the
LastFetchedEpoch. The leader checks every answer for divergence, so a
truncation round needs no separate request. Replica ids
are strings (Ray actor names or node ids). Time is always an argument.
"""

from coordinator.replication.controller import (
    Election,
    IsrChangeResult,
    PartitionState,
    Replica,
    apply_election,
    elect_leader,
    isr_at_election,
    validate_isr_change,
)
from coordinator.replication.divergence import (
    Truncation,
    check_leader_epoch,
    diverging_epoch,
    truncation_offset,
)
from coordinator.replication.epochs import UNDEFINED, UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochCache
from coordinator.replication.follower import appends_at, check_push_epoch, follower_high_watermark
from coordinator.replication.health import DiskHealth, disk_failed
from coordinator.replication.leader import (
    AckResult,
    FollowerState,
    IsrChange,
    IsrChangeKind,
    LeaderState,
    RejectAction,
)
from coordinator.replication.outcomes import group_error
from coordinator.replication.placement import assign_replicas, rebalance_move, replacement_node

__all__ = [
    "DiskHealth",
    "disk_failed",
    "UNDEFINED",
    "UNDEFINED_EPOCH",
    "UNDEFINED_OFFSET",
    "AckResult",
    "Election",
    "EpochCache",
    "FollowerState",
    "IsrChange",
    "IsrChangeKind",
    "IsrChangeResult",
    "LeaderState",
    "PartitionState",
    "RejectAction",
    "Replica",
    "Truncation",
    "appends_at",
    "apply_election",
    "assign_replicas",
    "check_leader_epoch",
    "check_push_epoch",
    "diverging_epoch",
    "elect_leader",
    "isr_at_election",
    "follower_high_watermark",
    "group_error",
    "rebalance_move",
    "replacement_node",
    "truncation_offset",
    "validate_isr_change",
]
