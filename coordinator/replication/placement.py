"""Where replicas live: the initial assignment and a replacement for a lost node.

Kafka's rack-unaware assignment (AdminUtils.assignReplicasToBrokers) spreads
each partition's first replica, its preferred leader, round-robin over the
brokers and the rest of its replicas after it; Redpanda's node-loss repair
moves a replica to the live node with the fewest. Pure: nodes are ids, load
is counted from the assignment itself.

Rules:
- Every replica of a partition is on a distinct node; an assignment needs at
  least `replication_factor` nodes (Kafka refuses the offsets topic below
  that and waits).
- Partition p's replica i goes to the node `(p + i) mod n` of the sorted
  nodes: leaders and replicas are spread evenly, each node hosting at most
  one more of either than any other.
- A replacement for a replica on a lost node is the live node that hosts no
  replica of that partition and the fewest replicas overall (ties: the
  fewest preferred leaders, then the id), so repairs keep the spread even.
- Rebalancing (a node joined, or repairs left the spread uneven) moves one
  follower replica at a time from the busiest live node to the idlest,
  until every live node hosts within one replica of every other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

Replica = str


def assign_replicas(
    num_partitions: int, nodes: Iterable[Replica], replication_factor: int
) -> list[tuple[Replica, ...]]:
    """One replica tuple per partition, preferred leader first (see the module rules)."""
    ordered = sorted(set(nodes))
    if replication_factor < 1 or len(ordered) < replication_factor:
        raise ValueError(
            f"replication factor {replication_factor} needs at least as many live nodes; "
            f"{len(ordered)} are live"
        )
    n = len(ordered)
    return [tuple(ordered[(p + i) % n] for i in range(replication_factor)) for p in range(num_partitions)]


def replacement_node(
    replicas: Sequence[Replica], live: Iterable[Replica], assignment: Mapping[int, Sequence[Replica]]
) -> Replica | None:
    """The live node to host a replica of `replicas` in place of a lost one, or None."""
    hosted: Counter[Replica] = Counter()
    leads: Counter[Replica] = Counter()
    for partition_replicas in assignment.values():
        hosted.update(partition_replicas)
        if partition_replicas:
            leads[partition_replicas[0]] += 1
    candidates = [node for node in set(live) if node not in replicas]
    if not candidates:
        return None
    return min(candidates, key=lambda node: (hosted[node], leads[node], node))


def rebalance_move(
    assignment: Mapping[int, Sequence[Replica]],
    leaders: Mapping[int, Replica | None],
    live: Iterable[Replica],
) -> tuple[int, Replica, Replica] | None:
    """One follower replica to move from the live node hosting the most replicas to
    the one hosting the fewest, as `(partition, from_node, to_node)`; None when every
    live node hosts within one replica of every other (a node that joined takes its
    share one replica at a time). The lowest partition that can move is chosen."""
    nodes = sorted(set(live))
    if len(nodes) < 2:
        return None
    hosted = Counter({node: 0 for node in nodes})
    hosted.update(r for replicas in assignment.values() for r in replicas if r in hosted)
    busiest = max(nodes, key=lambda node: (hosted[node], node))
    idlest = min(nodes, key=lambda node: (hosted[node], node))
    if hosted[busiest] - hosted[idlest] < 2:
        return None
    for partition in sorted(assignment):
        replicas = assignment[partition]
        if busiest in replicas and idlest not in replicas and leaders.get(partition) != busiest:
            return partition, busiest, idlest
    return None
