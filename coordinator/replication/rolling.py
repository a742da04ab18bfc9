"""Rolling restart: the recorded plan and its pure decisions (issue 48, DESIGN section 10).

The controller restarts the service one node at a time, as Kafka operators roll one
broker at a time: every replica on that node is taken out, restarted with the new code
(a Ray runtime_env) and/or the new settings that need a restart, and waited for until it
is back in its partition's ISR; then the next node; then the controller itself and the
topic registry. The driver is `actors.controller.rolling`; what it decides is here, pure
(no Ray, no clock, no I/O), so it is tested on plain data. Last, the Kafka gateways
deployed with the service (the attached actors that say how they are replaced), one at
a time.

Rules:
- Order (`roll_order`): the nodes that lead the fewest partitions first, by name on
  ties, so leadership moves the fewest times early and the busiest node, whose
  leaders must all move, goes last (Kafka's practice: the controller broker last).
- A node may be taken out only if every partition with a replica on it keeps at least
  `min_insync_replicas` in-sync replicas without it, has a leader, and is not held
  (`refusal`), and none of those partitions has another replica out of its ISR (one
  catching up, or recreated elsewhere by the controller's recovery: `catching_up`;
  Kafka's practice, no under-replicated partition before the next broker). Otherwise
  the roll waits, saying which partition and why, and goes on by itself once the
  cluster healed; it never takes a partition below min ISR, so no commit stalls for
  want of replicas.
- Leadership leaves the node first (`leadership_moves`): to the first other ISR member
  in assignment order (the preferred order), so the move is a clean election.
- The node is done when it is back in every one of its partitions' ISR (`behind`).
- A node holding no replica any more (lost, its replicas moved elsewhere, where they
  started with the roll's code) is done.
- Gateways (`next_gateway`): after the registry, every gateway attached to the service
  that says how it is replaced, by name (so a resumed plan goes on in the same order),
  one at a time: the next only once the one before serves again at its address. A
  gateway deployed meanwhile is rolled too; one removed meanwhile (its node gone) is
  skipped; one replaced already (`gateways_done`) is not replaced again. Their Kafka
  clients reconnect (to the same address, or another bootstrap server); the leaders'
  own Kafka listeners moved with leadership in the REPLICAS phase.
- Phases: REPLICAS (node by node), CONTROLLER, REGISTRY, GATEWAYS, DONE. A plan stops for good
  (`stopped`, the reason) only for what a person decides: replicas that do not come
  back within the catch-up timeout on a healthy cluster (new code or settings that do
  not start), or an operator's stop. It keeps its place; `resume` clears the reason and
  the driver retries the step it stopped at (a node whose replicas were restarted
  already is not restarted again: `restarted`). A gateway that does not serve again
  (new code that does not start) stops it the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

REPLICAS, CONTROLLER, REGISTRY, GATEWAYS, DONE = "replicas", "controller", "registry", "gateways", "done"
PHASES = (REPLICAS, CONTROLLER, REGISTRY, GATEWAYS, DONE)


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What the roll needs of one partition: its replicas (assignment order), ISR, leader."""

    replicas: tuple[str, ...]
    isr: tuple[str, ...]
    leader: str | None
    held: bool = False


Cluster = Mapping[int, PartitionView]


def roll_order(partitions: Cluster) -> list[str]:
    """Every node holding a replica, those leading fewest partitions first (then by name)."""
    nodes = {node for view in partitions.values() for node in view.replicas}
    led = {node: sum(1 for view in partitions.values() if view.leader == node) for node in nodes}
    return sorted(nodes, key=lambda node: (led[node], node))


def refusal(node: str, partitions: Cluster, min_insync_replicas: int) -> str | None:
    """Why `node` may not be taken out now (None: it may), naming the first partition in the way."""
    for partition, view in sorted(partitions.items()):
        if node not in view.replicas:
            continue
        if view.held:
            return f"partition {partition} is held after a full restart (an operator elects its leader)"
        if view.leader is None:
            return f"partition {partition} has no leader"
        left = [r for r in view.isr if r != node]
        if len(left) < min_insync_replicas:
            return (
                f"partition {partition}: without {node} its ISR {list(view.isr)} would hold "
                f"{len(left)} in-sync replica(s), below min ISR {min_insync_replicas}"
            )
    return None


