"""The controller's list of Kafka brokers (actors.controller.kafka_brokers): the leaders'
listeners from their probes, listed only for the routed epoch; gateways by registration,
while they keep naming themselves."""

from __future__ import annotations

from actors.controller.kafka_brokers import GATEWAY_TTL_S, KafkaBrokers


def listener(port: int, node_id: int) -> dict[str, object]:
    return {"kafka": {"host": "127.0.0.1", "port": port, "node_id": node_id, "ray_node": "n1"}}


def test_a_listener_is_listed_while_its_epoch_is_the_routed_one() -> None:
    brokers = KafkaBrokers()
    brokers.on_probe(0, 1, listener(19092, 100))
    brokers.on_probe(1, 4, listener(19093, 101))
    assert brokers.listeners([1, 4]) == [(100, "127.0.0.1", 19092, "n1"), (101, "127.0.0.1", 19093, "n1")]
    # Partition 0 moved to epoch 2 (not probed yet), partition 1 has no routed leader.
    assert brokers.listeners([2, None]) == []
    brokers.on_probe(0, 2, listener(19094, 102))
    assert brokers.listeners([2, None]) == [(102, "127.0.0.1", 19094, "n1")]


def test_a_leader_without_a_listener_or_with_an_error_is_not_listed() -> None:
    brokers = KafkaBrokers()
    brokers.on_probe(0, 1, listener(19092, 100))
    brokers.on_probe(0, 1, {"kafka": {"error": "no free port in 19092-19092 on 127.0.0.1"}})
    brokers.on_probe(1, 1, {"kafka": None})
    assert brokers.listeners([1, 1]) == []


def test_gateways_are_listed_from_their_registration_until_they_close() -> None:
    brokers = KafkaBrokers()
    brokers.register((3, "10.0.0.3", 9092, "n3"), 0.0)
    brokers.register((3, "10.0.0.3", 9092, "n3"), 1.0)
    brokers.register((1, "10.0.0.1", 9092, "n1"), 1.0)
    assert brokers.live_gateways(2.0) == [(1, "10.0.0.1", 9092, "n1"), (3, "10.0.0.3", 9092, "n3")]
    brokers.unregister(3, "10.0.0.3", 9092)
    assert brokers.live_gateways(2.0) == [(1, "10.0.0.1", 9092, "n1")]
    # A gateway closing leaves another one registered since at its node id listed.
    brokers.register((1, "10.0.0.9", 9093, "n9"), 3.0)
    brokers.unregister(1, "10.0.0.1", 9092)
    assert brokers.live_gateways(4.0) == [(1, "10.0.0.9", 9093, "n9")]


def test_a_gateway_not_heard_from_for_the_ttl_is_listed_no_more() -> None:
    brokers = KafkaBrokers()
    one, two = (1, "10.0.0.1", 9092, "n1"), (2, "10.0.0.2", 9092, "n2")
    brokers.register(one, 0.0)
    brokers.register(two, 0.0)
    # Gateway 1 keeps naming itself; gateway 2 died without closing.
    brokers.register(one, GATEWAY_TTL_S - 1)
    assert brokers.live_gateways(GATEWAY_TTL_S) == [one, two]
    assert brokers.live_gateways(GATEWAY_TTL_S + 0.5) == [one]
    # Back (restarted at the same node id): listed again from its first naming.
    restarted = (2, "10.0.0.2", 9094, "n2")
    brokers.register(restarted, GATEWAY_TTL_S + 1)
    assert brokers.live_gateways(GATEWAY_TTL_S + 1) == [one, restarted]
