"""The Kafka brokers of the service: the gateways and the partition leaders' listeners.

Kafka clients learn brokers from Metadata and look a coordinator's node id
up there (aiokafka connects to no node that Metadata did not list), so
every gateway and every leader's Kafka listener (`gateway.direct`) answers
Metadata with all of them, as every Kafka broker lists every broker. The
controller keeps the list:
- listeners from the leaders' probes (`probe()["kafka"]`), kept for the
  epoch probed and listed only while that epoch is the routed one: a
  replaced leader's listener leaves the list at the new leader's publish;
- gateways register themselves with every `kafka_brokers` call they make,
  at least every 10 s while they serve (a restarted
  controller learns them again then), and leave it when they close. A
  gateway not heard from for `GATEWAY_TTL_S` (it died without closing, or
  its node did) is listed no more; clients skip a broker they cannot
  reach meanwhile, as with Kafka.
Plain data, no Ray, no clock: the controller shell answers from it and
passes the time.
"""

from __future__ import annotations

from typing import Any

Broker = tuple[int, str, int, str]  # Kafka node id, host, port, Ray node id

# A gateway not heard from this long is listed no more: three times as long as a serving
# gateway waits between namings (gateway.direct.routing.REGISTER_EVERY_S).
GATEWAY_TTL_S = 30.0


class KafkaBrokers:
    def __init__(self) -> None:
        self.gateways: dict[int, Broker] = {}
        self._heard_at: dict[int, float] = {}
        self._listeners: dict[int, tuple[int, dict[str, Any]]] = {}

    def on_probe(self, partition: int, epoch: int, probe: dict[str, Any]) -> None:
        described = probe.get("kafka")
        if described and "port" in described:
            self._listeners[partition] = (epoch, described)
        else:
            self._listeners.pop(partition, None)

    def register(self, gateway: Broker, now_s: float) -> None:
        self.gateways[gateway[0]] = gateway
        self._heard_at[gateway[0]] = now_s

    def unregister(self, node_id: int, host: str, port: int) -> None:
        """Only the gateway registered at that address: another one registered since at
        the same node id (a restarted gateway elsewhere) stays."""
        registered = self.gateways.get(node_id)
        if registered is not None and registered[1:3] == (host, port):
            del self.gateways[node_id], self._heard_at[node_id]

    def live_gateways(self, now_s: float) -> list[Broker]:
        """The gateways heard from within `GATEWAY_TTL_S` of `now_s`, by node id; the
        others are forgotten."""
        for node_id, heard_at in list(self._heard_at.items()):
            if now_s - heard_at > GATEWAY_TTL_S:
                del self.gateways[node_id], self._heard_at[node_id]
        return sorted(self.gateways.values())

    def listeners(self, routed_epochs: list[int | None]) -> list[Broker]:
        """The listener of every partition whose routed leader is the one probed."""
        found = []
        for partition, (epoch, described) in sorted(self._listeners.items()):
            if partition < len(routed_epochs) and routed_epochs[partition] == epoch:
                found.append((described["node_id"], described["host"], described["port"],
                              described.get("ray_node", "")))
        return found
