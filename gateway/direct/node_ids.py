"""The Kafka node ids of the leaders' listeners, and the Ray node a listener runs on.

A leaf: the light half of a leader's listener (`gateway.direct.listener`)
names itself with these before any connection loads the gateway's code, and
the routing (`gateway.direct.routing`) and the deployed gateways tell a
listener from a gateway by them. A listener's node id is
`LISTENER_NODE_BASE + (epoch mod EPOCHS_WRAP) * PARTITIONS_MAX + partition`:
above every gateway's id, unique per partition and leader epoch.
"""

from __future__ import annotations

import ray

LISTENER_NODE_BASE = 1 << 28
PARTITIONS_MAX = 1 << 12
# Leader epochs wrap after this many: a node id is reused only 16384 incarnations later.
EPOCHS_WRAP = 1 << 14


def listener_node_id(partition: int, epoch: int) -> int:
    """The Kafka node id of `partition`'s listener under leader `epoch` (a positive int32)."""
    if not 0 <= partition < PARTITIONS_MAX:
        raise ValueError(f"direct listeners serve partitions 0-{PARTITIONS_MAX - 1}, not {partition}")
    return LISTENER_NODE_BASE + (epoch % EPOCHS_WRAP) * PARTITIONS_MAX + partition


def listener_partition(node_id: int) -> int:
    """The offsets partition a listener's node id names."""
    return (node_id - LISTENER_NODE_BASE) % PARTITIONS_MAX


def is_listener(node_id: int) -> bool:
    return node_id >= LISTENER_NODE_BASE


def ray_node() -> str:
    """This process's Ray node id ("" without Ray)."""
    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
