"""Replication factor by cluster size when the operator does not set it: 3
(min ISR 2) from 3 nodes, 2 (min ISR 1) on 2, 1 on one; explicit settings win.
The rule is `replication_defaults`; `settings_for_cluster` is what
`actors.start` builds its settings with, and `raygroups start` hands it the
operator's flags."""

from __future__ import annotations

from typing import Any

import pytest

import actors
from actors.cli.main import main
from actors.controller.replicas import ReplicatedPlane
from actors.controller.state import ControlState, saved_replication_factor
from actors.core.metrics import ControllerMetrics
from actors.core.settings import (
    CLUSTER_PARTITIONS,
    EMBEDDED_PARTITIONS,
    replication_defaults,
    settings_for_cluster,
)

from tests.controller.fake import FakeCluster, ManualClock, MemoryStore
from tests.controller.helpers import run, watch


@pytest.mark.parametrize(
    "nodes, expected", [(0, (1, 1)), (1, (1, 1)), (2, (2, 1)), (3, (3, 2)), (4, (3, 2)), (50, (3, 2))]
)
def test_the_rule(nodes: int, expected: tuple[int, int]) -> None:
    assert replication_defaults(nodes) == expected


@pytest.mark.parametrize("nodes", [1, 2, 3, 7])
def test_the_default_follows_the_live_nodes(nodes: int) -> None:
    settings = settings_for_cluster("/data", nodes)
    assert (settings.replication_factor, settings.min_insync_replicas) == replication_defaults(nodes)
    assert settings.num_partitions == max(4, 2 * nodes) and not settings.shared_data_dir


def test_the_default_count_stops_at_kafkas() -> None:
    assert settings_for_cluster("/data", 40).num_partitions == CLUSTER_PARTITIONS


@pytest.mark.parametrize(
    "given, expected",
    [
        ({"replication_factor": 1}, (1, 1)),
        ({"replication_factor": 2}, (2, 1)),
        ({"replication_factor": 3}, (3, 2)),
        ({"min_insync_replicas": 2}, (2, 2)),
        ({"replication_factor": 2, "min_insync_replicas": 2}, (2, 2)),
    ],
)
def test_explicit_settings_win_on_two_nodes(given: dict[str, int], expected: tuple[int, int]) -> None:
    settings = settings_for_cluster("/data", 2, **given)
    assert (settings.replication_factor, settings.min_insync_replicas) == expected


def test_embedded_partitions_and_the_shared_data_dir_pass_through() -> None:
    settings = settings_for_cluster("/data", 1, embedded=True, namespace="ns", shared_data_dir=True)
    assert settings.num_partitions == EMBEDDED_PARTITIONS and settings.namespace == "ns"
    assert settings.shared_data_dir and settings.replication_factor == 1
    assert settings_for_cluster("/data", 1, embedded=True, num_partitions=3).num_partitions == 3


def test_a_service_started_before_keeps_the_factor_its_metadata_was_written_under() -> None:
    single = ControlState.fresh(2)
    single.partitions[0].epoch = 3
    replicated = ControlState.fresh(2)
    for p, meta in replicated.partitions.items():
        meta.replicas = ["a", "b", "c"] if p else ["a", "b", "c", "d"]  # partition 0 mid-move
    assert saved_replication_factor(None) is None
    assert saved_replication_factor(ControlState.fresh(2).to_json()) is None, "nothing placed yet"
    assert saved_replication_factor(single.to_json()) == 1
    assert saved_replication_factor(replicated.to_json()) == 3
    # A single-copy service on a cluster that grew to 2 nodes, a 3-copy one that lost a node.
    assert settings_for_cluster("/data", 2, saved_replication_factor=1).replication_factor == 1
    kept = settings_for_cluster("/data", 2, saved_replication_factor=3)
    assert (kept.replication_factor, kept.min_insync_replicas) == (3, 2)
    given = settings_for_cluster("/data", 2, saved_replication_factor=1, replication_factor=2)
    assert given.replication_factor == 2, "what the operator gives wins"


def test_a_min_isr_above_the_factor_is_refused() -> None:
    with pytest.raises(ValueError, match="min_insync_replicas"):
        settings_for_cluster("/data", 2, replication_factor=1, min_insync_replicas=2)


def test_raygroups_start_hands_the_operator_s_choices_to_actors_start(monkeypatch: Any) -> None:
    calls: list[dict[str, Any]] = []

    class Started:
        credential = None  # Ray callers not authorized: nothing to print

        def status(self) -> list[dict[str, Any]]:
            return []

    def start(data_dir: str, **kwargs: Any) -> Started:
        calls.append({"data_dir": data_dir, **kwargs})
        return Started()

    monkeypatch.setattr(actors, "start", start)
    assert main(["start", "--data-dir", "/d", "--shared-data-dir", "--json"]) == 0
    assert main(["start", "--data-dir", "/d", "--replication-factor", "2", "--min-insync-replicas",
                     "2", "--json"]) == 0
    first, second = calls
    assert first["shared_data_dir"] is True
    assert (first["replication_factor"], first["min_insync_replicas"]) == (None, None), "defaults: by nodes"
    assert second["shared_data_dir"] is False
    assert (second["replication_factor"], second["min_insync_replicas"]) == (2, 2)
    assert first["ray_credentials"] is None, "not said: the service's record, else its exposure"
    assert main(["start", "--data-dir", "/d", "--no-ray-credentials", "--json"]) == 0
    assert calls[-1]["ray_credentials"] is False


def test_two_nodes_by_default_keep_a_second_copy_that_takes_over_a_lost_node() -> None:
    """The default of a 2-node cluster on the controller (fake cluster, node-local disks)."""

    async def scenario() -> None:
        cluster = FakeCluster(nodes=["n1", "n2"], shared_disk=False)
        defaults = settings_for_cluster("/nonexistent/raygroups", len(cluster.nodes), num_partitions=2)
        plane = ReplicatedPlane(
            defaults, cluster, MemoryStore(), ControllerMetrics(), "controller", ManualClock()
        )
        await plane.start()
        await watch(plane)
        assert all(sorted(plane.state.partitions[p].replicas) == ["n1", "n2"] for p in range(2))
        [lead] = [a for a in cluster.live.values() if a.partition == 0 and a.role == "leader"]
        lead.commit(5)
        cluster.remove_node(lead.node)
        await watch(plane)
        [new] = [a for a in cluster.live.values() if a.partition == 0 and a.role == "leader"]
        assert new.node != lead.node and plane.routing()[1][0] is new
        assert plane.state.partitions[0].isr == [new.node], "min ISR 1: still writable alone"

    run(scenario())
