"""A leader failover in the middle of a KIP-848 reconciliation (issue 23, "Faults").

Run in its own process (a multi-node `ray.cluster_utils.Cluster` cannot share
a process with the test session's cluster):
`python -m tests.ray.consumer_failover_scenario CASE` with CASE one of
`leader-actor` (the leader replica of the group's offsets partition is
`ray.kill`ed) or `leader-node` (its node is removed with its disk).

A simulated cluster of 4 nodes, replication factor 3, min ISR 2. Consumer-protocol
members A and B (`GroupMember(group_protocol="consumer")`, in this process) split
a topic of 6 partitions; then A's revoke listener is armed to block, and C
joins: B revokes its share at once, A stays in the middle of its revocation
(the group's target epoch is ahead of A's), C waits for A's partition. The
group's state is read (ConsumerGroupDescribe) through the old leader, and its
log is copied; then the leader is killed, a follower is elected, and the
listener is held past the session timeout after the new leader serves
(A's keep-alive heartbeats must keep it in the group across the failover, as
Kafka's heartbeat thread does); the listener then commits the offsets of
the partitions it revokes with its member epoch (what an application does in
onPartitionsRevoked) and returns.

Checks:
- the new leader's ConsumerGroupDescribe equals the old leader's (same group
  epoch, target epoch, member epochs, assignments and targets: the follower's
  hot shard replayed what the old leader had written), and every record the old
  leader had written of the group is in the new leader's log at the same offset;
- the group finishes reconciling on the new leader: every member at the target
  epoch the old leader had set, the partitions split 2/2/2, without a new
  group epoch, a member fenced or a partition lost (no `on_lost`, member ids
  unchanged, member epochs never going back, never 0 again);
- at every instant no partition is owned by two members: each member's
  ownership intervals (from its `on_assigned` call to the end of its
  `on_revoked`) never overlap per partition;
- commits with member epochs succeed after the failover (A's in its revoke
  listener, then every member's own), and are read back.
Prints `continued on the new leader` and exits non-zero if a check fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import ray

import actors
from actors import GroupMember
from actors.core.settings import CONTROLLER_NAME, TOPIC_REGISTRY_NAME
from actors.demo.sim_cluster import (
    fully_replicated,
    quick_failover_settings,
    remove_with_disk,
    wait_for,
    worker_node,
)
from actors.demo.sim_cluster import status_rows as rows
from actors.member.group_member import Offsets
from coordinator import CoordinatorConfig
from coordinator.messages import DescribedConsumerGroup
from coordinator.topic_partition import TopicPartition
from log import LogReader, replica_dir

from tests.ray.cluster_support import simulated_cluster

NAMESPACE = "raygroups-consumer-failover"
PARTITIONS = 2
TOPIC = "orders"
TOPIC_PARTITIONS = 6
SESSION_TIMEOUT_MS = 3_000
HEARTBEAT_INTERVAL_MS = 250
# The rebalance timeout (max.poll.interval.ms): far longer than the held revocation.
MAX_POLL_INTERVAL_MS = 120_000
WAIT_S = 60.0


@dataclasses.dataclass
class Event:
    member: str
    kind: str  # assigned, revoked, lost
    parts: frozenset[TopicPartition]
    start: float
    end: float


class Member:
    """A consumer-protocol GroupMember whose listeners record their calls with times;
    its revoke listener blocks once `hold` is armed, until `release`."""

    def __init__(self, name: str, client: actors.Client, group: str, events: list[Event],
                 lock: threading.Lock) -> None:
        self.name, self.events, self.lock = name, events, lock
        self.armed = threading.Event()
        self.holding = threading.Event()
        self.release = threading.Event()
        self.held: frozenset[int] = frozenset()  # the partitions of the held revocation
        self.commit_in_revoke: Offsets | BaseException | None = None
        self.member = GroupMember(
            group, [TOPIC], client=client, group_protocol="consumer",
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS, retry_backoff_ms=50,
            on_assigned=self._recorded("assigned"), on_revoked=self._recorded("revoked", self._revoke),
            on_lost=self._recorded("lost"),
        )

    def _recorded(self, kind: str, body: Callable[[set[TopicPartition]], None] | None = None) -> Any:
        def listener(parts: set[TopicPartition]) -> None:
            start = time.monotonic()
            if body is not None:
                body(parts)
            with self.lock:
                self.events.append(Event(self.name, kind, frozenset(parts), start, time.monotonic()))

        return listener

    def _revoke(self, parts: set[TopicPartition]) -> None:
        if not self.armed.is_set():
            return
        self.armed.clear()
        self.held = frozenset(tp.partition for tp in parts)
        self.holding.set()
        if not self.release.wait(WAIT_S * 3):
            raise AssertionError(f"{self.name}: never released")
        offsets: Offsets = {tp: 1000 + tp.partition for tp in parts}
        try:  # what onPartitionsRevoked does: commit what it processed, with its epoch
            self.member.commit(offsets, metadata="revoked")
            self.commit_in_revoke = offsets
        except BaseException as exc:
            self.commit_in_revoke = exc

    def view(self) -> tuple[bool, int, frozenset[TopicPartition]]:
        m = self.member
        return m.is_stable, m.generation_id, frozenset(m.assignment())


class EpochWatch:
    """Samples each member's (member id, epoch) until stopped: epochs never go back,
    a member never rejoins (epoch 0) or changes its id."""

    def __init__(self, members: list[Member]) -> None:
        self.members = members
        self.seen: dict[str, list[tuple[str, int]]] = {m.name: [] for m in members}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.02):
            for m in self.members:
                core = m.member.core
                sample = (core.member_id, m.member.generation_id)  # the member epoch
                seen = self.seen[m.name]
                if not seen or seen[-1] != sample:
                    seen.append(sample)
                m.member.poll()  # the application polls (max.poll.interval.ms)

    def check(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for name, seen in self.seen.items():
            ids = {member_id for member_id, _ in seen}
            epochs = [epoch for _, epoch in seen]
            assert len(ids) == 1, f"{name} changed its member id: {seen}"
            joined = epochs.index(next(e for e in epochs if e > 0))
            after = epochs[joined:]
            assert after == sorted(after) and min(after) > 0, f"{name}'s epochs went back or rejoined: {seen}"


def check_no_double_ownership(events: list[Event], end: float) -> int:
    """Per partition, the members' ownership intervals never overlap; the number of intervals."""
    intervals: dict[TopicPartition, list[tuple[float, float, str]]] = {}
    open_since: dict[tuple[str, TopicPartition], float] = {}
    for e in sorted(events, key=lambda e: e.start):
        for tp in e.parts:
            key = (e.member, tp)
            if e.kind == "assigned":
                assert key not in open_since, f"{e.member} assigned {tp} twice"
                open_since[key] = e.start
            else:
                began = open_since.pop(key)
                stop = e.end if e.kind == "revoked" else e.start
                intervals.setdefault(tp, []).append((began, stop, e.member))
    for (member, tp), began in open_since.items():
        intervals.setdefault(tp, []).append((began, end, member))
    for tp, spans in intervals.items():
        spans.sort()
        for (s1, e1, m1), (s2, e2, m2) in zip(spans, spans[1:]):
            assert e1 <= s2, f"{tp} owned by {m1} [{s1:.3f}, {e1:.3f}] and {m2} [{s2:.3f}, {e2:.3f}] at once"
    return sum(map(len, intervals.values()))


