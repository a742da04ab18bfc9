"""Recovery after a full restart of the Ray cluster: the controller's metadata rebuilt
from the replicas' own records on the nodes' disks, or a refusal that says why not.

Where the metadata lives: in Ray's GCS (`actors/controller/ray_store.py`), which a Ray
cluster restarted without GCS fault tolerance forgets. What survives is on
the nodes' disks: each replica's log under `<data_dir>/nodes/<node name>/
offsets-<p>`, and beside a leader's log the partition's state as that leader
knew it (`partition-state.json`, `log.replica_state`; when it is written and
why it is safe: `actors/partition/leader.py`). No directory ever holds a
leader epoch that no state file records: a leader writes its file before the
epoch reaches any disk, its own or a follower's (`actors/partition/roles.py`,
`actors.controller.roles`). Node names are stable across restarts only
where the nodes carry the `raygroups.io/node` label
(`actors/core/node_names.py`); an unlabelled node gets a new Ray id each start,
so its old directories match no node.

So a replicated service that finds no metadata for (namespace, data_dir)
scans every live node's disk (one task per node) and:
- finds no replica log nor state file: starts afresh;
- finds them only under names no live node has, or state files of another
  partition count or replication factor: refuses to start, naming them (the
  nodes are unlabelled or renamed, or the directory is another service's);
- otherwise rebuilds the metadata from each partition's newest state file
  (leader epoch, then partition epoch): its replicas and ISR, no leader (the
  controller elects one from the ISR among the live replicas, so an ISR
  member still missing keeps its partition offline rather than empty), its
  epochs, and committed end 0 (the elected replica must find its log), saves
  it in the GCS before the controller starts, and logs what it recovered.
- A partition whose history is ambiguous is HELD instead, and the others
  start and serve: no state file anywhere (or no replica found), a state or
  leader-epoch file that cannot be read, or a directory that saw a newer
  leader epoch than the newest state file (that leader's file is missing: its
  disk is). Nothing says which replica holds what was acknowledged, so the
  controller elects no one (`ReplicatedPlane`); `raygroups status` shows the
  reason (with each surviving log's last epoch and end) and `raygroups
  elect-leader --unclean [--node NODE] PARTITION` lets an operator choose, as
  Kafka's unclean leader election does. Its replicas are the live nodes that
  hold a directory of it, the best log first (the default choice: last batch's
  epoch, then log end), and its epoch is above every epoch seen.
- A partition whose newest leader's state file went with its disk is elected
  without an operator where that is safe: fewer than min.insync.replicas of
  the newest epoch's replicas (as its followers recorded them in
  `epoch-replicas.json`) are missing (`_elect_survivor`).
The controller then starts new actors for the replicas on their named
nodes, which open their existing directories.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.controller.ray_store import GcsKvStore
from actors.controller.repartition import Plan
from actors.controller.state import ControlState, PartitionMeta
from actors.core.node_names import NODE_LABEL
from actors.core.settings import ServiceSettings
from coordinator.routing import Routing
from log.epoch import NO_EPOCH, read_leader_epoch
from log.errors import LogError
from log.reader import LogReader
from log.replica_state import ReplicaState, read_epoch_replicas, read_replica_state

logger = logging.getLogger(__name__)
# How long to wait for every live node's scan, and how often to say which are pending.
LIST_TIMEOUT_S = 600.0
LIST_WAIT_LOG_S = 30.0
# Shown per refusal: enough to find them, short enough to read.
SHOWN = 5
_PARTITION_DIR = re.compile(r"offsets-(\d+)")


class ForgottenLogsError(RuntimeError):
    """Replica logs exist, but nothing says safely which of them hold what was acknowledged."""


@dataclass(frozen=True, slots=True)
class ReplicaFinding:
    """One replica directory on a node's disk."""

    path: str
    node: str
    partition: int
    has_log: bool
    state: ReplicaState | None
    # The highest leader epoch that wrote to (or was followed in) the directory.
    leader_epoch: int
    # Why its state or leader-epoch file cannot be read (then `state` is None).
    error: str | None = None
    # Where its log ends and the leader epoch of its last batch (an election's ranking);
    # None when it has no log or the log cannot be read.
    tail: tuple[int, int] | None = None
    # The replica set of the newest epoch it was told to follow (epoch, replicas), if recorded.
    epoch_replicas: tuple[int, tuple[str, ...]] | None = None


