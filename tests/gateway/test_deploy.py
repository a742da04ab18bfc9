"""One gateway per Ray node in front of the session's service: deployed by
`raygroups gateway --all-nodes` (and `start_gateways`), its address listed,
served to a Kafka client, removed by `--stop`; replaced by a rolling restart's
step (`replace_gateway`) at the same address, its clients reconnecting."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import ray
from kafka import KafkaAdminClient

from actors import Client
from actors.cli.main import main
from actors.core.attached import attached, replaceable, replacer
from gateway import deploy
from gateway.direct.node_ids import is_listener

from tests.gateway.gateway_support import assert_served, connect

pytestmark = pytest.mark.ray


@pytest.fixture
def no_gateways(service: Client) -> Iterator[None]:
    deploy.stop_gateways()
    yield
    deploy.stop_gateways()


def test_one_gateway_per_node_on_the_nodes_ip_and_port(no_gateways: None) -> None:
    addresses = deploy.start_gateways(deploy.GatewaySpec(port=0))
    live = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    assert [node for node, _, _ in addresses] == sorted(deploy.kafka_node_id(n) for n in live)
    [(node_id, host, port)] = addresses
    # Without SASL or TLS each node's gateway listens on its loopback address.
    assert host == "127.0.0.1" and port > 0
    assert deploy.gateway_addresses() == addresses
    assert_served(port)
    # Deploying again keeps the running gateways.
    assert deploy.start_gateways(deploy.GatewaySpec(port=0)) == addresses
    admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10_000)
    try:
        brokers = admin.describe_cluster()["brokers"]
        # Besides the gateway, the partition leaders' Kafka listeners (gateway.direct).
        [broker] = [b for b in brokers if not is_listener(b["broker_id"])]
        assert (broker["broker_id"], broker["host"], broker["port"]) == (node_id, host, port)
    finally:
        admin.close()
    assert deploy.stop_gateways() == 1
    assert deploy.gateway_addresses() == []
    with pytest.raises(ConnectionRefusedError):
        connect(port).close()


def test_a_rolling_restart_replaces_a_gateway_at_its_address_with_the_new_code(no_gateways: None) -> None:
    [(node_id, host, port)] = deploy.start_gateways(deploy.GatewaySpec(port=0))
    [name] = attached("raygroups", deploy.ACTOR_PREFIX)
    assert replaceable("raygroups") == [name] and replacer(name, "raygroups") is deploy.replace_gateway
    [old] = deploy.gateway_actors()
    client = connect(port)  # a Kafka client connected to it meanwhile
    env = {"env_vars": {"RAYGROUPS_ROLLED": "gw"}}
    assert deploy.replace_gateway(name, "raygroups", env, timeout_s=30.0)
    [new] = deploy.gateway_actors()
    assert new._actor_id != old._actor_id
    assert deploy.gateway_addresses() == [(node_id, host, port)]  # same address and Kafka node id
    assert ray.get(new.__ray_call__.remote(lambda _self: os.environ.get("RAYGROUPS_ROLLED"))) == "gw"
    assert client.recv(1) == b""  # the old one closed its clients' connections
    client.close()
    assert_served(port)  # a reconnecting client is served by the new one
    assert not deploy.replace_gateway(deploy.ACTOR_PREFIX + "0" * 56, "raygroups", None)  # no such node


def test_the_cli_deploys_lists_and_stops_the_gateways(
    no_gateways: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gateway", "--all-nodes", "--port", "0", "--json"]) == 0
    [gateway] = json.loads(capsys.readouterr().out)
    assert_served(gateway["port"])
    assert main(["gateway", "--list"]) == 0
    listed = capsys.readouterr().out
    assert f"bootstrap.servers=127.0.0.1:{gateway['port']}" in listed
    # The partition leaders' listeners, as FindCoordinator names them (gateway.direct).
    assert "Partition leaders' Kafka listeners" in listed
    assert "partition 0  node " in listed
    assert main(["gateway", "--stop"]) == 0
    assert "stopped 1 gateway(s)" in capsys.readouterr().out
    assert main(["gateway", "--list"]) == 0
    assert "no Kafka gateways running" in capsys.readouterr().out


def test_the_cli_refuses_to_listen_off_loopback_without_security(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gateway", "--host", "0.0.0.0"]) == 2
    assert "refusing to listen on 0.0.0.0" in capsys.readouterr().out
