"""What a Kafka API handler is given with each request: `RequestContext` and `GatewayInfo`.

A leaf module (it imports no other gateway module at run time), so the
handlers (`gateway.handlers`), the dispatch table that imports them
(`gateway.apis`) and the connection core (`gateway.connection`) all depend on
it and on nothing of each other: no import circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.client.client import Client


@dataclass(frozen=True, slots=True)
class GatewayInfo:
    """This gateway and every gateway of the service, as Metadata's brokers.

    `brokers` holds (node_id, host, port) of every gateway, this one
    included; empty means this gateway alone."""

    node_id: int
    host: str
    port: int
    brokers: tuple[tuple[int, str, int], ...] = ()
    cluster_id: str = "raygroups"

    @property
    def data_node_id(self) -> int:
        """The broker Metadata names as every topic partition's leader: this gateway."""
        return self.node_id

    def all_brokers(self) -> tuple[tuple[int, str, int], ...]:
        mine = (self.node_id, self.host, self.port)
        others = tuple(b for b in self.brokers if b[0] != self.node_id)
        return tuple(sorted((mine, *others)))


@dataclass(frozen=True, slots=True)
class RequestContext:
    client_id: str | None
    client_host: str
    api_version: int
    correlation_id: int
    principal: str | None
    gateway: GatewayInfo
    client: Client
    # FindCoordinator's direct answers and Metadata's other brokers (gateway.direct.routing.LeaderRouting,
    # or a listener); None: the gateway itself, and the gateways only.
    direct: Any = None
