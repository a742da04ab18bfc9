"""One Kafka gateway per Ray node, started and stopped with the service.

Each live node gets a detached `GatewayActor` pinned to it (hard node
affinity), named `raygroups-gateway-<ray node id>` in the service's
namespace. Its address is the node's IP and the common port; Kafka clients
bootstrap from any of them, and Metadata lists them all as brokers.

Rules:
- Secrets never travel through Ray: each actor reads the SASL users file
  (or RAYGROUPS_GATEWAY_SASL_USERS from its own node's environment) and the
  TLS files at the same paths on its node (ship them with cluster.yaml's
  file_mounts). The spec sent to the actors holds paths only.
- Without SASL or TLS a gateway listens on its node's loopback address
  (security.check_listen_address) and lists only itself as broker: clients
  on that node reach it at 127.0.0.1:<port>.
- A Kafka broker id is an int32; a gateway's is the first 28 bits of its Ray
  node id (`kafka_node_id`), the same on every deploy.
- Starting is idempotent: nodes that already run a gateway keep it, new
  nodes get one, and every gateway is told the current broker list. A
  gateway that dies is not restarted by Ray (its socket would need a start
  call): deploying again starts it.
- A rolling restart replaces each gateway (`replace_gateway`, named as its
  replacer when attached: actors/core/attached.py; the controller calls it
  one gateway at a time, after the replicas, actors/controller/rolling.py):
  the old one closes its listener (its Kafka clients see the connection
  close and reconnect, to this address or another bootstrap server) and is
  killed; a new actor of the same name on the same node, created with the
  roll's runtime_env and the old one's spec, binds the same port (so the
  address and the Kafka node id stay), reads the settings in force from the
  controller, and serves before the call returns.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_get, _internal_kv_put
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.client.client import Client, controller_handle
from actors.core.attached import KV_NAMESPACE, until_name_free
from actors.core.settings import DEFAULT_NAMESPACE
from actors.service import attach, attached, stop_attached
from gateway.connection import Limits
from gateway.direct.node_ids import is_listener, listener_partition
from gateway.security import SecurityConfig, check_ray_path
from gateway.server import DEFAULT_PORT, Gateway

logger = logging.getLogger(__name__)
ACTOR_PREFIX = "raygroups-gateway-"
REPLACER = "gateway.deploy:replace_gateway"  # what a rolling restart calls (actors/core/attached.py)
Address = tuple[int, str, int]


@dataclass(frozen=True)
class GatewaySpec:
    """What every node's gateway runs with: a port, paths to the security files, limits."""

    port: int = DEFAULT_PORT
    sasl_users_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    limits: Limits = field(default_factory=Limits)
    # FindCoordinator names the partition leaders' listeners (gateway.direct); False: the gateway.
    direct: bool = True
    # The authorizer's settings (on exactly when SASL or TLS is; docs/security.md).
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    ssl_principal_mapping_rules: str = "DEFAULT"
    loopback_only: bool = False  # allowed without an authorizer before --ray-credentials (security.py)

    def security(self) -> SecurityConfig:
        """Read on the node that runs the gateway (see the module docstring)."""
        return SecurityConfig.read(self, loopback_only=self.loopback_only)


def kafka_node_id(ray_node_id: str) -> int:
    return int(ray_node_id[:7], 16)


class GatewayActor:
    """A gateway on this actor's node, in front of the service of `namespace`."""

    def __init__(self, namespace: str, node_id: int, spec: GatewaySpec):
        self._spec = spec
        self._node_id = node_id
        self._client = Client(controller_handle(namespace), service=True)  # it authorizes its own clients
        self._gateway: Gateway | None = None
        self._address: Address | None = None

    async def start(self) -> Address:
        if self._address is None:
            security = self._spec.security()
            secured = security.sasl or security.tls
            host = ray.util.get_node_ip_address() if secured else "127.0.0.1"  # type: ignore[no-untyped-call]
            service = await self._client.controller.get_settings.remote()
            check_ray_path(host, security, service.ray_credentials)
            gateway = Gateway(
                self._client, node_id=self._node_id, security=security, limits=self._spec.limits,
                advertised_host=host, direct=self._spec.direct,
            )
            advertised, port = await gateway.start(host, self._spec.port)
            self._gateway, self._address = gateway, (self._node_id, advertised, port)
        return self._address

    async def address(self) -> Address | None:
        return self._address

    async def spec(self) -> GatewaySpec:
        """What it runs with, its port the one it bound (a replacement binds it again)."""
        port = self._spec.port if self._address is None else self._address[2]
        return dataclasses.replace(self._spec, port=port)

    async def set_brokers(self, brokers: list[Address]) -> None:
        assert self._gateway is not None, "start() first"
        if self._gateway.security.sasl or self._gateway.security.tls:
            self._gateway.set_brokers(brokers)

    async def acls_changed(self) -> None:
        """The topic registry's nudge after an ACL change (actors/core/attached.py)."""
        if self._gateway is not None:
            self._gateway.acls_changed()

    async def stats(self) -> dict[str, int]:
        assert self._gateway is not None, "start() first"
        return self._gateway.stats()

    async def stop(self) -> None:
        if self._gateway is not None:
            await self._gateway.close()


