"""The classic group type: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Kafka keeps it in `coordinator/group/classic/`. `group.py` holds a group and
its members as their records describe them, `state.py` the group states and
their legal transitions (Kafka's ClassicGroupState), `join.py` the JoinGroup
handler and `rebalance.py` the rest: SyncGroup, Heartbeat, LeaveGroup, the
join, sync and session timers.

Imports: the shared modules at the top of `coordinator` (errors, messages,
records, consumer_protocol, timers) and, for types only, `coordinator.shard`.
Never `coordinator.consumer`: the consumer group type knows the classic one
(online migration converts between them), not the other way round.
"""
