"""The project's packaging: import names, console script, cluster config."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["actors", "coordinator", "log", "spark_bridge"])
def test_top_level_package_resolves_to_this_repository(name: str) -> None:
    # `log` is a generic name: make sure it is ours. find_spec locates the package
    # without running its __init__, so this checks packaging, not package contents.
    spec = importlib.util.find_spec(name)

    assert spec is not None and spec.submodule_search_locations, name
    locations = {Path(p).resolve() for p in spec.submodule_search_locations if Path(p).is_dir()}
    assert locations == {REPO_ROOT / name}


def test_cli_requires_a_command() -> None:
    from actors.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2


def test_cluster_yaml_is_a_launcher_config() -> None:
    config = yaml.safe_load((REPO_ROOT / "cluster.yaml").read_text(encoding="utf-8"))

    assert config["cluster_name"] == "raygroups"
    assert config["provider"]["type"] == "local"
    for key in ("setup_commands", "head_start_ray_commands", "worker_start_ray_commands"):
        assert config[key], key
    start = " ".join(config["head_start_ray_commands"] + config["worker_start_ray_commands"])
    # Token auth stays on in a real deployment; only tests turn it off.
    assert "RAY_AUTH_MODE=token" in start
    assert "RAYGROUPS_DATA_DIR" in start


def test_cluster_yaml_detects_a_lost_node_as_fast_as_the_demo_and_benchmark() -> None:
    from actors.demo.sim_cluster import FAST_NODE_FAILURE

    config = yaml.safe_load((REPO_ROOT / "cluster.yaml").read_text(encoding="utf-8"))
    head = " ".join(config["head_start_ray_commands"])
    found = re.search(r"--system-config='([^']*)'", head)
    assert found is not None, "the head starts with Ray's node failure detection set"
    assert json.loads(found.group(1)) == FAST_NODE_FAILURE