def scan_replicas(data_dir: str) -> list[ReplicaFinding]:
    """The replica directories under `data_dir` that hold a log segment or a state file."""
    found = []
    for path in sorted(glob.glob(os.path.join(data_dir, "nodes", "*", "offsets-*"))):
        match = _PARTITION_DIR.fullmatch(os.path.basename(path))
        if match is None or not os.path.isdir(path):
            continue
        node, partition = os.path.basename(os.path.dirname(path)), int(match.group(1))
        has_log = bool(glob.glob(os.path.join(path, "*.log")))
        try:
            state, epoch = read_replica_state(path), read_leader_epoch(path)
            members = read_epoch_replicas(path)
        except LogError as exc:
            found.append(ReplicaFinding(path, node, partition, has_log, None, NO_EPOCH, str(exc)))
            continue
        if has_log or state is not None:
            tail = _tail(path, has_log)
            found.append(ReplicaFinding(path, node, partition, has_log, state, epoch, None, tail, members))
    return found


def _tail(path: str, has_log: bool) -> tuple[int, int] | None:
    """(last batch's leader epoch, log end): a log ranks above another holding less."""
    if not has_log:
        return None
    try:
        reader = LogReader(path)
        return reader.last_epoch(), reader.end_offset()
    except LogError as exc:
        logger.warning("%s: its log cannot be read, so it is no candidate for election: %s", path, exc)
        return None


def recover_state(
    findings: Iterable[ReplicaFinding], settings: ServiceSettings, live: Iterable[str]
) -> ControlState | None:
    """The metadata rebuilt from the replicas' directories, None when there are none;
    raises ForgottenLogsError when it cannot be rebuilt at all (module docstring)."""
    findings = sorted({f.path: f for f in findings}.values(), key=lambda f: f.path)
    if not findings:
        return None
    live_names = set(live)
    if not any(f.node in live_names for f in findings):
        _refuse(
            "replica logs of an earlier service are on disk, but under node names no live node has",
            [f.path for f in findings], settings,
            f"Give every node the Ray label {NODE_LABEL} with the name it had (ray start "
            f'--labels="{NODE_LABEL}=<name>"), so a full restart finds its replicas again; '
            "or move those directories away to start afresh.",
        )
    by_partition: dict[int, list[ReplicaFinding]] = defaultdict(list)
    for finding in findings:
        by_partition[finding.partition].append(finding)
    routing = _recovered_routing(findings, settings)
    count = settings.num_partitions if routing is None else routing.partitions
    _check_settings(findings, settings, count, routing is not None)
    state = ControlState.fresh(count)
    if routing is not None:
        state.routing_version = routing.version
        if routing.previous is not None:  # mid-repartition: the controller resumes it
            state.plan = Plan(routing.version, routing.previous, routing.count, sorted(routing.switched))
    for partition in range(count):
        found = by_partition.get(partition, [])
        newest, meta = _newest_state(found), state.partitions[partition]
        if isinstance(newest, str):
            if not _elect_survivor(meta, partition, found, newest, settings, live_names):
                _hold(meta, partition, found, newest, settings, live_names)
        else:
            _recover(meta, partition, *newest, live_names)
    return state


