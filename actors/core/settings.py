"""Service settings shared by the controller, the partition actors and clients.

One frozen value passed to every actor, so a partition actor needs nothing
but its partition number, its epoch and these settings to do its job.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from coordinator import CoordinatorConfig
from log.config import LogConfig

DEFAULT_NAMESPACE = "raygroups"
# Kafka's offsets.topic.num.partitions is 50; an embedded service on one
# machine gets fewer actors by default (documented in docs/operations.md, Settings).
CLUSTER_PARTITIONS = 50
# The most offsets partitions a service may grow to (`max_partitions` at most this).
MAX_PARTITIONS = 4096
EMBEDDED_PARTITIONS = 8
CONTROLLER_NAME = "raygroups-controller"
# The topic registry (actors/client/topics.py); partition leaders read it too.
TOPIC_REGISTRY_NAME = "raygroups-topics"
# SASL/PLAIN users of the gateways and listeners when no file names them (gateway.security).
SASL_USERS_ENV = "RAYGROUPS_GATEWAY_SASL_USERS"


def partition_dir(data_dir: str, partition: int) -> str:
    return os.path.join(data_dir, f"offsets-{partition}")


def replication_defaults(live_nodes: int) -> tuple[int, int]:
    """(replication_factor, min_insync_replicas) for a cluster of `live_nodes`:
    Kafka's 3 and 2 from three nodes up (a commit then survives one node's
    loss while the partition stays writable); 2 and 1 on two nodes (node-local
    disks keep a second copy, and either node alone stays writable); one copy
    on one node."""
    factor = min(max(live_nodes, 1), 3)
    return factor, default_min_insync_replicas(factor)


def default_min_insync_replicas(replication_factor: int) -> int:
    """2 from 3 replicas up, else 1 (a second copy must stay writable alone)."""
    return 2 if replication_factor >= 3 else 1


@dataclass(frozen=True, slots=True)
class KafkaListenerSettings:
    """The Kafka listener each partition leader opens for the group and offset
    APIs of the groups it leads (`gateway.direct`, plugged in through the
    `raygroups.partition_listeners` entry point; docs/gateway.md).

    `ports`: the first and last port of the node's range; a leader takes the
    first free one (one per leader on a node, so the range must hold as many
    as the node has leaders and standbys). `enabled` False: no listener, and
    FindCoordinator names the gateways, as before. Security is the gateway's
    (gateway.security): loopback only unless SASL/PLAIN (`sasl_users_file`,
    else RAYGROUPS_GATEWAY_SASL_USERS in the node's environment) or TLS is
    configured; the files are read on each node at the same paths.
    `limits`: overrides of the gateway's `Limits` by field name.
    The authorizer is on exactly when SASL or TLS is (docs/security.md):
    `super_users`, `allow_everyone_if_no_acl_found` and
    `ssl_principal_mapping_rules` are Kafka's settings of those names."""

    enabled: bool = True
    ports: tuple[int, int] = (19092, 19291)
    sasl_users_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    limits: tuple[tuple[str, int], ...] = ()
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    ssl_principal_mapping_rules: str = "DEFAULT"

    def __post_init__(self) -> None:
        low, high = self.ports
        if not (type(low) is int and type(high) is int and 0 < low <= high < 65536):
            raise ValueError(f"kafka listener ports must be a range of 1-65535, got {self.ports!r}")


_POSITIVE_INTS = (
    "replication_factor", "replica_lag_time_max_ms", "replication_max_bytes", "commit_timeout_ms",
    "snapshot_every_records",
)
# Intervals and delays: a loop sleeping 0 or less would spin (some change online: setting_keys.py).
_POSITIVE_NUMBERS = (
    "auto_repartition_after_s", "lag_metrics_interval_s", "mailbox_ttl_s", "maintenance_interval_s",
    "compaction_interval_s", "topics_refresh_interval_s",
)


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    data_dir: str
    num_partitions: int = CLUSTER_PARTITIONS
    namespace: str = DEFAULT_NAMESPACE
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    log: LogConfig = field(default_factory=LogConfig)
    # How often the controller checks that every partition actor answers.
    probe_interval_s: float = 1.0
    probe_timeout_s: float = 5.0
    # Concurrent calls one partition actor accepts: parked JoinGroups of a
    # large group all wait inside it at once.
    partition_max_concurrency: int = 10_000
    # A caller of coalesced batches silent this long (no batch, no collect) loses its
    # mailbox of parked answers at a leader; it then retries them (actors/partition/batches.py).
    mailbox_ttl_s: float = 60.0
    # Started, idle partition actors kept ready to take over a failed one.
    standby_actors: int = 1
    # A leader LOADING (or FAILED and reloading) whose load shows no progress
    # for this long is replaced: liveness is serving or making progress.
    load_stall_timeout_s: float = 30.0
    # How long a new partition actor may take to start and accept its first
    # call (a process start on a loaded node takes seconds).
    actor_start_timeout_s: float = 60.0
    # After ray.kill, how long the controller waits for Ray to report the
    # actor dead (its directory lock released) before starting its successor.
    kill_wait_s: float = 10.0
    # How often the controller looks for partition actors it does not own.
    reap_interval_s: float = 10.0
    # Backoff of standby creation after a standby failed to start.
    standby_backoff_max_s: float = 60.0
    # Log maintenance by each partition actor: a snapshot once this many
    # records were appended since the last, compaction at this interval.
    # A failover replays at most that many records after the snapshot
    # (about 0.3 s at the measured load rate); each snapshot re-reads them.
    maintenance_interval_s: float = 10.0
    # How often a partition leader asks the topic registry for changes besides the registry's
    # nudge after each change (actors/partition/topics_watch.py): the bound on a missed nudge.
    topics_refresh_interval_s: float = 5.0
    # Live lag as metrics (actors/core/metrics.py LagMetrics): how often a leader sets its
    # groups' lag gauges, the most (group, topic partition) series it exports (those
    # with most lag; 0: none, per group only) and the most groups it exports series of
    # (the unhealthy first, then those with most lag; every group is counted by health):
    # the operator's cardinality caps. 200 each: Ray's metrics agent keeps at most 2,000
    # series of a metric per node (measured; OpenTelemetry's default cardinality limit),
    # and a node can lead 8 partitions (docs/metrics.md).
    lag_metrics_interval_s: float = 10.0
    lag_metrics_partitions_max: int = 200
    lag_metrics_groups_max: int = 200
    snapshot_every_records: int = 500_000
    compaction_interval_s: float = 600.0
    # Replication (DESIGN 5b), Kafka's names: offsets.topic.replication.factor
    # (1 here: one replica, as before), min.insync.replicas,
    # replica.lag.time.max.ms, replica.fetch.max.bytes (the most one push
    # carries) and offsets.commit.timeout.ms (a write not committed by then
    # is answered COORDINATOR_NOT_AVAILABLE).
    replication_factor: int = 1
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    replication_max_bytes: int = 1 << 20
    commit_timeout_ms: int = 5_000
    # Leaders push over a TCP connection to each follower actor
    # (`actors.partition.link`); False: every push is a Ray call, for nodes
    # that reach each other only on Ray's own ports.
    replication_link: bool = True
    # A leader with other ISR members answers a read (any response without
    # records of its own) only once each of them answered a push sent after
    # it (`coordinator.runtime`, read confirmation): a deposed leader resuming
    # from a pause never serves stale offsets. False: reads are answered from
    # the leader's state at once (the benchmark's baseline; Kafka's behaviour).
    confirm_reads: bool = True
    # A node gone this long has its replicas recreated on other live nodes
    # (Redpanda's partition_autobalancing_node_availability_timeout_sec).
    replica_reassign_delay_s: float = 300.0
    # A replica whose disk has kept failing this long is recreated on another
    # live node, as for a lost node (its own node stays; actors.partition.recovery).
    disk_failure_move_delay_s: float = 300.0
    # How often leadership returns to preferred replicas and replicas spread
    # to idle nodes (Kafka's leader.imbalance.check.interval.seconds).
    balance_interval_s: float = 300.0
    # Replication factor 1: True if every node sees the same data directory
    # (NFS, CephFS, a cloud file share), so a partition's leader may restart
    # on any node. False (node-local disks): only on the node holding its log,
    # the partition offline while that node is gone (Kafka's behaviour for
    # replication factor 1: offline until its broker returns).
    shared_data_dir: bool = False
    # Growing the partition count by itself (actors/controller/autogrow.py): off unless
    # asked; grows when the mean load stays past the planned rate this long; never past
    # max_partitions (also the bound of `raygroups repartition`).
    auto_repartition: bool = False
    auto_repartition_after_s: float = 600.0
    max_partitions: int = 1024
    # A repartition pre-copies a source partition of at least this many groups (its moving
    # groups copied while served, then frozen for one small delta: docs/design-precopy.md);
    # a smaller one, or with 0 every one, hands off with the fenced handoff (frozen for the
    # whole export, a fraction of a second for a few thousand groups).
    precopy_min_groups: int = 10_000
    # The Kafka listener in each partition leader (`KafkaListenerSettings`).
    kafka_listener: KafkaListenerSettings = field(default_factory=KafkaListenerSettings)
    # The Ray path's authorizer (actors/partition/ray_guard.py, docs/security.md): every Ray
    # caller of a partition leader presents a credential (`raygroups credentials`) and its
    # requests are checked against the ACLs; super users and allow_everyone_if_no_acl_found
    # are the Kafka listeners' (`kafka_listener`). Off: no credential needed (one local user).
    # `actors.start` chooses it when not told (`ray_credentials_default`): on for a service
    # reachable beyond loopback, off for the embedded local one; a value built here is as given.
    ray_credentials: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.data_dir, str) or not self.data_dir:
            raise ValueError("data_dir must be a non-empty path")
        if not isinstance(self.num_partitions, int) or self.num_partitions < 1:
            raise ValueError(f"num_partitions must be an int >= 1, got {self.num_partitions!r}")
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if type(self.max_partitions) is not int or not 1 <= self.max_partitions <= MAX_PARTITIONS:
            most = self.max_partitions
            raise ValueError(f"max_partitions must be an int from 1 to {MAX_PARTITIONS}, got {most!r}")
        for name in _POSITIVE_NUMBERS:
            value = getattr(self, name)
            if type(value) not in (int, float) or not value > 0:
                raise ValueError(f"{name} must be a number > 0, got {value!r}")
        for cap in ("lag_metrics_partitions_max", "lag_metrics_groups_max", "precopy_min_groups"):
            if type(getattr(self, cap)) is not int or getattr(self, cap) < 0:
                raise ValueError(f"{cap} must be an int >= 0, got {getattr(self, cap)!r}")
        for flag in ("replication_link", "shared_data_dir", "confirm_reads", "auto_repartition"):
            if type(getattr(self, flag)) is not bool:
                raise ValueError(f"{flag} must be a bool, got {getattr(self, flag)!r}")
        min_isr = self.min_insync_replicas
        if type(min_isr) is not int or not 1 <= min_isr <= self.replication_factor:
            raise ValueError(
                f"min_insync_replicas must be an int between 1 and replication_factor "
                f"({self.replication_factor}), got {min_isr!r}"
            )


