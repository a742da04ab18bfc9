"""The `raygroups` command line.

One subcommand per job; `main` returns the process exit code so it can be
called from tests as well as from the console script. `start` runs the
service on a Ray cluster (an existing one, or a local head it starts); the
admin commands are in `admin`.

Commands of the packages built on this one plug in through the
`raygroups.commands` entry-point group (pyproject.toml): the demo
(`actors.demo.command`), the Kafka gateway (`gateway.cli`) and the offset
analytics `lag` and `report` (`spark_bridge.cli`). Each entry point names a
`register(cli: CommandLine)` function that adds its parsers and runners, so
this package imports none of them. The analytics read the running
service's replicas through `CommandLine.log_sources` when no `--data-dir`
is given.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from actors.cli import backup
from actors.cli.admin import ADMIN_COMMANDS, add_parsers
from actors.cli.live_lag import service_live_lag
from actors.cli.tables import one_line, print_table, progress
from actors.client.connect import CREDENTIAL_ENV
from actors.client.credential_file import credential_path, read_credential_file
from actors.core.settings import DEFAULT_NAMESPACE
from coordinator.admin_authz import AuthorizationError
from coordinator.credentials import CredentialError, decode

DEFAULT_DATA_DIR = os.environ.get("RAYGROUPS_DATA_DIR", "raygroups-data")
PLUGIN_GROUP = "raygroups.commands"
Runner = Callable[[argparse.Namespace], int]


@dataclass
class CommandLine:
    """What a command plugin's `register` gets: where to add its parsers, what to run
    for them, and the service's helpers it may use."""

    commands: Any  # argparse's subparsers action
    common: argparse.ArgumentParser  # --address, --namespace, --json
    start: argparse.ArgumentParser  # `raygroups start`, for options started with the service
    # {partition: [replica handles]} of the running service, and the end offsets its registry recorded.
    log_sources: Callable[[argparse.Namespace], dict[int, list[Any]]]
    end_offset_history: Callable[[argparse.Namespace], list[tuple[str, int, int, int]]]
    runners: dict[str, Runner] = field(default_factory=dict)
    # Run after `raygroups start` started the service, before it prints the status.
    after_start: list[Callable[[argparse.Namespace], None]] = field(default_factory=list)
    # Keyword arguments of `actors.start` from a plugin's `raygroups start` options.
    start_options: list[Callable[[argparse.Namespace], dict[str, Any]]] = field(default_factory=list)
    progress: Any = progress
    print_table: Any = print_table
    # The parsed command line -> the live lag rows of `args.groups` (`raygroups lag --live`).
    live_lag: Callable[[argparse.Namespace], Sequence[dict[str, Any]]] = service_live_lag


def build_command_line() -> tuple[argparse.ArgumentParser, CommandLine]:
    parser = argparse.ArgumentParser(
        prog="raygroups",
        description="Kafka consumer groups on Ray: coordinator, CLI and offset analytics.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or the local one)")
    common.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_argument(
        "--credential-file", metavar="PATH",
        help="the Ray-path credential to present, read from this file (mode 0600; default: "
        "RAYGROUPS_CREDENTIAL, else DATA_DIR/admin.credential when there: the super user's, "
        "which `raygroups start` writes when Ray callers are authorized)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    start = commands.add_parser("start", parents=[common], help="start the service on a Ray cluster")
    start.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR,
        help="durable, the same path on every node, each node's own disk (see --shared-data-dir)",
    )
    start.add_argument(
        "--shared-data-dir", action="store_true",
        help="every node sees the same data directory (NFS, CephFS): a single-copy partition may then "
        "restart on any node, not only on the one holding its log",
    )
    start.add_argument(
        "--partitions", type=int,
        help="offsets partitions at the first start (default: 2 per node, at least 4, at most 50); "
        "grow them later with raygroups repartition",
    )
    start.add_argument("--max-partitions", type=int, help="the most they may grow to (default 1024)")
    start.add_argument(
        "--auto-repartition", action="store_true",
        help="grow the partitions by themselves when their load stays past the planned rate",
    )
    start.add_argument("--local", action="store_true", help="start a local Ray head node first")
    start.add_argument(
        "--replication-factor", type=int,
        help="replicas of each offsets partition, each on its own node "
        "(default: 3 from 3 nodes, 2 on 2 nodes, 1 on one)",
    )
    start.add_argument("--min-insync-replicas", type=int, help="default: 2 with 3+ replicas, else 1")
    start.add_argument(
        "--ray-credentials", action=argparse.BooleanOptionalAction, default=None,
        help="Ray callers must present a credential (raygroups credentials) and are checked against "
        "the ACLs (docs/security.md). Default: as the service was last started; a new service has "
        "it exactly when SASL or TLS is configured",
    )
    commands.add_parser("stop", parents=[common], help="stop the service (its log stays)")
    add_parsers(commands, common)
    backup.add_parsers(commands, common)
    cli = CommandLine(
        commands, common, start, service_log_sources, service_end_offset_history,
        runners={"stop": run_stop, **backup.RUNNERS},
    )
    for plugin in sorted(entry_points(group=PLUGIN_GROUP), key=lambda point: point.name):
        plugin.load()(cli)
    return parser, cli


