"""Replica placement: distinct nodes, even spread, repairs and rebalancing keep it even."""

from __future__ import annotations

from collections import Counter

import pytest

from coordinator.replication import assign_replicas, rebalance_move, replacement_node


def test_each_partition_gets_distinct_nodes_and_the_spread_is_even() -> None:
    assignment = assign_replicas(50, ["c", "a", "b", "d"], 3)
    assert all(len(set(replicas)) == 3 for replicas in assignment)
    hosted = Counter(r for replicas in assignment for r in replicas)
    leaders = Counter(replicas[0] for replicas in assignment)
    assert max(hosted.values()) - min(hosted.values()) <= 1
    assert max(leaders.values()) - min(leaders.values()) <= 1
    # The order the nodes are listed in does not matter.
    assert assign_replicas(50, ["d", "c", "b", "a"], 3) == assignment


def test_an_assignment_needs_as_many_nodes_as_the_replication_factor() -> None:
    with pytest.raises(ValueError, match="needs at least as many live nodes; 2 are live"):
        assign_replicas(3, ["a", "b"], 3)


def test_a_replacement_is_the_least_loaded_live_node_without_a_replica_of_the_partition() -> None:
    assignment = {0: ("a", "b", "c"), 1: ("b", "c", "d"), 2: ("c", "d", "a"), 3: ("d", "e", "b")}
    # a lost: candidates d and e (b, c hold partition 0 already); e hosts one replica, d three.
    assert replacement_node(("a", "b", "c"), ["b", "c", "d", "e"], assignment) == "e"
    assert replacement_node(("a", "b", "c"), ["a", "b", "c"], assignment) is None


def test_a_node_that_joins_takes_its_share_one_follower_at_a_time() -> None:
    assignment = {p: tuple(r) for p, r in enumerate(assign_replicas(6, ["a", "b", "c"], 3))}
    leaders = {p: replicas[0] for p, replicas in assignment.items()}
    moves = 0
    while (move := rebalance_move(assignment, leaders, ["a", "b", "c", "d"])) is not None:
        partition, source, target = move
        assert leaders[partition] != source and target not in assignment[partition]
        assignment[partition] = tuple(target if r == source else r for r in assignment[partition])
        moves += 1
    hosted = Counter(r for replicas in assignment.values() for r in replicas)
    assert hosted["d"] >= 4 and max(hosted.values()) - min(hosted.values()) <= 1
    assert moves == hosted["d"]
    assert rebalance_move(assignment, leaders, ["a"]) is None