def describe(client: actors.Client, group: str) -> DescribedConsumerGroup:
    (described,) = client.describe_consumer_groups([group])
    return dataclasses.replace(described, members=tuple(sorted(described.members, key=lambda m: m.member_id)))


def group_on(client: actors.Client, partition: int) -> str:
    return next(g for g in (f"kip848-{i}" for i in range(10_000)) if client.partition_for(g) == partition)


def actor_node(name: str) -> str:
    for info in ray._private.state.actors().values():
        if info["Name"] == name and info["State"] == "ALIVE":
            return str(info["Address"]["NodeID"])
    raise AssertionError(f"no live actor {name}")


def group_records(data_dir: str, node: str, partition: int, group: str) -> dict[int, Any]:
    """The records of `group` in a replica's log on disk, by offset."""
    reader = LogReader(replica_dir(data_dir, node, partition))
    return {offset: record for offset, record in reader.records() if _names_group(record, group)}


def _names_group(record: Any, group: str) -> bool:
    key = record[0]
    return isinstance(key, tuple) and len(key) > 0 and key[0] == group


def split(views: list[tuple[bool, int, frozenset[TopicPartition]]], epoch: int) -> bool:
    owned = [a for _, _, a in views]
    everything = frozenset(TopicPartition(TOPIC, p) for p in range(TOPIC_PARTITIONS))
    return (
        all(stable and e == epoch for stable, e, _ in views)
        and sum(map(len, owned)) == TOPIC_PARTITIONS
        and frozenset().union(*owned) == everything
    )