def _create(name: str, ray_node_id: str, namespace: str, spec: GatewaySpec,
            runtime_env: dict[str, Any] | None = None) -> Any:
    """The detached gateway actor `name` pinned to `ray_node_id` (an existing one of that name
    is returned as it is)."""
    options: dict[str, Any] = {
        "name": name, "namespace": namespace, "lifetime": "detached", "get_if_exists": True,
        "num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(ray_node_id, soft=False),
    }
    if runtime_env is not None:
        options["runtime_env"] = runtime_env
    return ray.remote(GatewayActor).options(**options).remote(namespace, kafka_node_id(ray_node_id), spec)


def start_gateways(
    spec: GatewaySpec, namespace: str = DEFAULT_NAMESPACE, timeout_s: float = 60.0
) -> list[Address]:
    """A gateway on every live node (module docstring); every gateway's address, sorted."""
    actors: list[Any] = []
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if not node.get("Alive"):
            continue
        ray_node_id = node["NodeID"]
        # `actors.stop()` stops it with the service; a rolling restart replaces it (REPLACER).
        attach(ACTOR_PREFIX + ray_node_id, namespace, replaced_by=REPLACER)
        actors.append(_create(ACTOR_PREFIX + ray_node_id, ray_node_id, namespace, spec))
    try:
        addresses: list[Address] = ray.get([actor.start.remote() for actor in actors], timeout=timeout_s)
    except Exception:
        # A gateway that could not start (port taken, refused address) must not linger half made.
        stop_gateways(namespace)
        raise
    ray.get([actor.set_brokers.remote(addresses) for actor in actors], timeout=timeout_s)
    return sorted(addresses)


def _spec_key(name: str, namespace: str) -> str:
    return f"raygroups/{namespace}/gateway-spec/{name}"


def replace_gateway(
    name: str, namespace: str, runtime_env: dict[str, Any] | None, timeout_s: float = 60.0
) -> bool:
    """A rolling restart's step (module docstring): gateway `name` replaced by a new actor
    with `runtime_env`, serving at the same address when this returns True; False when its
    node is gone (nothing to replace). Raises when the new one does not serve; the old
    one's spec is kept in the GCS KV until one does, so a retry starts it again."""
    ray_node_id = name[len(ACTOR_PREFIX):]
    alive = {node["NodeID"] for node in ray.nodes() if node.get("Alive")}  # type: ignore[no-untyped-call]
    if not name.startswith(ACTOR_PREFIX) or ray_node_id not in alive:
        return False
    key = _spec_key(name, namespace)
    try:
        old = ray.get_actor(name, namespace=namespace)
    except ValueError:  # a previous try stopped it and its replacement did not serve
        old = None
    if old is not None:
        try:
            spec = ray.get(old.spec.remote(), timeout=timeout_s)
            _internal_kv_put(key, pickle.dumps(spec), overwrite=True, namespace=KV_NAMESPACE)
            ray.get(old.stop.remote(), timeout=timeout_s)  # its clients' connections close now
        except ray.exceptions.RayError as exc:  # a previous try's replacement that never started
            logger.info("gateway %s: old actor not stopped cleanly: %r", name, exc)
        ray.kill(old, no_restart=True)
        if not until_name_free(name, namespace, timeout_s):
            raise TimeoutError(f"gateway {name} killed but its name not freed in {timeout_s} s")
    saved = _internal_kv_get(key, namespace=KV_NAMESPACE)
    if saved is None:
        raise RuntimeError(f"gateway {name}: no spec to start it with (deploy it again: raygroups gateway)")
    new = _create(name, ray_node_id, namespace, pickle.loads(saved), runtime_env)
    try:
        address = ray.get(new.start.remote(), timeout=timeout_s)
        others = [a for a in gateway_addresses(namespace, timeout_s) if a != address]
        ray.get(new.set_brokers.remote(sorted([*others, address])), timeout=timeout_s)
    except Exception:
        ray.kill(new, no_restart=True)  # not serving: the next try starts it afresh
        raise
    _internal_kv_del(key, namespace=KV_NAMESPACE)
    return True


def gateway_actors(namespace: str = DEFAULT_NAMESPACE) -> list[Any]:
    """The gateway actors deployed (attached to the service) in `namespace`."""
    found = []
    for name in attached(namespace, ACTOR_PREFIX):
        try:
            found.append(ray.get_actor(name, namespace=namespace))
        except ValueError:  # removed since it was attached
            continue
    return found


def gateway_addresses(namespace: str = DEFAULT_NAMESPACE, timeout_s: float = 30.0) -> list[Address]:
    """The (kafka node id, host, port) of every running gateway."""
    actors = gateway_actors(namespace)
    addresses = ray.get([actor.address.remote() for actor in actors], timeout=timeout_s)
    return sorted(address for address in addresses if address is not None)


def listener_addresses(
    namespace: str = DEFAULT_NAMESPACE, timeout_s: float = 30.0
) -> list[tuple[int, int, str, int]]:
    """(offsets partition, Kafka node id, host, port) of every routed leader's Kafka listener."""
    brokers = ray.get(controller_handle(namespace).kafka_brokers.remote(), timeout=timeout_s)
    return [
        (listener_partition(node), node, host, port) for node, host, port, _ in brokers if is_listener(node)
    ]


def stop_gateways(namespace: str = DEFAULT_NAMESPACE, timeout_s: float = 30.0) -> int:
    """Close every gateway of `namespace` and remove its actor; how many there were."""
    return stop_attached(namespace, ACTOR_PREFIX, timeout_s)
