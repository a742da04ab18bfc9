"""`raygroups demo`: the embedded demo, or `--replicated` the replication demo.

A `raygroups.commands` plugin (actors.cli.main): the demo sits above the CLI,
whose tables it prints, so the CLI does not import it.
"""

from __future__ import annotations

import argparse
import os

from actors.cli.main import DEFAULT_DATA_DIR, CommandLine


def register(cli: CommandLine) -> None:
    demo = cli.commands.add_parser(
        "demo", help="embedded demo: groups, a killed member and partition, recovery"
    )
    demo.add_argument("--data-dir", help="default: raygroups-data/demo, or demo-replicated with --replicated")
    demo.add_argument("--seconds", type=float, default=8.0)
    demo.add_argument("--no-report", action="store_true", help="skip the Spark analytics at the end")
    demo.add_argument(
        "--replicated", action="store_true",
        help="replication instead: a simulated 4-node cluster loses a leader's node and disk (no analytics)",
    )
    cli.runners["demo"] = run_demo


def run_demo(args: argparse.Namespace) -> int:
    import ray

    from actors.cli.main import main
    from actors.demo.embedded import print_lag
    from actors.demo.embedded import run_demo as demo
    from actors.service import stop

    if args.replicated:
        from actors.demo.replicated import run_replicated_demo

        replicated_dir = args.data_dir or os.path.join(DEFAULT_DATA_DIR, "demo-replicated")
        return run_replicated_demo(os.path.abspath(replicated_dir), args.seconds)
    data_dir = os.path.abspath(args.data_dir or os.path.join(DEFAULT_DATA_DIR, "demo"))
    page = os.path.join(data_dir, "report", "report.html")
    try:
        client = demo(data_dir, args.seconds)
        # Spark on the same Ray cluster reads the log through the service's replicas and
        # measures lag against the end offsets its registry recorded, as `raygroups report` does.
        if not args.no_report and main(["report", "--out", os.path.dirname(page)]) != 0:
            return 1
        print_lag(client)
        if not args.no_report:
            print(f"report page (tables and plots): {page}")
    finally:
        if ray.is_initialized():
            stop()
            ray.shutdown()
    return 0