def run(cluster: Any, data_dir: str, case: str) -> None:
    settings = quick_failover_settings(
        data_dir, NAMESPACE, PARTITIONS,
        maintenance_interval_s=3_600.0,  # no compaction: the logs are compared record by record
        coordinator=CoordinatorConfig(
            group_consumer_heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            group_consumer_session_timeout_ms=SESSION_TIMEOUT_MS,
        ),
    )
    client = actors.start(settings=settings, namespace=NAMESPACE, address=cluster.address)
    wait_for("every partition fully replicated", lambda: fully_replicated(client))
    client.create_topic(TOPIC, TOPIC_PARTITIONS)
    partition = 0
    if case == "leader-node":
        # The victim must be a worker without the controller and the topic registry: the
        # group goes on a partition with a replica on such a worker (with 4 nodes and the
        # two singletons on two workers, partition 0 may have none there).
        spared = {actor_node(CONTROLLER_NAME), actor_node(TOPIC_REGISTRY_NAME)}
        workers = {w.node_id for w in cluster.worker_nodes} - spared
        partition = next(p for p, row in sorted(rows(client).items()) if set(row["isr"]) & workers)
        before_row = rows(client)[partition]
        if before_row["leader_node"] not in workers:
            client.reassign(partition, next(n for n in before_row["isr"] if n in workers))
            wait_for(f"partition {partition} led from a worker",
                     lambda: rows(client)[partition]["leader_node"] in workers)
            wait_for("every partition fully replicated", lambda: fully_replicated(client))
    group = group_on(client, partition)
    before_row = rows(client)[partition]

    events: list[Event] = []
    lock = threading.Lock()
    a, b, c = (Member(n, client, group, events, lock) for n in "ABC")
    watch = EpochWatch([a, b, c])
    members: list[Member] = []
    try:
        for m in (a, b):
            m.member.start()
            members.append(m)
        wait_for("A and B split the partitions", lambda: split([a.view(), b.view()], a.view()[1])
                 and len(a.view()[2]) == 3, timeout_s=WAIT_S)
        first_epoch = a.view()[1]

        # A reconciliation: C joins, A's revocation is held.
        a.armed.set()
        c.member.start()
        members.append(c)
        wait_for("A holding its revocation", a.holding.is_set, timeout_s=WAIT_S)

        def mid_reconciliation() -> bool:
            """B and C went as far as they can, A holds: nothing is written until A acknowledges."""
            d = describe(client, group)
            by_id = {m.member_id: m for m in d.members}
            a_desc, b_desc, c_desc = (by_id.get(m.member.core.member_id) for m in (a, b, c))
            if a_desc is None or b_desc is None or c_desc is None:
                return False
            c_missing = {p for tp in c_desc.target_assignment for p in tp.partitions} - {
                p for tp in c_desc.assignment for p in tp.partitions
            }
            return (
                d.assignment_epoch > first_epoch and a_desc.member_epoch < d.assignment_epoch
                and all(m.member_epoch == d.assignment_epoch for m in (b_desc, c_desc))
                and b_desc.assignment == b_desc.target_assignment
                and c_missing == a.held  # C has all but what A still revokes
            )

        wait_for("B and C reconciled as far as they can while A holds", mid_reconciliation, timeout_s=WAIT_S)
        old = describe(client, group)
        time.sleep(1.0)  # heartbeats meanwhile (C's, A's keep-alives) write nothing
        later = describe(client, group)
        assert later == old, f"the group changed while A holds its revocation:\n{old}\n{later}"
        old_leader = rows(client)[partition]
        old_node = old_leader["leader_node"]
        assert old.assignment_epoch > first_epoch and len(old.members) == 3, old

        # The failover.
        if case == "leader-actor":
            client.refresh()
            ray.kill(client.leader(partition), no_restart=True)
        else:
            remove_with_disk(cluster, worker_node(cluster, old_node), data_dir)
        wait_for("a follower elected",
                 lambda: rows(client)[partition].get("leader_node") not in (None, old_node)
                 and rows(client)[partition].get("state") == "ACTIVE", timeout_s=WAIT_S)
        new_row = rows(client)[partition]
        assert new_row["leader_node"] in old_leader["isr"] and new_row["epoch"] > old_leader["epoch"], new_row
        new = describe(client, group)
        assert new == old, f"the new leader's group differs:\nold {old}\nnew {new}"
        if case == "leader-actor":  # the old leader's disk is still there: compare the logs
            written = group_records(data_dir, old_node, partition, group)
            replayed = group_records(data_dir, new_row["leader_node"], partition, group)
            missing = {o: r for o, r in written.items() if replayed.get(o) != r}
            assert written and not missing, f"records of the old leader not in the new one's log: {missing}"

        # Held past the session timeout on the new leader: only keep-alives keep A in.
        time.sleep(2 * SESSION_TIMEOUT_MS / 1000)
        held = describe(client, group)
        assert held.members == new.members, f"a member changed while A held:\nbefore {new}\nafter {held}"
        a.release.set()
        wait_for("the group reconciled on the new leader",
                 lambda: split([m.view() for m in members], old.assignment_epoch), timeout_s=WAIT_S)
        assert {len(m.view()[2]) for m in members} == {2}
        final = describe(client, group)
        assert final.group_epoch == old.group_epoch and final.assignment_epoch == old.assignment_epoch, final
        assert all(m.member_epoch == old.assignment_epoch for m in final.members), final
        assert all(m.assignment == m.target_assignment for m in final.members), final
        assert [m.target_assignment for m in final.members] == [m.target_assignment for m in old.members]

        # Commits with member epochs after the failover.
        assert isinstance(a.commit_in_revoke, dict), f"A's commit in on_revoked: {a.commit_in_revoke!r}"
        expected = dict(a.commit_in_revoke)
        for i, m in enumerate(members):
            offsets: Offsets = {tp: 10 * (i + 1) + tp.partition for tp in m.member.assignment()}
            m.member.commit(offsets, metadata=m.name)
            expected.update(offsets)
        for m in members:
            committed = m.member.committed(list(expected))
            got = {tp: o.offset for tp, o in committed.items() if o is not None}
            assert got == expected, (m.name, got, expected)

        watch.check()
        with lock:
            recorded = list(events)
        assert not [e for e in recorded if e.kind == "lost"], f"partitions lost: {recorded}"
        intervals = check_no_double_ownership(recorded, time.monotonic())
        print(f"{case}: partition {partition} moved {old_node[:12]} -> {new_row['leader_node'][:12]} (epoch "
              f"{old_leader['epoch']} -> {new_row['epoch']}) with A mid-revocation at epoch "
              f"{min(m.member_epoch for m in old.members)}, target {old.assignment_epoch}; "
              f"{intervals} ownership intervals, none overlapping; no member fenced; "
              f"continued on the new leader", flush=True)
    finally:
        watch.stop.set()
        a.release.set()
        for m in members:
            m.member.close(timeout_s=10)


CASES = ("leader-actor", "leader-node")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=CASES)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    nodes = simulated_cluster(workers=3, namespace=NAMESPACE, prefix="raygroups-kip848-failover-")
    with nodes as (cluster, data_dir):
        try:
            run(cluster, data_dir, args.case)
        finally:
            actors.stop(NAMESPACE)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sys.exit(main())
