"""The controller's persisted metadata: partitions, leaders, epochs, intents.

Per partition: the current leader's epoch and actor name, `known_end` (the
largest durable end any of its leaders reported; -1 while the partition was
never served, so an empty new log is fine; the controller records 0 or more
before it routes any client to a leader), the node whose disk holds a
single-copy partition's log (`log_node`) and at most one `Intent`, the
operation under way. An intent is saved before the controller acts on it
and cleared when the operation is done, so a restarted controller finishes
it (rolls it forward) rather than guessing. Also the standby actors' names.

Also whether the service was last started with the Ray path's authorizer
(`ray_credentials`), so a restart keeps it (`recorded_ray_credentials`).

Stored as JSON in Ray's GCS key-value store, written atomically
(`actors/controller/ray_store.py`: where and why). The layout keeps the keys of earlier
versions ("num_partitions", "epochs", "actors", "standbys"); metadata without
"known_end" is read conservatively: a partition that had a leader must find
its log (known_end 0).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from actors.controller.repartition import Plan
from coordinator.replication.rolling import RollPlan

logger = logging.getLogger(__name__)
# known_end of a partition never served: an empty new log is fine.
NEVER_LOADED = -1


def saved_replication_factor(data: dict[str, Any] | None) -> int | None:
    """The replication factor saved metadata was written under (a move adds a
    replica for a while: the fewest replicas of any partition), or None when no
    partition was placed yet."""
    if data is None:
        return None
    replication = data.get("replication") or {}
    if replication:
        return min(len(r["replicas"]) for r in replication.values())
    return 1 if any(int(e) > 0 for e in data.get("epochs", {}).values()) else None


def recorded_ray_credentials(data: dict[str, Any] | None) -> bool | None:
    """Whether the service of saved metadata `data` was last started with Ray-path credentials:
    None for a new service (no metadata); False for metadata written before the setting was
    recorded (the service ran without it unless told at each start, and it keeps running so:
    docs/security.md, Turning it on for a running service)."""
    if data is None:
        return None
    recorded = data.get("ray_credentials", False)
    return recorded if isinstance(recorded, bool) else False


@dataclass(frozen=True, slots=True)
class Intent:
    """A leadership move: stop `old_name` (epoch `old_epoch`), start `name` at `epoch`."""

    epoch: int
    name: str
    old_name: str | None
    old_epoch: int
    reason: str
    node_id: str | None = None
    # True: the operator asked for `node_id`; otherwise it is a preference.
    required: bool = False
    # The old leader did not answer: do not wait for its unload.
    old_unreachable: bool = False


@dataclass(slots=True)
class PartitionMeta:
    # The leader epoch and the leader's actor name.
    epoch: int = 0
    actor: str | None = None
    known_end: int = NEVER_LOADED
    # Replication factor 1: the node its serving leader ran on, whose disk holds
    # its log (None: never served, or served before this was recorded).
    log_node: str | None = None
    intent: Intent | None = None
    # Replicated partitions only (actors/controller/replicas.py): the replicas'
    # nodes in assignment order, each one's actor name, the committed ISR, the
    # leader's node (None: offline) and the partition epoch.
    replicas: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    isr: list[str] = field(default_factory=list)
    leader: str | None = None
    partition_epoch: int = 0
    # A balance move under way (actors/controller/moves.py): (source, target) nodes.
    moving: tuple[str, str] | None = None
    # Why the partition waits for an operator's unclean election: a full restart found
    # its history ambiguous (actors/controller/forgotten_logs.py). None: not held.
    held: str | None = None


@dataclass(slots=True)
class ControlState:
    # The partitions that exist (during a repartition: the larger count).
    num_partitions: int
    partitions: dict[int, PartitionMeta]
    standbys: list[str] = field(default_factory=list)
    # The repartition under way (`actors.controller.repartition`), and the version of the
    # last one begun (0: the count never changed).
    plan: Plan | None = None
    routing_version: int = 0
    # The last rolling restart (`actors.controller.rolling`): under way, stopped or done;
    # kept when done, since actors created later start with its runtime_env and settings.
    roll: RollPlan | None = None
    # `ray_credentials` of the service's last start (None: not recorded yet).
    ray_credentials: bool | None = None

    @classmethod
    def fresh(cls, num_partitions: int) -> ControlState:
        return cls(num_partitions, {p: PartitionMeta() for p in range(num_partitions)})

    def record_end(self, partition: int, durable_end: int) -> bool:
        """Remember what a loaded leader reports durable; True if it grew."""
        meta = self.partitions[partition]
        if durable_end > meta.known_end:
            meta.known_end = durable_end
            return True
        return False

    def owned_names(self) -> set[str]:
        """Every partition actor name this metadata accounts for."""
        names = set(self.standbys)
        for meta in self.partitions.values():
            names.update(meta.names.values())
            if meta.actor is not None:
                names.add(meta.actor)
            if meta.intent is not None:
                names.add(meta.intent.name)
                if meta.intent.old_name is not None:
                    names.add(meta.intent.old_name)
        return names

    def to_json(self) -> dict[str, Any]:
        parts = self.partitions
        return {
            "num_partitions": self.num_partitions,
            "epochs": {str(p): m.epoch for p, m in parts.items()},
            "actors": {str(p): m.actor for p, m in parts.items() if m.actor is not None},
            "known_end": {str(p): m.known_end for p, m in parts.items()},
            "log_nodes": {str(p): m.log_node for p, m in parts.items() if m.log_node is not None},
            "intents": {str(p): asdict(m.intent) for p, m in parts.items() if m.intent is not None},
            "standbys": list(self.standbys),
            "routing_version": self.routing_version,
            **({"repartition": self.plan.to_json()} if self.plan is not None else {}),
            **({"rolling_restart": self.roll.to_json()} if self.roll is not None else {}),
            **({"ray_credentials": self.ray_credentials} if self.ray_credentials is not None else {}),
            "replication": {
                str(p): {
                    "replicas": m.replicas,
                    "names": m.names,
                    "isr": m.isr,
                    "leader": m.leader,
                    "partition_epoch": m.partition_epoch,
                    **({"moving": list(m.moving)} if m.moving is not None else {}),
                    **({"held": m.held} if m.held is not None else {}),
                }
                for p, m in parts.items()
                if m.replicas
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], num_partitions: int) -> ControlState:
        if data["num_partitions"] != num_partitions and data.get("routing_version", 0) == 0:
            logger.warning(
                "data dir holds %d offsets partitions; ignoring num_partitions=%d",
                data["num_partitions"],
                num_partitions,
            )
        state = cls.fresh(data["num_partitions"])
        known = data.get("known_end")
        for p, meta in state.partitions.items():
            meta.epoch = int(data["epochs"].get(str(p), 0))
            meta.actor = data.get("actors", {}).get(str(p))
            if known is not None:
                meta.known_end = int(known.get(str(p), NEVER_LOADED))
            elif meta.epoch > 0:
                meta.known_end = 0
            meta.log_node = data.get("log_nodes", {}).get(str(p))
            intent = data.get("intents", {}).get(str(p))
            meta.intent = Intent(**intent) if intent is not None else None
            replication = data.get("replication", {}).get(str(p))
            if replication is not None:
                meta.replicas = list(replication["replicas"])
                meta.names = dict(replication["names"])
                meta.isr = list(replication["isr"])
                meta.leader = replication["leader"]
                meta.partition_epoch = int(replication["partition_epoch"])
                moving = replication.get("moving")
                meta.moving = None if moving is None else (str(moving[0]), str(moving[1]))
                meta.held = replication.get("held")
        state.standbys = list(data.get("standbys", []))
        state.routing_version = int(data.get("routing_version", 0))
        plan = data.get("repartition")
        state.plan = None if plan is None else Plan.from_json(plan)
        roll = data.get("rolling_restart")
        state.roll = None if roll is None else RollPlan.from_json(roll)
        state.ray_credentials = recorded_ray_credentials(data) if "ray_credentials" in data else None
        return state

