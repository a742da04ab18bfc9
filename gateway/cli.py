"""`raygroups gateway` and the gateway options of `raygroups start`/`stop`.

`raygroups gateway` runs one gateway in the foreground in front of the
running service (loopback by default); `--all-nodes` deploys one per Ray
node instead (gateway.deploy) and returns; `--list` prints the deployed
gateways' addresses and the partition leaders' Kafka listeners (text only:
`--json` lists the gateways, the bootstrap servers); `--stop` removes them.
`--no-direct`: FindCoordinator names the gateway, not the leaders'
listeners (gateway.direct). `raygroups start --gateway-port
P` deploys them with the service, and `raygroups stop` removes them.
`raygroups start` also configures the partition leaders' Kafka listeners
(`--kafka-ports LOW-HIGH`, the same security options, `--no-direct` for
none).
Credentials are never options: SASL users come from a file
(`--sasl-plain-users FILE`) or from RAYGROUPS_GATEWAY_SASL_USERS.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from actors.core.settings import KafkaListenerSettings
from gateway.connection import DEFAULT_HOST, Limits
from gateway.security import USERS_ENV, SecurityError
from gateway.server import DEFAULT_PORT

_LIMITS = Limits()
_PORTS = "-".join(map(str, KafkaListenerSettings().ports))


def register(cli: Any) -> None:
    """The `raygroups.commands` plugin (actors.cli.main.CommandLine): `gateway`, and the
    gateways `raygroups start --gateway-port` starts with the service."""
    add_parsers(cli.commands, cli.common, cli.start)
    cli.runners["gateway"] = run
    cli.after_start.append(on_start)
    cli.start_options.append(listener_options)


def add_parsers(commands: Any, common: argparse.ArgumentParser, start: argparse.ArgumentParser) -> None:
    """The `gateway` command, and `--gateway-port` with the security options on `start`."""
    parser = commands.add_parser(
        "gateway", parents=[common], help="Kafka wire-protocol gateway, for Kafka clients and tools"
    )
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help="address to listen on; off loopback needs SASL or TLS (default: %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="default: %(default)s")
    parser.add_argument("--advertised-host", help="host clients reach this gateway at (default: --host)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--all-nodes", action="store_true",
                      help="one gateway per Ray node, on its IP (loopback without SASL or TLS)")
    mode.add_argument("--list", action="store_true", help="print the deployed gateways' addresses")
    mode.add_argument("--stop", action="store_true", help="stop the deployed gateways")
    parser.add_argument("--no-direct", dest="direct", action="store_false",
                        help="FindCoordinator names this gateway, not the partition leaders' Kafka listeners "
                             "(for networks that open one port per node)")
    _add_security_options(parser)
    limits = parser.add_argument_group("limits (Kafka's broker defaults)")
    limits.add_argument("--max-request-bytes", type=int, default=_LIMITS.max_request_bytes,
                        help="socket.request.max.bytes (default: %(default)s)")
    limits.add_argument("--max-connections", type=int, default=_LIMITS.max_connections,
                        help="default: %(default)s")
    limits.add_argument("--memory-pool-bytes", type=int, default=_LIMITS.memory_pool_bytes,
                        help="request bytes held across connections (default: %(default)s)")
    limits.add_argument("--idle-timeout-ms", type=int, default=_LIMITS.idle_timeout_ms,
                        help="connections.max.idle.ms (default: %(default)s)")
    limits.add_argument("--frame-deadline-ms", type=int, default=_LIMITS.frame_deadline_ms,
                        help="a frame whose first byte arrived must be whole within this "
                             "(default: %(default)s)")
    start.add_argument("--gateway-port", type=int, help="also start a Kafka gateway per node on this port")
    start.add_argument("--kafka-ports", default=_PORTS, metavar="LOW-HIGH",
                       help="each node's port range for the partition leaders' Kafka listeners "
                            "(default: %(default)s)")
    start.add_argument("--no-direct", dest="direct", action="store_false",
                       help="no Kafka listener in the partition leaders: FindCoordinator names the gateways")
    _add_security_options(start)


def _add_security_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("gateway security")
    group.add_argument("--sasl-plain-users", metavar="FILE",
                       help=f"SASL/PLAIN users, user:password lines (or set {USERS_ENV})")
    group.add_argument("--tls-cert", metavar="FILE", help="TLS certificate (PEM)")
    group.add_argument("--tls-key", metavar="FILE", help="TLS private key (PEM)")
    group.add_argument("--tls-client-ca", metavar="FILE", help="require client certificates this CA signed")
    group.add_argument("--super-users", default="", metavar="User:A;User:B",
                       help="Kafka's super.users: principals allowed everything (docs/security.md)")
    group.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                       help="Kafka's allow.everyone.if.no.acl.found (off: a resource without ACLs is denied)")
    group.add_argument("--loopback-only", action="store_true",
                       help="without SASL or TLS, serve this host's processes only: needed to run a "
                            "gateway without an authorizer before a --ray-credentials service")
    group.add_argument("--ssl-principal-mapping-rules", default="DEFAULT", metavar="RULES",
                       help="Kafka's ssl.principal.mapping.rules for TLS client certificates")


def _authorizer(args: argparse.Namespace) -> dict[str, Any]:
    """The authorizer's settings (on with SASL or TLS), as GatewaySpec and the listeners take them."""
    return {"super_users": tuple(u.strip() for u in args.super_users.split(";") if u.strip()),
            "allow_everyone_if_no_acl_found": args.allow_everyone_if_no_acl_found,
            "ssl_principal_mapping_rules": args.ssl_principal_mapping_rules}


