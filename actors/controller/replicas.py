"""ReplicatedPlane: the controller's decisions when each offsets partition has replicas.

With `replication_factor` > 1 every partition has that many replica actors,
one per node, each keeping its log on its own node's disk
(`log.replica_dir`). This plane places them, elects leaders and commits ISR
changes, as Kafka's KRaft controller does (replication notes sections 1 and
4; the pure rules are in `coordinator.replication.controller` and
`.placement`). It reuses the single-copy plane's loops, routing, reaper and
persistence; what differs is what one partition's check does (`_reconcile`).
Its mixins: replica moves (`actors.controller.moves`) and sending the
replicas their roles (`actors.controller.roles`).

Rules:
- Metadata first: every change (assignment, election, ISR, a replica's new
  actor or node) is persisted before any replica hears of it, so a
  restarted controller acts on what it committed and a replica never sees
  an epoch the metadata does not hold.
- Placement: the replicas of a partition are pinned to distinct nodes with
  a hard node affinity (a replica's disk is its node's); the assignment
  waits until `replication_factor` nodes are live.
- A replica is GONE when Ray reports its node or its actor dead. A gone
  replica leaves the ISR at once (Kafka's controller fences a broker that
  stopped heartbeating and drops it from every ISR), and so does one whose
  disk failed (its probe's `disk`, `actors.partition.recovery`; Kafka's
  offline log directory, KIP-112) or that refuses its log. A replica that
  is alive but does not answer is no candidate; at an election it leaves
  the ISR too, unless the ISR would then fall below min ISR: no commit can
  happen without it then, so it stays, electable once it answers
  (`coordinator.replication.isr_at_election`; Kafka's ELR, KIP-966). Outside
  elections a slow follower is its leader's business
  (replica.lag.time.max.ms). The last ISR member never leaves: the
  partition waits for it rather than lose what it holds.
- A replica whose disk failed gets no role: it retries its disk, recovers
  its log and takes up its role by itself, then catches up and the leader
  admits it to the ISR again. One whose disk stays failed longer than
  `disk_failure_move_delay_s` is moved to another node like a lost node's.
- Election only from the ISR, among replicas that answer and whose log and
  disk have not failed; the current leader stays while it is healthy. When no ISR member
  can lead, a leader that is merely slow is kept, and a gone or refusing one
  leaves the partition offline (no leader) until an ISR member returns or
  an operator forces `elect_leader(unclean=True)`.
- Never an empty partition where data was: the controller keeps each
  partition's committed end (`known_end`, the largest high watermark its
  leaders reported; 0 for a partition recovered after a full restart, which
  must find its log) and gives it to every new leader, so a replica that
  loads (not a hot follower) refuses a missing or shorter log; a refusing
  replica is no candidate. An ISR member is made a follower only from an
  existing log (`must_exist`), so a lost disk never becomes a hot follower
  that could be promoted. An unclean election forgets the end (the
  operator accepted the loss).
- A new leader is promoted with `become_leader` (a follower keeps its hot
  shard: no load); the others are told `become_follower`, which deposes an
  old leader still running. Roles are re-sent whenever a probe shows a
  replica at another epoch or role, so a lost call is repaired next round.
- A replica whose actor died on a live node is restarted there (same disk),
  and the leader gets its new handle (`set_follower`). A node gone longer
  than `replica_reassign_delay_s` has its replicas moved to other live nodes
  (`placement.replacement_node`) unless one is the last ISR member; the new
  replica starts empty and catches up from the leader. The leader epoch is
  bumped then, as Kafka does when a reassignment removes a replica.
- ISR changes a leader proposes (`alter_isr`) are validated against the
  committed state and persisted before the answer.
- Balance (every `balance_interval_s`, only while every partition is led
  and fully in sync): leadership returns to each partition's preferred
  replica (Kafka's auto.leader.rebalance), and one follower replica at a
  time moves from the busiest live node to the idlest, so a node that joins
  takes its share (`placement.rebalance_move`). Departure: the moved replica
  leaves before its successor caught up (Kafka adds first, then removes),
  so the ISR holds one fewer meanwhile; it never drops below what it was
  allowed to be, as the move starts only from a full ISR.

Replica ids are node names (`actors.core.node_names`: the node's
`raygroups.io/node` label, else its Ray node id), opaque strings here. A
labelled node that restarts comes back under its name, to its replicas'
directories, as a Kafka broker does with its broker id; an unlabelled one
comes back as a new node.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from actors.controller.cluster_view import ActorGone, Cluster, ClusterError, MetadataStore, new_actor_name
from actors.controller.moves import ReplicaMoves
from actors.controller.plane import ControlPlane
from actors.controller.roles import Probe, RoleSending, holds, refuses
from actors.controller.rolling import RollingRestart
from actors.controller.state import NEVER_LOADED, PartitionMeta
from actors.core.metrics import ControllerMetrics
from actors.core.settings import ServiceSettings
from coordinator.errors import Errors
from coordinator.replication import (
    Election,
    IsrChange,
    PartitionState,
    apply_election,
    assign_replicas,
    disk_failed,
    elect_leader,
    isr_at_election,
    validate_isr_change,
)
from coordinator.replication.controller import in_assignment_order

logger = logging.getLogger(__name__)
# A probe's verdict on a replica that did not answer.
GONE = "gone"
UNRESPONSIVE = "unresponsive"


class ReplicatedPlane(ReplicaMoves, RoleSending, ControlPlane):
    def __init__(
        self,
        settings: ServiceSettings,
        cluster: Cluster,
        store: MetadataStore,
        metrics: ControllerMetrics,
        controller: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(settings, cluster, store, metrics, clock)
        # The handle leaders send ISR changes to (this controller's actor).
        self.controller = controller
        # partition -> replica node -> its actor handle
        self.handles: dict[int, dict[str, Any]] = {}
        # partition -> the follower handles its current leader was given
        self._given: dict[int, dict[str, Any]] = {}
        # node -> when it was first seen not live
        self._missing_since: dict[str, float] = {}
        # partition -> replicas whose last become_leader failed (not candidates next round)
        self._failed_leaders: dict[int, set[str]] = {}
        # partition -> each replica's last probe (status shows disk failures from it)
        self._probes: dict[int, dict[str, Probe]] = {}
        # (partition, replica) -> when its probe first showed a failed disk
        self._disk_failed_since: dict[tuple[int, str], float] = {}
        # Rolling restarts (`actors.controller.rolling`); the actor shell sets its `exit_process`.
        self.rolling = RollingRestart(self)

    async def start(self) -> None:
        await super().start()
        await self.rolling.on_start()

    # ------------------------------------------------------------ checks

    async def _recover(self, partition: int) -> None:
        await self.check(partition)

    async def check(self, partition: int) -> None:
        async with self._locks[partition]:
            live = set(await self.cluster.live_nodes())
            self._note_live(live)
            await self._reconcile(partition, live)

    async def refill_standbys_once(self) -> None:
        """No standbys: a replica's place is its node, where its disk is."""

    async def balance_once(self) -> None:
        if self.rolling.running():
            return  # a rolling restart moves leadership off each node: not back meanwhile
        await super().balance_once()

    def run_loops(self) -> None:
        super().run_loops()
        balance = self.supervise("balance", self.balance_once, lambda: self.settings.balance_interval_s)
        self._loops.append(asyncio.get_running_loop().create_task(balance))

    async def _reconcile(self, partition: int, live: set[str]) -> None:
        meta = self.state.partitions[partition]
        if not meta.replicas and not await self._assign(partition, live):
            return
        await self._move_lost_replicas(partition, live)
        await self._finish_move(partition)
        probes = await self._probe_all(partition, live)
        self._note_disks(partition, probes)
        await self._record_end(partition, probes.get(meta.leader) if meta.leader else None)
        # Elect before restarting anything: a hot follower takes over from a
        # leader whose actor died, rather than that leader's restarted actor.
        await self._elect(partition, probes)
        for node, probe in probes.items():
            if probe == GONE and node in live:
                probes[node] = await self._restart(partition, node)
        if meta.leader is None:  # a new partition, or one whose ISR just came back
            await self._elect(partition, probes)
        await self._send_roles(partition, probes)
        leading = probes.get(meta.leader) if meta.leader is not None else None
        if isinstance(leading, dict):
            await self._push_routing_if_stale(partition, leading)

    def replica_handles(self, partition: int) -> list[Any]:
        return [handle for handle in self.handles.get(partition, {}).values() if handle is not None]

    def forget_partitions(self, count: int) -> None:
        super().forget_partitions(count)
        for table in (self.handles, self._given, self._failed_leaders, self._probes):
            for partition in [p for p in table if p >= count]:
                del table[partition]

    def unfit_for_repartition(self) -> list[str]:
        unfit = super().unfit_for_repartition()
        for partition, meta in sorted(self.state.partitions.items()):
            if meta.held is not None:
                unfit.append(f"partition {partition} is HELD ({meta.held})")
            elif len(meta.isr) < self.settings.min_insync_replicas:
                unfit.append(f"partition {partition} has {len(meta.isr)} in-sync replicas, below min ISR")
        return unfit

    async def _record_end(self, partition: int, probe: Probe | None) -> None:
        """Remember the serving leader's high watermark: what the partition committed."""
        meta = self.state.partitions[partition]
        if not (holds(probe, "leader", meta.epoch) and isinstance(probe, dict)):
            return
        hwm = probe.get("high_watermark")
        if probe.get("state") == "ACTIVE" and type(hwm) is int and self.state.record_end(partition, hwm):
            await self._persist()

    def _note_disks(self, partition: int, probes: dict[str, Probe]) -> None:
        """Remember the probes, and since when each replica's disk has been failing."""
        self._probes[partition] = probes
        now = self.clock()
        for node, probe in probes.items():
            key = (partition, node)
            if disk_failed(probe):
                if key not in self._disk_failed_since:
                    logger.warning("partition %d: the disk of replica %s failed: %s", partition, node,
                                   probe["disk"].get("error"))  # type: ignore[index]
                self._disk_failed_since.setdefault(key, now)
            elif isinstance(probe, dict) or probe == GONE:
                self._disk_failed_since.pop(key, None)

    def _note_live(self, live: set[str]) -> None:
        now = self.clock()
        for meta in self.state.partitions.values():
            for node in meta.replicas:
                if node not in live:
                    self._missing_since.setdefault(node, now)
        for node in live:
            self._missing_since.pop(node, None)

    async def _assign(self, partition: int, live: set[str]) -> bool:
        """Place a new partition's replicas: all of them at once, so the spread is even."""
        rf = self.settings.replication_factor
        if len(live) < rf:
            logger.warning(
                "partition %d: replication factor %d needs %d live nodes, %d are live; waiting",
                partition, rf, rf, len(live),
            )
            return False
        assignment = assign_replicas(self.num_partitions, live, rf)
        for p, meta in self.state.partitions.items():
            if not meta.replicas:
                meta.replicas = list(assignment[p])
                meta.isr = list(assignment[p])
        await self._persist()
        return True

    async def _probe_all(self, partition: int, live: set[str]) -> dict[str, Probe]:
        meta = self.state.partitions[partition]
        handles = self.handles.setdefault(partition, {})
        nodes = list(meta.replicas)
        probes = await asyncio.gather(*(self._probe(partition, node, live) for node in nodes))
        for node, probe in zip(nodes, probes, strict=True):
            if probe == GONE:
                handles.pop(node, None)
        return dict(zip(nodes, probes, strict=True))

    async def _probe(self, partition: int, node: str, live: set[str]) -> Probe:
        if node not in live:
            return GONE
        handles = self.handles.setdefault(partition, {})
        handle = handles.get(node)
        if handle is None:
            name = self.state.partitions[partition].names.get(node)
            handle = None if name is None else await self.cluster.find(name)
            if handle is None:
                return GONE
            handles[node] = handle
        try:
            probe: dict[str, Any] = await self.cluster.call(
                handle, "probe", timeout_s=self.settings.probe_timeout_s
            )
            return probe
        except ActorGone:
            return GONE
        except ClusterError as exc:
            # A killed actor's calls fail before Ray's error says it died: ask the GCS.
            if await self.cluster.is_dead(handle):
                return GONE
            logger.info("partition %d: replica on %s did not answer its probe: %r", partition, node, exc)
            return UNRESPONSIVE

    # --------------------------------------------------------- elections

    async def _elect(self, partition: int, probes: dict[str, Probe]) -> None:
        """Commit the partition's next leader and ISR (module rules)."""
        meta = self.state.partitions[partition]
        if meta.held is not None:
            return  # an operator chooses (elect_leader, unclean)
        current = _partition_state(meta)
        # Out of the ISR: dead, or holding no log it can trust (failed disk, refusal);
        # one that did not answer in time, unless min ISR needs it (module rules).
        lost = {n for n, probe in probes.items() if probe == GONE or disk_failed(probe) or refuses(probe)}
        silent = {n for n, probe in probes.items() if probe == UNRESPONSIVE}
        failed = self._failed_leaders.get(partition, set())
        healthy = {
            node for node, probe in probes.items()
            if isinstance(probe, dict) and _can_lead(probe) and node not in failed
        }
        if meta.leader in healthy:
            isr = [r for r in meta.isr if r not in lost]
            election = Election(meta.leader, in_assignment_order(meta.replicas, isr))
        else:
            in_sync = isr_at_election(meta.isr, lost, silent, self.settings.min_insync_replicas)
            election = elect_leader(meta.replicas, meta.isr, in_sync, candidates=healthy)
            sitting = meta.leader
            keep = sitting is not None and probes.get(sitting) != GONE and not refuses(probes.get(sitting))
            if election.leader is None and keep:
                return  # slow or failing, but the only one that may lead: keep it
        await self._commit(partition, apply_election(current, election), "leader gone")

    async def _commit(self, partition: int, new: PartitionState, reason: str) -> None:
        meta = self.state.partitions[partition]
        old_leader, old_epoch = meta.leader, meta.epoch
        if new == _partition_state(meta):
            return
        meta.replicas, meta.isr = list(new.replicas), list(new.isr)
        meta.leader, meta.epoch, meta.partition_epoch = new.leader, new.leader_epoch, new.partition_epoch
        meta.actor = None if new.leader is None else meta.names[new.leader]
        new_epoch = new.leader_epoch != old_epoch
        if new_epoch:
            # Before the save awaits: `routing()` must never pair the new epoch with the
            # old leader's handle. A client given that pair retries the lost leader,
            # then waits in `routing_after` for an epoch that is already current.
            self.leaders.pop(partition, None)
            self._given.pop(partition, None)
        await self._persist()
        if new_epoch:
            if old_leader is not None:
                self.metrics.failover(reason)
            log = logger.info if new.leader is not None else logger.error
            log(
                "partition %d: leader %s epoch %d (was %s; %s), ISR %s",
                partition, new.leader, new.leader_epoch, old_leader, reason, list(new.isr),
            )

    async def elect_leader(
        self, partition: int, unclean: bool = False, node: str | None = None
    ) -> dict[str, Any]:
        """An operator's election. Clean: move leadership to the next healthy ISR
        member. Unclean: when no ISR member can lead (or the partition is held
        after a full restart), the first live replica, or `node`, leads with
        whatever its log holds (acknowledged commits may be lost)."""
        self._check_partition(partition)
        meta = self.state.partitions[partition]
        if node is not None and node not in meta.replicas:
            raise ValueError(f"partition {partition}: {node!r} is not one of its replicas {meta.replicas}")
        if meta.held is not None and not unclean:
            raise ValueError(
                f"partition {partition} is held after a full restart: {meta.held}. Choose the replica "
                f"that leads: raygroups elect-leader --unclean [--node NODE] {partition}"
            )
        async with self._locks[partition]:
            live = set(await self.cluster.live_nodes())
            probes = await self._probe_all(partition, live)
            healthy = {n for n, p in probes.items() if isinstance(p, dict) and _can_lead(p)}
            candidates = healthy - {meta.leader} if meta.leader in meta.isr and not unclean else healthy
            if node is not None:
                candidates &= {node}
            isr = [] if meta.held is not None else meta.isr  # held: no ISR is trusted
            election = elect_leader(meta.replicas, isr, candidates, unclean=unclean)
            if election.leader is None:
                raise ValueError(
                    f"partition {partition}: no eligible replica (ISR {meta.isr}, answering "
                    f"{sorted(healthy)}){'' if unclean else '; --unclean may elect an out-of-sync one'}"
                )
            if election.unclean:
                logger.warning("partition %d: UNCLEAN election of %s (operator)", partition, election.leader)
                meta.known_end = NEVER_LOADED  # whatever the electee's log holds is the partition now
                meta.held = None
            await self._commit(partition, apply_election(_partition_state(meta), election), "operator")
            await self._send_roles(partition, probes)
            return {
                "partition": partition,
                "leader": meta.leader,
                "leader_epoch": meta.epoch,
                "isr": list(meta.isr),
                "unclean": election.unclean,
            }

    async def reassign(
        self, partition: int, node_id: str | None = None, expected_epoch: int | None = None
    ) -> int:
        """Move leadership to `node_id` (an ISR member), or to the next ISR member."""
        self._check_partition(partition)
        meta = self.state.partitions[partition]
        if expected_epoch is not None and expected_epoch != meta.epoch:
            if expected_epoch > meta.epoch:
                raise ValueError(f"partition {partition} is at epoch {meta.epoch}, not {expected_epoch}")
            return meta.epoch
        if node_id is None:
            await self.elect_leader(partition)
            return meta.epoch
        async with self._locks[partition]:
            if node_id not in meta.isr:
                raise ValueError(f"partition {partition}: {node_id} is not in the ISR {meta.isr}")
            live = set(await self.cluster.live_nodes())
            probes = await self._probe_all(partition, live)
            probe = probes.get(node_id)
            if not (isinstance(probe, dict) and _can_lead(probe)):
                raise ValueError(f"partition {partition}: the replica on {node_id} cannot lead now")
            election = Election(node_id, tuple(meta.isr))
            await self._commit(partition, apply_election(_partition_state(meta), election), "reassign")
            await self._send_roles(partition, probes)
            return meta.epoch

    # -------------------------------------------------------------- ISR

    async def alter_isr(self, partition: int, change: Any) -> tuple[int, list[str], int, int]:
        """A leader's proposed ISR (Kafka's AlterPartition): validated, persisted, answered
        `(error, isr, leader_epoch, partition_epoch)` with the committed state."""
        self._check_partition(partition)
        if not isinstance(change, IsrChange) or not all(isinstance(r, str) for r in change.isr):
            raise ValueError(f"alter_isr: an IsrChange expected, got {type(change).__name__}")
        async with self._locks[partition]:
            meta = self.state.partitions[partition]
            known_gone = {n for n in meta.replicas if self._missing_since.get(n) is not None}
            result = validate_isr_change(
                _partition_state(meta), change.leader, change.leader_epoch, change.partition_epoch,
                change.isr, set(meta.replicas) - known_gone,
            )
            if result.error is Errors.NONE and result.state != _partition_state(meta):
                meta.isr, meta.partition_epoch = list(result.state.isr), result.state.partition_epoch
                await self._persist()
                logger.info("partition %d: ISR %s (%s by the leader)", partition, meta.isr, change.kind.value)
            state = _partition_state(meta)
            return int(result.error), list(state.isr), state.leader_epoch, state.partition_epoch

    # ---------------------------------------------------------- replicas

    async def _restart(self, partition: int, node: str) -> Probe:
        """A replica's actor is gone but its node is live: start a new actor there."""
        meta = self.state.partitions[partition]
        meta.names[node] = new_actor_name()
        await self._persist()
        return await self._create(partition, node)

    async def _create(self, partition: int, node: str) -> Probe:
        meta = self.state.partitions[partition]
        name = meta.names[node]
        try:
            handle = self.cluster.create(name, partition, meta.epoch, node, True)
        except ClusterError as exc:
            logger.warning("partition %d: starting replica %s on %s failed: %r", partition, name, node, exc)
            return GONE
        self.handles.setdefault(partition, {})[node] = handle
        logger.info("partition %d: replica %s started on %s", partition, name, node)
        return {"role": "none", "state": "INITIAL", "leader_epoch": -1}

    # ----------------------------------------------------------- queries

    def log_sources(self) -> dict[int, list[Any]]:
        """Per partition, the handles of the replicas holding its log, leader first."""
        sources: dict[int, list[Any]] = {}
        for partition, meta in self.state.partitions.items():
            handles = self.handles.get(partition, {})
            order = [meta.leader, *(n for n in meta.replicas if n != meta.leader)]
            sources[partition] = [handles[n] for n in order if n is not None and n in handles]
        return sources

    async def _status_row(self, partition: int) -> dict[str, Any]:
        row = await super()._status_row(partition)
        meta = self.state.partitions[partition]
        return {
            **row,
            "replicas": list(meta.replicas),
            "isr": list(meta.isr),
            "leader_node": meta.leader,
            "partition_epoch": meta.partition_epoch,
            "offline": meta.leader is None,
            "held": meta.held,
            **({"failure": f"held: {meta.held}"} if meta.held is not None else {}),
            "under_replicated": _under_replicated(meta),
            "disks": {
                node: probe["disk"] for node, probe in self._probes.get(partition, {}).items()
                if disk_failed(probe) and isinstance(probe, dict)
            },
        }

    def stats(self) -> dict[str, Any]:
        parts = self.state.partitions.values()
        return {
            **super().stats(),
            "offline": sorted(p for p, m in self.state.partitions.items() if m.replicas and m.leader is None),
            "held": sorted(p for p, m in self.state.partitions.items() if m.held is not None),
            "under_replicated": sum(1 for m in parts if _under_replicated(m)),
        }

    async def watch_once(self) -> None:
        await super().watch_once()
        self.rolling.resume()
        parts = self.state.partitions.values()
        self.metrics.set_replication(
            sum(1 for m in parts if _under_replicated(m)),
            sum(1 for m in parts if m.replicas and m.leader is None),
            sum(1 for m in parts if m.held is not None),
        )

    async def shutdown(self) -> None:
        """Stop the loops, unload and kill every replica; the logs stay on the nodes' disks."""
        for task in [*self._loops, *self._checks.values()]:
            task.cancel()

        async def stop(partition: int, handle: Any) -> None:
            try:
                await self.cluster.call(
                    handle, "unload", self.state.partitions[partition].epoch,
                    timeout_s=self.settings.probe_timeout_s,
                )
            except ClusterError:
                pass  # killed below all the same
            self.cluster.kill(handle)

        await asyncio.gather(
            *(stop(p, h) for p, handles in self.handles.items() for h in handles.values())
        )
        self.handles.clear()
        self.leaders.clear()

    def _check_partition(self, partition: int) -> None:
        if type(partition) is not int or not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition must be an int in [0, {self.num_partitions}), got {partition!r}")


def _partition_state(meta: PartitionMeta) -> PartitionState:
    return PartitionState(
        tuple(meta.replicas), tuple(meta.isr), meta.leader, meta.epoch, meta.partition_epoch
    )


def _can_lead(probe: dict[str, Any]) -> bool:
    """A replica that answered may lead unless its log or disk failed or it refuses to serve."""
    return probe.get("state") != "FAILED" and not probe.get("refused") and not disk_failed(probe)


def _under_replicated(meta: PartitionMeta) -> bool:
    """Fewer replicas in sync than the partition should have; a replica a move is
    adding does not count until it is in sync (Kafka's URP, KIP-352)."""
    adding = meta.moving is not None and meta.moving[1] not in meta.isr
    return len(meta.isr) < len(meta.replicas) - adding
