"""Starting, finding and stopping the service on a Ray cluster.

`start()` starts the service (or attaches to the one already running in the
namespace) on the current Ray cluster; with no cluster it starts an embedded
local one, keeping the log in a local data directory. `connect()` returns a
client for a running service.

Packages built on the service start actors beside it (the Kafka gateways);
they `attach` each one by name, and `stop()` stops what was attached before
it removes the service, so this package never imports them.
`connect` lives in actors/client/connect.py (re-exported here) so that a client
imports none of the controller's code.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from typing import Any

import ray
from ray.experimental.internal_kv import _internal_kv_del

from actors.client.acls import issue_service_credential
from actors.client.client import Client, controller_handle
from actors.client.connect import connect as connect  # re-exported: actors.service.connect
from actors.client.credential_file import TTL_S, bootstrap_principal, with_super_user, write_credential_file
from actors.client.topics import ensure_topic_registry, stop_topic_registry
from actors.controller.actor import Controller
from actors.controller.forgotten_logs import recover_forgotten_logs
from actors.controller.ray_store import GcsKvStore
from actors.controller.state import recorded_ray_credentials, saved_replication_factor
from actors.core import node_names
from actors.core.attached import KV_NAMESPACE, attached_prefix, until_name_free
from actors.core.attached import attach as attach  # re-exported: gateway.deploy attaches
from actors.core.attached import attached as attached  # re-exported
from actors.core.settings import (
    CONTROLLER_NAME,
    DEFAULT_NAMESPACE,
    KafkaListenerSettings,
    ServiceSettings,
    ray_credentials_default,
    reachable_beyond_loopback,
    settings_for_cluster,
)
from actors.core.singleton import detached_singleton
from coordinator import CoordinatorConfig

DEFAULT_DATA_DIR = os.environ.get("RAYGROUPS_DATA_DIR", "raygroups-data")
# How long `start` waits for the controller's own start (its partitions' leaders found or
# started, each within actor_start_timeout_s) before it asks for the settings in force.
CONTROLLER_START_S = 600.0


def init_local_ray(num_cpus: int = 4, namespace: str = DEFAULT_NAMESPACE, **kwargs: Any) -> None:
    """An embedded single-machine Ray cluster with quiet logs: Ray's own lines on stderr."""
    if ray.is_initialized():
        return
    raylet_messages_to_stderr()
    ray.init(
        # "local": a new cluster even when another one runs on this machine.
        address="local",
        num_cpus=num_cpus,
        namespace=namespace,
        include_dashboard=kwargs.pop("include_dashboard", False),
        object_store_memory=kwargs.pop("object_store_memory", 256 * 1024 * 1024),
        logging_level=kwargs.pop("logging_level", logging.WARNING),
        log_to_driver=kwargs.pop("log_to_driver", False),
        configure_logging=True,
        **kwargs,
    )


def raylet_messages_to_stderr() -> None:
    """Send what the raylets publish to this driver (worker-pool warnings, a node marked
    dead, a raylet's last log lines) to stderr, as Ray's other log lines, not amid the
    program's output on stdout.

    Ray's driver prints them from a background thread through
    `ray._private.worker.print_to_stdstream` with `is_err` False (stdout); this wraps
    that function for messages whose pid is "raylet". Private API: if Ray renames it,
    this does nothing and the messages stay on stdout (tests/actors/test_service_output.py
    notices)."""
    worker_module = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(worker_module, "print_to_stdstream", None)
    if original is None or getattr(original, "raygroups_to_stderr", False):
        return

    def print_raylet_to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            data = {**data, "is_err": True}
        original(data, ignore_prefix)

    print_raylet_to_stderr.raygroups_to_stderr = True  # type: ignore[attr-defined]
    worker_module.print_to_stdstream = print_raylet_to_stderr