def _recover(meta: PartitionMeta, partition: int, found: ReplicaState, where: str, live: set[str]) -> None:
    meta.replicas, meta.isr = list(found.replicas), list(found.isr)
    meta.epoch, meta.partition_epoch = found.leader_epoch, found.partition_epoch
    meta.known_end = 0  # the elected replica must find its log
    logger.warning(
        "partition %d recovered from %s: replicas %s, ISR %s, leader epoch %d (a leader is elected "
        "from the ISR)%s",
        partition, where, meta.replicas, meta.isr, meta.epoch,
        "" if live & set(meta.isr) else "; no ISR member is live: offline until one is",
    )


def _newest_state(found: list[ReplicaFinding]) -> tuple[ReplicaState, str] | str:
    """The partition's newest state file and where it is, or why none can be trusted."""
    unreadable = [f"{f.path}: {f.error}" for f in found if f.error is not None]
    if unreadable:
        return f"unreadable partition state: {'; '.join(unreadable)}"
    states = [(f.state, f.path) for f in found if f.state is not None]
    if not states:
        logs = [f.path for f in found if f.has_log]
        return f"no partition state file with its logs ({', '.join(logs) or 'no replica found'})"
    state, where = max(states, key=lambda item: item[0].version)
    seen = max(found, key=lambda f: f.leader_epoch)
    if seen.leader_epoch > state.leader_epoch:
        return (
            f"{seen.path} followed leader epoch {seen.leader_epoch}, the newest state file {where} "
            f"is of epoch {state.leader_epoch} (no state file of that epoch is on a live node's disk)"
        )
    return state, where


def _elect_survivor(
    meta: PartitionMeta, partition: int, found: list[ReplicaFinding], reason: str,
    settings: ServiceSettings, live: set[str],
) -> bool:
    """A partition whose newest leader's state file is gone with its disk, elected without
    an operator where that is safe; False (hold it) where it is not.

    Every acknowledged commit is on at least min.insync.replicas replicas (the ISR of
    its time), so while fewer replicas than that are missing, one that holds it is
    live. Which replicas there were: the replica set of the newest epoch any live
    directory followed, as its followers recorded it (`epoch-replicas.json`) or its
    leader (a state file of that epoch); a member whose readable log is on a live node
    is present, even if it lagged behind that epoch (a removed replica is no member:
    a removal starts an epoch), the others are missing. Without such a record (logs
    of an older raygroups), only the live directories that followed the newest epoch
    count as present, of the replication factor (or the newest state's replica count,
    if larger). The elected replica is the live member's log ranking highest by (last
    batch's epoch, log end), Raft's rule: logs of one epoch are prefixes of its
    leader's, and a leader of a newer epoch held every commit acknowledged before its
    election, so the highest holds every acknowledged commit. It is the ISR alone;
    the others rejoin once caught up, and a replica whose node no record names is
    placed on a live node, empty. Not sound only if two disks are gone."""
    if not found or any(f.error is not None for f in found):
        return False  # nothing found, or an unreadable file: an operator reads it first
    newest_epoch = max(f.leader_epoch for f in found)
    states = [f.state for f in found if f.state is not None]
    members = _members_of(found, newest_epoch)
    if members is not None:
        expected = len(members)
        # Present: a live member's readable log (one without, or unreadable, holds nothing usable).
        present = {f.node for f in found if f.node in live and f.node in members and f.tail is not None}
        missing = expected - len(present)
        eligible = present
    else:
        expected = max([settings.replication_factor] + [len(s.replicas) for s in states])
        present = {f.node for f in found if f.node in live and f.leader_epoch == newest_epoch and f.tail}
        missing = expected - len(present)
        eligible = {f.node for f in found if f.node in live}
    ranked = _ranked([f for f in found if f.node in eligible])
    if not ranked or not present or missing >= settings.min_insync_replicas:
        return False
    best, (last_epoch, log_end) = ranked[0], ranked[0].tail or (NO_EPOCH, 0)
    by_version = sorted(states, key=lambda s: s.version, reverse=True)
    named = [*sorted(members or ()), *(n for s in by_version for n in s.replicas)]
    # The lost replicas' nodes are unknown where no record names them: live nodes stand in.
    meta.replicas = list(dict.fromkeys([*(f.node for f in ranked), *named, *sorted(live)]))[:expected]
    meta.isr = [best.node]
    meta.epoch = max([newest_epoch] + [s.leader_epoch for s in states])
    meta.partition_epoch = max([s.partition_epoch for s in states] + [0])
    meta.known_end = 0
    logger.warning(
        "partition %d: %s; at most %d of its %d replicas are missing, fewer than min.insync.replicas "
        "(%d), so %s, the live log ranking highest (last epoch %d, end %d), holds every acknowledged "
        "commit: elected from replicas %s",
        partition, reason, missing, expected, settings.min_insync_replicas, best.node, last_epoch, log_end,
        meta.replicas,
    )
    return True


