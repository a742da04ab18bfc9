"""Node names: the label when a node has one, Ray's id otherwise; one name per live node."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from actors.core.node_names import NODE_LABEL, DuplicateNodeNameError, live_names, node_name


def entry(node_id: str, alive: bool = True, name: str | None = None) -> dict[str, Any]:
    labels = {"ray.io/node-id": node_id, **({NODE_LABEL: name} if name else {})}
    return {"NodeID": node_id, "Alive": alive, "Labels": labels}


def test_a_labelled_node_is_named_by_its_label_and_an_unlabelled_one_by_its_id() -> None:
    assert node_name({NODE_LABEL: "broker-1", "other": "x"}, "ab12") == "broker-1"
    assert node_name({"other": "x"}, "ab12") == "ab12"
    assert node_name(None, "ab12") == "ab12"
    assert node_name({NODE_LABEL: ""}, "ab12") == "ab12"


def test_live_names_map_each_live_name_to_its_current_ray_id() -> None:
    nodes = [entry("id-1", name="broker-1"), entry("id-2"), entry("id-0", alive=False, name="broker-2")]
    assert live_names(nodes) == {"broker-1": "id-1", "id-2": "id-2"}


def test_a_name_a_dead_node_had_may_come_back_on_a_new_node() -> None:
    nodes = [entry("old", alive=False, name="broker-1"), entry("new", name="broker-1")]
    assert live_names(nodes) == {"broker-1": "new"}


def test_two_live_nodes_with_one_name_are_refused() -> None:
    with pytest.raises(DuplicateNodeNameError, match="two live Ray nodes are named 'broker-1'.*id-1.*id-2"):
        live_names([entry("id-1", name="broker-1"), entry("id-2", name="broker-1")])


def test_cluster_yaml_names_every_node_for_restart_recovery() -> None:
    import yaml
    from ray._private.label_utils import parse_node_labels_string

    root = Path(__file__).resolve().parents[2]
    config = yaml.safe_load((root / "cluster.yaml").read_text(encoding="utf-8"))
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = " ".join(config[key])
        found = re.search(r'--labels="([^"]*)"', start)
        assert found is not None, f"{key} labels the node"
        labels = parse_node_labels_string(found.group(1).replace("$(hostname -s)", "broker-1"))
        assert labels == {NODE_LABEL: "broker-1"}
