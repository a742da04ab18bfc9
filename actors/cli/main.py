"""The `raygroups` command line.

One subcommand per job; `main` returns the process exit code so it can be
called from tests as well as from the console script. `start` runs the
service on a Ray cluster (an existing one, or a local head it starts);
`demo` is the embedded demo; the admin commands are in `admin_cli`. The
analytics (`lag`, `report`) are `spark_bridge.cli`'s; this module hands
them the running service's replicas (`service_log_sources`), through which
they read the log when no `--data-dir` is given.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Sequence
from typing import Any

from actors.cli.admin import ADMIN_COMMANDS, add_parsers
from actors.cli.tables import print_table, progress
from actors.core.settings import DEFAULT_NAMESPACE
from gateway import cli as gateway_cli
from spark_bridge import cli as spark_cli

DEFAULT_DATA_DIR = os.environ.get("RAYGROUPS_DATA_DIR", "raygroups-data")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raygroups",
        description="Kafka consumer groups on Ray: coordinator, CLI and offset analytics.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or the local one)")
    common.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser("demo", help="embedded demo: groups, a killed member and partition, recovery")
    demo.add_argument("--data-dir", help="default: raygroups-data/demo, or demo-replicated with --replicated")
    demo.add_argument("--seconds", type=float, default=8.0)
    demo.add_argument("--no-report", action="store_true", help="skip the Spark analytics at the end")
    demo.add_argument(
        "--replicated", action="store_true",
        help="replication instead: a simulated 4-node cluster loses a leader's node and disk (no analytics)",
    )
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
    start.add_argument("--partitions", type=int, help="offsets partitions (fixed at first start)")
    start.add_argument("--local", action="store_true", help="start a local Ray head node first")
    start.add_argument(
        "--replication-factor", type=int,
        help="replicas of each offsets partition, each on its own node "
        "(default: 3 from 3 nodes, 2 on 2 nodes, 1 on one)",
    )
    start.add_argument("--min-insync-replicas", type=int, help="default: 2 with 3+ replicas, else 1")
    commands.add_parser("stop", parents=[common], help="stop the service (its log stays)")
    gateway_cli.add_parsers(commands, common, start)
    add_parsers(commands, common)
    spark_cli.add_parsers(
        commands, service_log_sources, service_end_offset_history, progress, print_table=print_table
    )
    return parser


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


def run_demo(args: argparse.Namespace) -> int:
    import ray

    from actors.demo.embedded import print_lag
    from actors.demo.embedded import run_demo as demo

    if args.replicated:
        from actors.demo.replicated import run_replicated_demo

        replicated_dir = args.data_dir or os.path.join(DEFAULT_DATA_DIR, "demo-replicated")
        return run_replicated_demo(os.path.abspath(replicated_dir), args.seconds)
    data_dir = os.path.abspath(args.data_dir or os.path.join(DEFAULT_DATA_DIR, "demo"))
    page = os.path.join(data_dir, "report", "report.html")
    try:
        client = demo(data_dir, args.seconds)
        if not args.no_report:
            # Spark on the same Ray cluster reads the log through the service's replicas and
            # measures lag against the end offsets its registry recorded, as `raygroups report` does.
            report = build_parser().parse_args(["report", "--out", os.path.dirname(page)])
            if spark_cli.report_command(report) != 0:
                return 1
        print_lag(client)
        if not args.no_report:
            print(f"report page (tables and plots): {page}")
    finally:
        from actors.service import stop

        if ray.is_initialized():
            stop()
            ray.shutdown()
    return 0


def run_start(args: argparse.Namespace) -> int:
    import actors

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
        )
    gateway_cli.on_start(args)
    return ADMIN_COMMANDS["status"](client, args)


def run_stop(args: argparse.Namespace) -> int:
    import ray

    import actors

    ray.init(address=args.address or "auto", namespace=args.namespace, log_to_driver=False)
    actors.stop(args.namespace)
    return 0


def run_admin(args: argparse.Namespace) -> int:
    import actors

    with progress("connecting to the raygroups service"):
        client = actors.connect(args.address, namespace=args.namespace)
    return ADMIN_COMMANDS[args.command](client, args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    runners = {"demo": run_demo, "start": run_start, "stop": run_stop, "gateway": gateway_cli.run,
               **spark_cli.COMMANDS}
    return runners.get(args.command, run_admin)(args)


if __name__ == "__main__":
    raise SystemExit(main())