def default_partitions(live_nodes: int) -> int:
    """The offsets partitions a service starts with when not told (docs/capacity.md): two
    leaders per node, at least 4, at most Kafka's 50; `raygroups repartition` (or
    `--auto-repartition`) grows them when the load asks."""
    return min(CLUSTER_PARTITIONS, max(4, 2 * live_nodes))


def settings_for_cluster(
    data_dir: str,
    live_nodes: int,
    *,
    embedded: bool = False,
    num_partitions: int | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    replication_factor: int | None = None,
    min_insync_replicas: int | None = None,
    shared_data_dir: bool = False,
    saved_replication_factor: int | None = None,
) -> ServiceSettings:
    """The settings `actors.start` runs a service with on a cluster of `live_nodes`:
    what the operator gave wins; then the replication factor the service's saved
    metadata was written under (its logs are laid out for it: a cluster that
    grew or lost a node since keeps it); the rest follows the cluster
    (`replication_defaults`, and fewer partitions for an embedded service)."""
    if replication_factor is None:
        replication_factor = saved_replication_factor or replication_defaults(live_nodes)[0]
    if min_insync_replicas is None:
        min_insync_replicas = default_min_insync_replicas(replication_factor)
    if num_partitions is None:
        num_partitions = EMBEDDED_PARTITIONS if embedded else default_partitions(live_nodes)
    return ServiceSettings(
        data_dir=data_dir,
        num_partitions=num_partitions,
        namespace=namespace,
        replication_factor=replication_factor,
        min_insync_replicas=min_insync_replicas,
        shared_data_dir=shared_data_dir,
    )


