"""Node names: the stable identity of a Ray node, and so of the replicas on it.

A replica's id (in ISR lists, the controller's metadata, its directory
`<data_dir>/nodes/<name>/offsets-<p>`) is its node's NAME: the Ray node
label `raygroups.io/node` when the node has one (`ray start
--labels="raygroups.io/node=broker-1"`), else Ray's node id. Ray gives
a node a new id every time it starts, so only a labelled node is found again
after a full restart of the Ray cluster (Kafka's broker.id is the same
idea); `actors/controller/forgotten_logs.py` recovers the replicas from their
directories by these names.

Rules:
- Two live nodes with one name are refused (`DuplicateNodeNameError`): a
  name stands for one disk, and the controller could not tell which of the
  two holds a replica's log.
- Scheduling still needs Ray's id (`NodeAffinitySchedulingStrategy`):
  `live_nodes()` maps each live name to its current id.
- The controller treats names as opaque strings; only this module reads
  labels.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import ray

NODE_LABEL = "raygroups.io/node"


class DuplicateNodeNameError(RuntimeError):
    """Two live Ray nodes carry the same name."""


def node_name(labels: Mapping[str, Any] | None, node_id: str) -> str:
    """The name of a node with these labels and this Ray id (module docstring)."""
    name = (labels or {}).get(NODE_LABEL)
    return str(name) if name else node_id


def live_names(entries: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """{name: Ray node id} of the live nodes among `ray.nodes()` entries;
    raises DuplicateNodeNameError when two live nodes share a name."""
    names: dict[str, str] = {}
    for entry in entries:
        if not entry.get("Alive"):
            continue
        node_id = str(entry["NodeID"])
        name = node_name(entry.get("Labels"), node_id)
        if name in names:
            raise DuplicateNodeNameError(
                f"two live Ray nodes are named {name!r} (label {NODE_LABEL}): {names[name]} and "
                f"{node_id}. A name stands for one node's disk; give every node its own name."
            )
        names[name] = node_id
    return names


def live_nodes() -> dict[str, str]:
    """{name: Ray node id} of the cluster's live nodes (a GCS call: blocks)."""
    return live_names(ray.nodes())  # type: ignore[no-untyped-call]


def current_node_name() -> str:
    """The name of the node this process runs on, or the host name outside Ray."""
    if not ray.is_initialized():
        return os.uname().nodename
    context = ray.get_runtime_context()
    return node_name(context.get_node_labels(), str(context.get_node_id()))