def catching_up(node: str, partitions: Cluster) -> str | None:
    """Why `node` waits (None: it need not): a partition with a replica on it has another
    replica out of its ISR (catching up, or being recreated elsewhere)."""
    for partition, view in sorted(partitions.items()):
        if node not in view.replicas:
            continue
        behind_ = [r for r in view.replicas if r != node and r not in view.isr]
        if behind_:
            return (f"partition {partition}: replica(s) on {', '.join(behind_)} not in its ISR yet "
                    "(catching up, or recreated by the controller's recovery)")
    return None


def leadership_moves(node: str, partitions: Cluster) -> dict[int, str]:
    """{partition: new leader} for every partition `node` leads: the first other ISR member
    in assignment order. Call after `refusal` said None (so one exists)."""
    moves: dict[int, str] = {}
    for partition, view in sorted(partitions.items()):
        if view.leader != node:
            continue
        others = [r for r in view.replicas if r != node and r in view.isr]
        if others:
            moves[partition] = others[0]
    return moves


def partitions_on(node: str, partitions: Cluster) -> list[int]:
    return sorted(p for p, view in partitions.items() if node in view.replicas)


def behind(node: str, partitions: Cluster) -> list[int]:
    """The partitions with a replica on `node` that is not in their ISR yet."""
    return [p for p in partitions_on(node, partitions) if node not in partitions[p].isr]


# A gateway that fails to serve again this many times in a row stops the roll: its new code
# or settings do not start (a port refused, an import error), which a person must fix.
GATEWAY_TRIES = 3


def gateway_failed(name: str, tries: int, error: str) -> str | None:
    """After the `tries`-th failed replacement of gateway `name` in a row: None to try again,
    else why the roll stops (naming the gateway and the last error)."""
    if tries < GATEWAY_TRIES:
        return None
    return (f"gateway {name} not serving again after {tries} tries: {error}. New code or settings "
            "that do not start? See its log; --resume tries it again, a new rolling-restart "
            "replaces this one")


@dataclass(slots=True)
class RollPlan:
    """A rolling restart under way, kept in the controller's metadata."""

    version: int
    nodes: list[str]
    runtime_env: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)
    # The node whose replicas were restarted and are catching up (not restarted again).
    restarted: str | None = None
    phase: str = REPLICAS
    stopped: str | None = None
    # The gateways replaced (and serving again) in the GATEWAYS phase, by actor name.
    gateways_done: list[str] = field(default_factory=list)

    def next_node(self) -> str | None:
        return next((n for n in self.nodes if n not in self.done), None)

    def finish_node(self, node: str) -> None:
        if node not in self.done:
            self.done.append(node)
        self.restarted = None
        if self.next_node() is None and self.phase == REPLICAS:
            self.phase = CONTROLLER

    def next_gateway(self, present: Iterable[str]) -> str | None:
        """The gateway to replace next, of those attached now (`present`): the first by name
        not replaced yet; None once each is (those gone meanwhile are not waited for)."""
        return next((name for name in sorted(set(present)) if name not in self.gateways_done), None)

    def finish_gateway(self, name: str) -> None:
        """`name` serves again with the plan's code (or is gone: nothing to replace)."""
        if name not in self.gateways_done:
            self.gateways_done.append(name)

    def advance(self) -> None:
        """The controller, registry or gateways phase is done: the next one."""
        self.phase = PHASES[min(PHASES.index(self.phase) + 1, len(PHASES) - 1)]

    def to_json(self) -> dict[str, Any]:
        # GATEWAYS is saved as REGISTRY plus `gateways_phase`: a controller of the release
        # before, which knows no GATEWAYS phase and refuses an unknown one at start, reads a
        # registry step (a downgrade mid-roll), restarts the registry again and finishes.
        saved_phase = REGISTRY if self.phase == GATEWAYS else self.phase
        return {
            "version": self.version, "nodes": list(self.nodes), "runtime_env": self.runtime_env,
            "settings": dict(self.settings), "done": list(self.done), "restarted": self.restarted,
            "phase": saved_phase, "stopped": self.stopped, "gateways_done": list(self.gateways_done),
            "gateways_phase": self.phase == GATEWAYS,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RollPlan:
        phase = str(data.get("phase", REPLICAS))
        if phase not in PHASES:
            raise ValueError(f"rolling restart phase {phase!r} unknown")
        if phase == REGISTRY and data.get("gateways_phase"):
            phase = GATEWAYS
        return cls(
            int(data["version"]), [str(n) for n in data["nodes"]], data.get("runtime_env"),
            dict(data.get("settings") or {}), [str(n) for n in data.get("done", [])],
            data.get("restarted"), phase, data.get("stopped"),
            [str(n) for n in data.get("gateways_done", [])],  # absent in a plan saved before
        )