def _members_of(found: list[ReplicaFinding], epoch: int) -> set[str] | None:
    """The replica set of leader epoch `epoch` as any directory recorded it, or None."""
    sets = [set(f.epoch_replicas[1]) for f in found if f.epoch_replicas and f.epoch_replicas[0] == epoch]
    sets += [set(f.state.replicas) for f in found if f.state is not None and f.state.leader_epoch == epoch]
    return set().union(*sets) if sets else None


def _ranked(found: list[ReplicaFinding]) -> list[ReplicaFinding]:
    """The readable logs, best first: (last batch's epoch, log end), then the epoch followed."""
    readable = (f for f in found if f.tail is not None)
    return sorted(readable, key=lambda f: (f.tail, f.leader_epoch), reverse=True)


def _surviving_logs(found: list[ReplicaFinding], live: set[str]) -> str:
    """What an operator choosing a replica needs: each live log's last epoch and end."""
    logs = [
        f"{f.node} (last epoch {f.tail[0]}, end {f.tail[1]}, followed epoch {f.leader_epoch})"
        for f in _ranked([f for f in found if f.node in live]) if f.tail is not None
    ]
    return "surviving logs, best first: " + (", ".join(logs) or "none")


def _hold(
    meta: PartitionMeta, partition: int, found: list[ReplicaFinding], reason: str,
    settings: ServiceSettings, live: set[str],
) -> None:
    """An ambiguous partition: offline until an operator's unclean election (module docstring)."""
    states = [f.state for f in found if f.state is not None]
    newest = max(states, key=lambda s: s.version) if states else None
    # The default choice of an unclean election is the first live replica: the best log.
    holders = [f.node for f in _ranked([f for f in found if f.node in live])]
    holders += [f.node for f in sorted(found, key=lambda f: -f.leader_epoch) if f.node in live]
    named = list(newest.replicas) if newest is not None else []
    candidates = [*holders, *named, *sorted(live)]
    meta.replicas = list(dict.fromkeys(candidates))[: settings.replication_factor]
    meta.isr = [n for n in (newest.isr if newest is not None else meta.replicas) if n in meta.replicas]
    meta.epoch = max([f.leader_epoch for f in found] + [s.leader_epoch for s in states] + [0])
    meta.partition_epoch = max([s.partition_epoch for s in states] + [0])
    meta.known_end = 0
    meta.held = f"{reason}; {_surviving_logs(found, live)}"
    logger.error(
        "partition %d is HELD after a full restart, offline until an operator chooses a replica "
        "(raygroups elect-leader --unclean [--node NODE] %d): %s",
        partition, partition, meta.held,
    )