def start(
    data_dir: str | None = None,
    *,
    num_partitions: int | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    address: str | None = None,
    coordinator_config: CoordinatorConfig | None = None,
    settings: ServiceSettings | None = None,
    replication_factor: int | None = None,
    min_insync_replicas: int | None = None,
    shared_data_dir: bool = False,
    kafka_listener: KafkaListenerSettings | None = None,
    max_partitions: int | None = None,
    auto_repartition: bool = False,
    ray_credentials: bool | None = None,
) -> Client:
    """Start (or attach to) the service and return a client.

    With no Ray cluster yet and no `address`, an embedded local cluster is
    started and the partition count defaults to the embedded one. Without
    `settings`, the replication factor is the one given, else the one the
    service's saved metadata has, else by the live nodes: 3 (min ISR 2) from
    3 nodes, 2 (min ISR 1) on 2, 1 on one (`actors.core.settings.settings_for_cluster`).
    `shared_data_dir`: every node sees the same data directory, so a
    single-copy partition may restart on any node (otherwise only on the
    node holding its log). `kafka_listener`: the partition leaders' Kafka
    listeners (`KafkaListenerSettings`; default: on, loopback, ports 19092-19291).
    `max_partitions`: the most `Client.repartition` may grow the count to;
    `auto_repartition`: grow it by itself when the load asks (docs/capacity.md).
    `ray_credentials`: Ray callers must present a credential and are checked
    against the ACLs (docs/security.md, The Ray path); the client returned
    holds a super user's credential, also written to `<data_dir>/admin.credential`.
    Not given (None), or False in `settings` that are given: what the service
    recorded at its last start, and for a new service on exactly when SASL or TLS
    is configured (`actors.core.settings.ray_credentials_default`); False turns it off.
    A replicated service whose metadata Ray's GCS lost (a full restart of the
    Ray cluster) recovers it from the replicas on the nodes' disks, or refuses
    to start beside them (`actors/controller/forgotten_logs.py`).
    """
    embedded = not ray.is_initialized() and address is None and "RAY_ADDRESS" not in os.environ
    if embedded:
        init_local_ray(namespace=namespace)
    elif not ray.is_initialized():
        ray.init(address=address or "auto", namespace=namespace, log_to_driver=False)
    live = node_names.live_nodes()  # refuses two live nodes of one name
    live_nodes = len(live)
    if settings is not None:
        data_dir, namespace = settings.data_dir, settings.namespace
    data_dir = os.path.abspath(data_dir or DEFAULT_DATA_DIR)
    metadata = GcsKvStore(namespace, data_dir).load()
    saved = saved_replication_factor(metadata)
    if ray_credentials is None and settings is not None and settings.ray_credentials:
        ray_credentials = True  # given settings asking for it (False there is the field's default)
    if settings is None:
        settings = settings_for_cluster(
            data_dir,
            live_nodes,
            saved_replication_factor=saved,
            embedded=embedded,
            num_partitions=num_partitions,
            namespace=namespace,
            replication_factor=replication_factor,
            min_insync_replicas=min_insync_replicas,
            shared_data_dir=shared_data_dir,
        )
    if coordinator_config is not None:
        settings = replace(settings, coordinator=coordinator_config)
    if kafka_listener is not None:
        settings = replace(settings, kafka_listener=kafka_listener)
    exposed = reachable_beyond_loopback(settings.kafka_listener, os.environ)
    if ray_credentials_default(ray_credentials, recorded_ray_credentials(metadata), exposed):
        listener = with_super_user(settings.kafka_listener)  # a super user to bootstrap with: RayGroups:admin
        settings = replace(settings, ray_credentials=True, kafka_listener=listener)
    else:
        settings = replace(settings, ray_credentials=False)
    if max_partitions is not None or auto_repartition:
        settings = replace(
            settings, auto_repartition=auto_repartition or settings.auto_repartition,
            max_partitions=settings.max_partitions if max_partitions is None else max_partitions,
        )
    if saved is None and settings.replication_factor > live_nodes:
        # Kafka refuses to create the offsets topic below its replication factor.
        raise ValueError(
            f"replication_factor {settings.replication_factor} needs as many live Ray nodes, "
            f"each with its own disk; this cluster has {live_nodes}"
        )
    recover_forgotten_logs(settings, live)
    controller = detached_singleton(Controller, CONTROLLER_NAME, settings, max_concurrency=10_000)
    ensure_topic_registry(settings)
    # The credential follows the settings in force once the controller has started: those of
    # a service already running (this start's are not taken), a rolling restart's over them.
    running: ServiceSettings = ray.get(controller.get_settings.remote(), timeout=CONTROLLER_START_S)
    if ray_credentials is not None and running.ray_credentials != ray_credentials:
        logging.getLogger(__name__).warning(
            "the service running in namespace %r keeps ray_credentials=%s: stop it and start it again, "
            "or roll it (docs/security.md, Turning it on for a running service)",
            namespace, running.ray_credentials,
        )
    if not running.ray_credentials or not running.kafka_listener.super_users:
        return Client(controller)  # (on by a rolling restart of a service without super users: none to issue)
    # The first super user's credential (actors/client/credential_file.py): the returned
    # client holds it, and <data_dir>/admin.credential (mode 0600) for the commands.
    credential = issue_service_credential(controller, bootstrap_principal(running.kafka_listener), TTL_S)
    write_credential_file(running.data_dir, credential)
    return Client(controller, credential=credential)


def stop(namespace: str = DEFAULT_NAMESPACE) -> None:
    """Stop what was attached to the service (its Kafka gateways), unload every
    partition and remove the service's actors; the log stays."""
    stop_attached(namespace)
    stop_topic_registry(namespace)
    try:
        controller = controller_handle(namespace)
    except ValueError:
        return
    ray.get(controller.shutdown.remote())
    ray.kill(controller, no_restart=True)
    for _ in range(500):  # the name frees once the actor is gone
        try:
            controller_handle(namespace)
        except ValueError:
            return
        time.sleep(0.01)


def stop_attached(namespace: str = DEFAULT_NAMESPACE, prefix: str = "", timeout_s: float = 30.0) -> int:
    """Stop and remove every attached actor whose name starts with `prefix`; how many ran."""
    stopped = []
    for name in attached(namespace, prefix):
        try:
            actor = ray.get_actor(name, namespace=namespace)
        except ValueError:  # already gone
            actor = None
        if actor is not None:
            try:
                ray.get(actor.stop.remote(), timeout=timeout_s)
            except Exception:  # an actor that cannot stop cleanly is killed all the same
                pass
            ray.kill(actor, no_restart=True)
            stopped.append(name)
        _internal_kv_del(attached_prefix(namespace) + name, namespace=KV_NAMESPACE)
    for name in stopped:  # the names free once the actors are gone, so a new start makes new ones
        until_name_free(name, namespace)
    return len(stopped)
