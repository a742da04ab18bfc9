"""Coordinator configuration: Kafka's broker configs, snake case, Kafka's defaults.

Names map one to one onto Kafka's (`group.min.session.timeout.ms` ->
`group_min_session_timeout_ms`). Defaults are those of current Kafka brokers
(GroupCoordinatorConfig / OffsetConfig).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

INT32_MAX = 2**31 - 1
# Kafka's ConsumerGroupMigrationPolicy, by its config value.
MIGRATION_POLICIES = frozenset({"disabled", "upgrade", "downgrade", "bidirectional"})


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = INT32_MAX
    # Kafka's internal CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS.
    group_new_member_join_timeout_ms: int = 300_000
    offset_metadata_max_bytes: int = 4_096
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    # Kafka's message.max.bytes: a commit whose records exceed it is refused
    # with INVALID_COMMIT_OFFSET_SIZE, as Kafka maps MESSAGE_TOO_LARGE.
    offsets_max_commit_bytes: int = 1_048_588
    # KIP-848 consumer groups (GroupCoordinatorConfig's group.consumer.*).
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = INT32_MAX
    # Kafka 4.3's consumer.assignment.interval.ms (KIP-1263: assignment batching): an epoch
    # bump runs the assignor only if its last run for the group is at least this old, else
    # the next heartbeat after the interval runs it for every change made meanwhile. Kafka's
    # default is 1,000; 0 here runs it on every bump, as Kafka 4.0-4.2 do
    # (coordinator/consumer/heartbeat.py).
    group_consumer_assignment_interval_ms: int = 0
    # group.consumer.migration.policy (Kafka's default): whether a classic group
    # converts to a consumer group online when a ConsumerGroupHeartbeat joins it
    # (upgrade) and back when its last consumer-protocol member leaves
    # (downgrade). Empty groups convert whatever the policy. Kafka parses the
    # value case-insensitively; so does this (it is stored lowercase).
    group_consumer_migration_policy: str = "bidirectional"
    # Live lag (coordinator/lag.py): the window of commits a group's health is judged on
    # (Burrow's evaluation window): STOPPED after this long without a commit while lagging.
    lag_window_ms: int = 300_000

    def __post_init__(self) -> None:
        policy = self.group_consumer_migration_policy
        if not isinstance(policy, str):
            raise TypeError(f"group_consumer_migration_policy must be a str, got {type(policy).__name__}")
        if policy.lower() not in MIGRATION_POLICIES:
            raise ValueError(
                f"group_consumer_migration_policy must be one of {sorted(MIGRATION_POLICIES)}, got {policy!r}"
            )
        object.__setattr__(self, "group_consumer_migration_policy", policy.lower())
        for f in fields(self):
            if f.name == "group_consumer_migration_policy":
                continue
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{f.name} must be an int, got {type(value).__name__}")
            if value < 0:
                raise ValueError(f"{f.name} must be >= 0, got {value}")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group_min_session_timeout_ms exceeds group_max_session_timeout_ms")
        if self.group_max_size < 1:
            raise ValueError("group_max_size must be >= 1")
        if self.group_consumer_max_size < 1:
            raise ValueError("group_consumer_max_size must be >= 1")
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets_topic_num_partitions must be >= 1")

    @property
    def consumer_group_upgrade_enabled(self) -> bool:
        """Kafka's `ConsumerGroupMigrationPolicy.isUpgradeEnabled`."""
        return self.group_consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def consumer_group_downgrade_enabled(self) -> bool:
        """Kafka's `ConsumerGroupMigrationPolicy.isDowngradeEnabled`."""
        return self.group_consumer_migration_policy in ("downgrade", "bidirectional")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