def _check_settings(
    findings: list[ReplicaFinding], settings: ServiceSettings, count: int, repartitioned: bool
) -> None:
    """The replicas are this service's: its replication factor, and its partition count
    (after a repartition, the count the routing says, whatever the settings say)."""
    wrong = [
        f"{f.path} (num_partitions {f.state.num_partitions}, replication_factor "
        f"{f.state.replication_factor})"
        for f in findings
        if f.state is not None and (
            (f.state.num_partitions != settings.num_partitions and not repartitioned)
            or f.state.replication_factor != settings.replication_factor
        )
    ]
    outside = [f.path for f in findings if f.partition >= count]
    if repartitioned and outside:
        # A shrink's emptied partitions whose replicas were not renamed (a node down while
        # they were retired): their groups are other partitions' now.
        logger.warning("ignoring the replicas of partitions a repartition retired: %s", outside)
        outside = []
    if wrong or outside:
        _refuse(
            f"the replicas on disk were written by a service of another shape than num_partitions "
            f"{count}, replication_factor {settings.replication_factor}",
            wrong + outside, settings, "Start it with the settings it had, or move those directories away.",
        )


def _recovered_routing(findings: list[ReplicaFinding], settings: ServiceSettings) -> Routing | None:
    """What the leaders' state files say of repartitions: the newest routing any recorded
    (for one repartition, every switch any recorded; a finished one wins), None if none ran.
    A source that switched but whose file does not say so switches again as a no-op."""
    known: Routing | None = None
    for finding in findings:
        if finding.state is None or not finding.state.routing:
            continue
        try:
            routing = Routing.decode(finding.state.routing.encode("ascii"))
        except ValueError:
            _refuse("a partition state file holds no readable routing", [finding.path], settings,
                    "Move that file away if its partition's other replicas hold state files.")
        known = routing if known is None else known.merged(routing)
    return known


def _refuse(what: str, items: list[str], settings: ServiceSettings, advice: str) -> None:
    shown = ", ".join(items[:SHOWN]) + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")
    raise ForgottenLogsError(
        f"{what}: {shown}. Ray's GCS holds no metadata for namespace {settings.namespace!r} and "
        f"{settings.data_dir} (the Ray cluster restarted without GCS fault tolerance). {advice}"
    )


@ray.remote(num_cpus=0)
def _scan_on_node(data_dir: str) -> list[ReplicaFinding]:
    return scan_replicas(data_dir)


def recover_forgotten_logs(settings: ServiceSettings, live: Mapping[str, str]) -> None:
    """Before a replicated service's controller starts: when the GCS holds no metadata,
    rebuild it from the replicas on the live nodes (`live`: name -> Ray node id) and
    save it, or raise ForgottenLogsError (module docstring)."""
    if settings.replication_factor == 1:
        return
    store = GcsKvStore(settings.namespace, settings.data_dir)
    if store.load() is not None:
        return
    scans = {
        _scan_on_node.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        ).remote(settings.data_dir): name
        for name, node_id in live.items()
    }
    state = recover_state([f for listing in _wait_for_scans(scans) for f in listing], settings, live)
    if state is not None:
        store.save(state.to_json())
        logger.warning(
            "controller metadata rebuilt from the replicas' state files for %d partitions "
            "(namespace %r, %s)", state.num_partitions, settings.namespace, settings.data_dir,
        )


def _wait_for_scans(scans: Mapping[Any, str]) -> list[list[ReplicaFinding]]:
    """Every node's findings: a busy cluster may take long to start a task on each node,
    so this waits (saying which nodes it waits for) up to `LIST_TIMEOUT_S`, then refuses
    to guess without a node's disk."""
    pending, deadline = list(scans), time.monotonic() + LIST_TIMEOUT_S
    while pending:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=LIST_WAIT_LOG_S)
        waiting = sorted(scans[ref] for ref in pending)
        if waiting and time.monotonic() >= deadline:
            raise ForgottenLogsError(
                f"the disks of nodes {waiting} were not scanned in {LIST_TIMEOUT_S:.0f} s: their "
                "replicas may hold what was acknowledged"
            )
        if waiting:
            logger.warning("scanning the replicas' disks: waiting for nodes %s", waiting)
    return ray.get(list(scans))
