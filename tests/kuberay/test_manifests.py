"""deploy/kuberay/: the manifests fit KubeRay's schema and each other, and the docs name them.

No cluster and no network: the RayCluster is validated against KubeRay v1.5.0's CRD schema
(vendored, see README.md beside this file) with jsonschema, plus the pruning Kubernetes
applies to structural schemas (a field the schema does not declare is dropped silently by
the API server, so a misspelt field is an error here). Kubernetes' `x-kubernetes-*`
keywords and the `int-or-string` format are not checked by the validator.
Then the cross-file rules a raygroups deployment needs (docs/operations.md,
"Kubernetes (KubeRay)"): one stable node name per Ray node, one pod per name, a claim of
its own mounted at the data directory the start command uses, Services selecting the
pods KubeRay creates (its labels: ray.io/cluster, ray.io/node-type, ray.io/group).
"""

from __future__ import annotations

import copy
import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kuberay"
SCHEMA_FILE = Path(__file__).with_name("raycluster-v1.5.0-schema.json.gz")
NODE_LABEL = "raygroups.io/node"  # actors/core/node_names.py, not imported: no Ray here


def load_all(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def raycluster() -> dict[str, Any]:
    (cluster,) = load_all("raycluster.yaml")
    return cluster


def schema() -> dict[str, Any]:
    with gzip.open(SCHEMA_FILE, "rt") as file:
        return json.load(file)


def undeclared_fields(value: Any, node: dict[str, Any], path: str = "") -> Iterator[str]:
    """Paths of the fields in `value` that the structural schema `node` would prune."""
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and node.get("type") == "object":
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                yield from undeclared_fields(item, properties[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                yield from undeclared_fields(item, extra, f"{path}.{key}")
            elif properties is not None:
                yield f"{path}.{key}"
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(value):
            yield from undeclared_fields(item, node["items"], f"{path}[{index}]")


def schema_errors(document: dict[str, Any]) -> list[str]:
    """Every way `document` breaks the RayCluster schema (empty when it fits)."""
    crd_schema = schema()
    validator = jsonschema.Draft7Validator(crd_schema)
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
    metadata_free = {k: v for k, v in document.items() if k != "metadata"}
    return errors + [f"{p}: not in the schema" for p in undeclared_fields(metadata_free, crd_schema)]


def groups(cluster: dict[str, Any]) -> list[dict[str, Any]]:
    """The head group and the worker groups: each is one named raygroups node."""
    return [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]


def start_option(pattern: str) -> tuple[str, ...]:
    """The groups of `pattern` in start.sh, the commands that start the service."""
    match = re.search(pattern, (DEPLOY / "start.sh").read_text())
    assert match, f"start.sh has no {pattern!r}"
    return match.groups()


def test_raycluster_fits_kuberay_schema() -> None:
    assert schema_errors(raycluster()) == []


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda c: c["spec"]["workerGroupSpecs"][0].update(replicas="one"), id="wrong-type"),
        pytest.param(lambda c: c["spec"]["workerGroupSpecs"][0].pop("groupName"), id="missing-required"),
        pytest.param(lambda c: c["spec"]["headGroupSpec"].pop("template"), id="missing-template"),
        pytest.param(lambda c: c["spec"]["workerGroupSpecs"][0].update(label={NODE_LABEL: "x"}),
                     id="misspelt"),
        pytest.param(lambda c: c["spec"]["headGroupSpec"].update(labels={NODE_LABEL: 0}),
                     id="label-not-string"),
    ],
)
def test_schema_check_catches_a_broken_cluster(break_it: Any) -> None:
    broken = copy.deepcopy(raycluster())
    break_it(broken)
    assert schema_errors(broken) != []


def test_every_node_has_a_unique_stable_name_and_one_pod() -> None:
    names = [group["labels"][NODE_LABEL] for group in groups(raycluster())]
    assert len(set(names)) == len(names) == 3
    for worker in raycluster()["spec"]["workerGroupSpecs"]:
        assert worker["replicas"] == worker["minReplicas"] == worker["maxReplicas"] == 1
        assert worker["groupName"] == worker["labels"][NODE_LABEL]


def test_every_node_mounts_its_own_claim_at_the_data_dir() -> None:
    claims = {pvc["metadata"]["name"] for pvc in load_all("pvcs.yaml")
              if pvc["kind"] == "PersistentVolumeClaim"}
    (data_dir,) = start_option(r"--data-dir\s+(\S+)")
    used = []
    for group in groups(raycluster()):
        pod = group["template"]["spec"]
        volumes = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
                   if "persistentVolumeClaim" in v}
        (container,) = pod["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert mounts[data_dir] in volumes
        used.append(volumes[mounts[data_dir]])
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["RAYGROUPS_DATA_DIR"] == data_dir
    assert len(set(used)) == len(used) and set(used) <= claims


def pod_labels(cluster: dict[str, Any]) -> list[dict[str, str]]:
    """The labels KubeRay puts on each pod it creates (ray-operator/controllers/ray/utils)."""
    name = cluster["metadata"]["name"]
    head = [{"ray.io/cluster": name, "ray.io/node-type": "head", "ray.io/group": "headgroup"}]
    return head + [{"ray.io/cluster": name, "ray.io/node-type": "worker", "ray.io/group": w["groupName"]}
                   for w in cluster["spec"]["workerGroupSpecs"]]


def test_services_select_every_pod_and_expose_the_ports() -> None:
    services = {s["metadata"]["name"]: s["spec"] for s in load_all("services.yaml")}
    for spec in services.values():
        for labels in pod_labels(raycluster()):
            assert spec["selector"].items() <= labels.items()
    brokers = services["raygroups-brokers"]
    assert brokers["clusterIP"] == "None"
    low, high = map(int, start_option(r"--kafka-ports\s+(\d+)-(\d+)"))
    assert {p["port"] for p in brokers["ports"]} == set(range(low, high + 1))
    (gateway_port,) = map(int, start_option(r"gateway --all-nodes --port (\d+)"))
    assert [p["port"] for p in services["raygroups-gateway"]["ports"]] == [gateway_port]


def test_operations_doc_names_files_that_exist() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Kubernetes (KubeRay)", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"deploy/kuberay/[\w.-]+", section))
    assert {"deploy/kuberay/raycluster.yaml", "deploy/kuberay/pvcs.yaml",
            "deploy/kuberay/services.yaml", "deploy/kuberay/start.sh"} <= named
    for path in named:
        assert (ROOT / path).is_file(), path


# Kubernetes' label syntax (IsQualifiedName, IsValidLabelValue), which KubeRay 1.5 checks
# on a group's Ray labels (ray-operator/controllers/ray/utils/validation.go).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}")


def test_node_labels_pass_kuberay_validation() -> None:
    for group in groups(raycluster()):
        assert "labels" not in group.get("rayStartParams", {})  # KubeRay 1.5 refuses it there
        for key, value in group["labels"].items():
            assert _LABEL_KEY.fullmatch(key) and re.fullmatch(_NAME, value), (key, value)