def reachable_beyond_loopback(listener: KafkaListenerSettings, environ: Mapping[str, str]) -> bool:
    """Whether the service is started to be reached beyond loopback: SASL/PLAIN (a users file,
    or `SASL_USERS_ENV` in the starting process's environment) or TLS configured for its
    gateways and leaders' listeners (`raygroups start` gives both the same options), whether
    or not the leaders' listeners are enabled. Without either, a gateway or listener only
    listens on loopback (gateway.security), and Kafka's paths have no authorizer."""
    return sasl_or_tls(listener.sasl_users_file, listener.tls_cert, environ)


def sasl_or_tls(sasl_users_file: str | None, tls_cert: str | None, environ: Mapping[str, str]) -> bool:
    """Whether SASL/PLAIN (a users file, or `SASL_USERS_ENV` set, even empty: the gateway then
    refuses to start for want of users) or TLS is configured: `gateway.security`'s rule."""
    return sasl_users_file is not None or tls_cert is not None or SASL_USERS_ENV in environ


def ray_credentials_default(explicit: bool | None, recorded: bool | None, exposed: bool) -> bool:
    """Whether the Ray path's authorizer runs (docs/security.md, The default): what the
    operator says (`--ray-credentials` / `--no-ray-credentials`) wins; else what the service
    recorded at its last start (`actors.controller.state.recorded_ray_credentials`: a
    service keeps its setting across restarts, so its Ray clients never break silently);
    else, for a new service, on exactly when it is reachable beyond loopback
    (`reachable_beyond_loopback`): then its Kafka paths authorize, and so does the Ray path.
    The embedded local service (one user, loopback) runs without it, as a Kafka broker without
    an authorizer. A multi-node Ray cluster alone does not turn it on: Ray's cluster token
    is the boundary of the Ray path either way, and a service without SASL or TLS has no
    principals for ACLs to name on its Kafka paths."""
    if explicit is not None:
        return explicit
    if recorded is not None:
        return recorded
    return exposed


class SystemClock:
    """Wall-clock milliseconds: offsets carry commit times that outlive processes."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000