def _spec(args: argparse.Namespace, port: int, limits: Limits) -> Any:
    from gateway.deploy import GatewaySpec

    return GatewaySpec(port=port, sasl_users_file=args.sasl_plain_users, tls_cert=args.tls_cert,
                       tls_key=args.tls_key, tls_client_ca=args.tls_client_ca, limits=limits,
                       direct=getattr(args, "direct", True), loopback_only=args.loopback_only,
                       **_authorizer(args))


def _limits(args: argparse.Namespace) -> Limits:
    return Limits(max_request_bytes=args.max_request_bytes, max_connections=args.max_connections,
                  memory_pool_bytes=args.memory_pool_bytes, idle_timeout_ms=args.idle_timeout_ms,
                  frame_deadline_ms=args.frame_deadline_ms)


def listener_options(args: argparse.Namespace) -> dict[str, Any]:
    """`actors.start`'s `kafka_listener` from `raygroups start`'s options: the same security
    files as the gateways (each node reads them), the port range, or none (`--no-direct`)."""
    low, _, high = args.kafka_ports.partition("-")
    listener = KafkaListenerSettings(
        enabled=args.direct, ports=(int(low), int(high or low)), sasl_users_file=args.sasl_plain_users,
        tls_cert=args.tls_cert, tls_key=args.tls_key, tls_client_ca=args.tls_client_ca,
        **_authorizer(args),
    )
    return {"kafka_listener": listener}


def run(args: argparse.Namespace) -> int:
    """`raygroups gateway`: 0 once stopped, 2 for a refused configuration."""
    try:
        spec = _spec(args, args.port, _limits(args))
        if not (args.all_nodes or args.list or args.stop):
            return _run_foreground(args, spec)
    except (SecurityError, ValueError) as exc:
        print(f"Error: {exc}")
        return 2
    import ray

    import actors
    from gateway import deploy

    if args.all_nodes:
        actors.connect(args.address, namespace=args.namespace)  # the gateways need a running service
        deploy.start_gateways(spec, args.namespace)
    elif not ray.is_initialized():
        ray.init(address=args.address or "auto", namespace=args.namespace, log_to_driver=False)
    if args.stop:
        print(f"stopped {deploy.stop_gateways(args.namespace)} gateway(s)")
        return 0
    print_addresses(deploy.gateway_addresses(args.namespace), args.json)
    if not args.json:
        print_listeners(deploy.listener_addresses(args.namespace))
    return 0


def on_start(args: argparse.Namespace) -> None:
    """After `raygroups start`: the gateways, when `--gateway-port` is given."""
    if args.gateway_port is None:
        return
    from gateway import deploy

    addresses = deploy.start_gateways(_spec(args, args.gateway_port, Limits()), args.namespace)
    print_addresses(addresses, args.json)


def print_addresses(addresses: list[tuple[int, str, int]], as_json: bool) -> None:
    if as_json:
        print(json.dumps([{"node_id": node, "host": host, "port": port} for node, host, port in addresses]))
        return
    if not addresses:
        print("no Kafka gateways running")
        return
    print("Kafka gateways (bootstrap.servers=" + ",".join(f"{h}:{p}" for _, h, p in addresses) + "):")
    for node, host, port in addresses:
        print(f"  node {node}  {host}:{port}")


def print_listeners(listeners: list[tuple[int, int, str, int]]) -> None:
    """The partition leaders' Kafka listeners, which FindCoordinator names (gateway.direct)."""
    if not listeners:
        print("no partition leader has a Kafka listener")
        return
    print("Partition leaders' Kafka listeners (clients reach them after FindCoordinator):")
    for partition, node, host, port in listeners:
        print(f"  partition {partition}  node {node}  {host}:{port}")


def _run_foreground(args: argparse.Namespace, spec: Any) -> int:
    import logging

    import ray

    import actors
    from actors.core import loops
    from gateway.security import check_listen_address, check_ray_path
    from gateway.server import Gateway

    security = spec.security()
    check_listen_address(args.host, security)  # before connecting to anything
    # A service component: it authorizes its Kafka clients itself (docs/security.md, The Ray path).
    client = actors.Client(actors.connect(args.address, namespace=args.namespace).controller, service=True)
    service = ray.get(client.controller.get_settings.remote())
    check_ray_path(args.host, security, service.ray_credentials)  # SecurityError: refused, nothing started
    gateway = Gateway(client, security=security, limits=spec.limits, advertised_host=args.advertised_host,
                      direct=spec.direct)
    # The gateway's one line per closed connection goes to stderr.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def serve() -> None:
        host, port = await gateway.start(args.host, args.port)
        print(f"Kafka gateway on {args.host}:{port} ({security.protocol}); "
              f"bootstrap.servers={host}:{port}; Ctrl-C stops it", flush=True)
        try:
            await gateway.serve_forever()
        finally:
            await gateway.close()

    try:
        loops.run(serve())
    except KeyboardInterrupt:
        pass
    return 0