def build_parser() -> argparse.ArgumentParser:
    return build_command_line()[0]


def service_log_sources(args: argparse.Namespace) -> dict[int, list[Any]]:
    """{partition: [replica handles]} of the running service, from its controller."""
    import ray

    import actors

    client = actors.connect(args.ray_address, namespace=args.namespace or DEFAULT_NAMESPACE)
    sources: dict[int, list[Any]] = ray.get(client.controller.log_sources.remote(), timeout=60)
    return sources


def service_end_offset_history(args: argparse.Namespace) -> list[tuple[str, int, int, int]]:
    """The end offsets the running service's topic registry recorded, rows (topic, partition, at_ms, end)."""
    import actors

    client = actors.connect(args.ray_address, namespace=args.namespace or DEFAULT_NAMESPACE)
    return client.end_offset_history()


def run_start(
    args: argparse.Namespace,
    after_start: Sequence[Callable[[argparse.Namespace], None]],
    start_options: Sequence[Callable[[argparse.Namespace], dict[str, Any]]] = (),
) -> int:
    import actors

    options: dict[str, Any] = {}
    for option in start_options:
        options.update(option(args))
    address = args.address
    if args.local:
        # A head node that outlives this command, so other commands can attach.
        subprocess.run(
            ["ray", "start", "--head", "--disable-usage-stats", "--include-dashboard=false"], check=True
        )
        address = "auto"
    with progress("starting the raygroups service"):
        client = actors.start(
            args.data_dir, num_partitions=args.partitions, namespace=args.namespace,
            address=address or "auto", replication_factor=args.replication_factor,
            min_insync_replicas=args.min_insync_replicas, shared_data_dir=args.shared_data_dir,
            max_partitions=args.max_partitions, auto_repartition=args.auto_repartition,
            ray_credentials=args.ray_credentials, **options,
        )
    if client.credential is not None:
        print(f"super user's credential ({decode(client.credential).principal}): "
              f"{credential_path(args.data_dir or DEFAULT_DATA_DIR)} (the commands find it under this data "
              "directory; elsewhere pass it with --credential-file)")
    for started in after_start:
        started(args)
    return ADMIN_COMMANDS["status"](client, args)


def run_stop(args: argparse.Namespace) -> int:
    import ray

    import actors

    ray.init(address=args.address or "auto", namespace=args.namespace, log_to_driver=False)
    actors.stop(args.namespace)
    return 0


def present_credential_file(args: argparse.Namespace) -> None:
    """`--credential-file`: its credential becomes RAYGROUPS_CREDENTIAL for this process, so
    every command's `connect()` (the plugins' too) presents it; ValueError why not. Without
    either, the super user's file `raygroups start` wrote (`DATA_DIR/admin.credential`,
    `--data-dir` or RAYGROUPS_DATA_DIR or ./raygroups-data) when there and its owner's alone:
    the operator's commands work at once on a service that authorizes Ray callers. A service
    that does not ignores a credential."""
    path = getattr(args, "credential_file", None)
    if path:
        os.environ[CREDENTIAL_ENV] = read_credential_file(path)
        return
    if os.environ.get(CREDENTIAL_ENV) or getattr(args, "command", None) == "start":
        return
    default = credential_path(getattr(args, "data_dir", None) or DEFAULT_DATA_DIR)
    if not os.path.exists(default):
        return
    try:
        os.environ[CREDENTIAL_ENV] = read_credential_file(default)
    except ValueError as exc:  # not given: say why it is not presented, and go on without it
        print(f"Warning: {exc}; not presented", file=sys.stderr)


def run_admin(args: argparse.Namespace) -> int:
    import actors

    with progress("connecting to the raygroups service"):
        client = actors.connect(args.address, namespace=args.namespace)
    try:
        return ADMIN_COMMANDS[args.command](client, args)
    except (CredentialError, AuthorizationError) as exc:  # refused by the service: changed nothing
        print(f"Error: {one_line(exc)}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser, cli = build_command_line()
    args = parser.parse_args(argv)
    try:
        present_credential_file(args)
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    if args.command == "start":
        return run_start(args, cli.after_start, cli.start_options)
    code = cli.runners.get(args.command, run_admin)(args)
    if argv is None and getattr(args, "exit_at_once", False):
        exit_at_once(code)
    return code


def exit_at_once(code: int) -> None:
    """End the `raygroups` process of a one-shot question now that its answer is written:
    a Ray driver's interpreter teardown (Ray's shutdown, then every module's) takes longer
    than the question (0.5-1 s). The driver made nothing that outlives it or needs
    closing; Ray sees it leave as any driver that ends. Only for the program itself
    (`argv` None), never for a caller of `main`."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a reader that left (`| head`): nothing more to write
        pass
    os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
